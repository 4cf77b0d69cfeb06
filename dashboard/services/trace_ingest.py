"""Spans received over OTLP (``POST /v1/traces``) folded into sessions.

The conversion is the engine's (``compaction.formats.otlp``: which spans are model calls,
their messages; ``_calls.fold_onto``: grouping, order, the resent history stored once). Here:
what is new and where it goes. A span id already stored for the project (``TraceSpan``) adds
nothing, so an exporter's retry of a batch changes nothing. Each conversation of a request
is written in its own savepoint: a conversation whose spans cannot be folded (a bad span, a
tool result without its call, the same id with two contents) is refused whole, the others
are stored, and the answer's ``partial_success`` counts the refused spans and says why. Two
requests carrying one conversation at once: the one that loses the race on the session's
external id or a span id reads again and adds only what is still new.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from compaction.errors import SessionValidationError
from compaction.formats._calls import Call, CallError, fold_onto
from compaction.formats.otlp import call_of, spans_of

from ..models import Project, Session, StoredMessage, TraceSpan
from . import Conflict, ServiceError
from .sessions import append_messages, import_session

#: Tries of one conversation's write when a concurrent request wrote it first.
_ATTEMPTS = 3
#: Why-texts kept in one answer (a batch of thousands of bad spans says the first few).
MAX_REASONS = 5


@dataclass
class IngestResult:
    spans: int = 0
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)
    sessions: set[int] = field(default_factory=set)

    def refuse(self, count: int, reason: str) -> None:
        self.rejected += count
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(reason)

    @property
    def error_message(self) -> str:
        more = self.rejected and len(self.reasons) == MAX_REASONS
        return "; ".join(self.reasons) + (" (and more)" if more else "")


def ingest(project: Project, request: dict[str, Any]) -> IngestResult:
    """Store the model calls of one OTLP export request (JSON form, see ``otlp.spans_of``)."""
    result = IngestResult()
    calls: list[Call] = []
    for where, span in spans_of(request):
        result.spans += 1
        if not isinstance(span, dict):
            result.refuse(1, f"{where}: not a span object")
            continue
        try:
            call = call_of(where, span)
        except CallError as exc:
            result.refuse(1, f"{where}: {exc}")
            continue
        if call is not None:
            calls.append(call)
    groups: dict[str, list[Call]] = {}
    for call in calls:
        groups.setdefault(call.group, []).append(call)
    for group, group_calls in groups.items():
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    _store_group(project, group, group_calls, result)
                break
            except (Conflict, IntegrityError) as exc:
                # Another request stored this conversation (or these spans) meanwhile: read
                # again, and what it stored is no longer new.
                if attempt == _ATTEMPTS:
                    result.refuse(len(group_calls), f"conversation {group}: {exc}")
            except (SessionValidationError, ServiceError) as exc:
                result.refuse(len(group_calls), f"conversation {group}: {exc}")
                break
    return result


def _store_group(project: Project, group: str, calls: list[Call], result: IngestResult) -> None:
    known = set(TraceSpan.objects.filter(project=project, span_id__in=[c.id for c in calls])
                .values_list("span_id", flat=True))
    fresh = [c for c in calls if c.id not in known]
    if not fresh:
        return
    sessions = {s.external_id: s for s in Session.objects.select_for_update().filter(
        Q(external_id=group) | Q(external_id__startswith=group + "#"), project=project).order_by("pk")}
    stored = {key: [m.raw for m in StoredMessage.objects.filter(session=s).order_by("position")]
              for key, s in sessions.items()}
    folded = fold_onto(stored, fresh, "otlp", None)
    for key, raws in folded.appended.items():
        append_messages(sessions[key], raws)
    for imported in folded.sessions:
        assert imported.external_id is not None
        sessions[imported.external_id] = import_session(project, imported, source="otlp").session
    rows = []
    for key, key_calls in folded.calls.items():
        session = sessions[key]
        result.sessions.add(session.pk)
        rows += [TraceSpan(project=project, span_id=c.id, trace_id=c.trace_id or "", session=session,
                           model=(c.model or "")[:200], input_tokens=c.usage.get("input_tokens"),
                           output_tokens=c.usage.get("output_tokens")) for c in key_calls]
    TraceSpan.objects.bulk_create(rows)
