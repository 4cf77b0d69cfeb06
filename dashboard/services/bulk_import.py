"""Bulk import: many sessions at once, for loading an existing history (a migration, a
benchmark). The rows a session import writes are the same as ``sessions.import_session``'s,
but they are written for a whole chunk of sessions with one ``bulk_create`` per table, and
no compaction is queued (the trigger is checked on the next append, as for an import with
``auto_compact`` off).

Each chunk is validated and counted before anything of it is written, and written in one
transaction: a fault leaves earlier chunks in place and nothing of the chunk at fault.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from django.db import IntegrityError, transaction

from compaction.context import render_messages
from compaction.formats import ImportedSession
from compaction.messages import CallTracker, Message, Provenance, original_id
from compaction.policy import Policy

from ..models import Project, Session, SessionContext, StoredMessage
from . import Conflict, Invalid
from .archive import store_entries
from .common import add_totals, clean_text, context_item, counter_for, empty_totals, now, with_total
from .policies import apply_service_defaults, project_policy
from .sessions import EmptyImport, _arrival, _call_names, _check_fields, _dumps, _message_row


@dataclass
class BulkResult:
    sessions: int = 0
    messages: int = 0
    seconds: float = 0.0
    session_ids: list[int] = field(default_factory=list)


@dataclass
class _Prepared:
    imported: ImportedSession
    policy: Policy
    msgs: list[Message]
    tokens: list
    tools_tokens: int
    totals: dict
    open_calls: dict


def _chunks(items: Iterable[ImportedSession], size: int) -> Iterator[list[ImportedSession]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def import_many(project: Project, sessions: Iterable[ImportedSession], *, chunk_size: int = 200,
                message_batch: int = 2000) -> BulkResult:
    """Import converted sessions ``chunk_size`` at a time; returns counts, ids and the time taken."""
    if chunk_size < 1 or message_batch < 1:
        raise Invalid("chunk_size and message_batch must be at least 1")
    base, _row = project_policy(project)
    policies: dict[str, Policy] = {}
    result = BulkResult()
    started = time.perf_counter()
    for index, chunk in enumerate(_chunks(sessions, chunk_size)):
        prepared = [_prepare(project, imported, base, policies, f"sessions[{index * chunk_size + k}]")
                    for k, imported in enumerate(chunk)]
        ids = _write_chunk(project, prepared, message_batch)
        result.sessions += len(ids)
        result.messages += sum(len(p.msgs) for p in prepared)
        result.session_ids.extend(ids)
    result.seconds = time.perf_counter() - started
    return result


def _prepare(project: Project, imported: ImportedSession, base: Policy, policies: dict[str, Policy],
             where: str) -> _Prepared:
    if not imported.messages:
        raise EmptyImport(f"{where}: messages: an import needs at least one message")
    _check_fields(imported, where)
    model = imported.model or ""
    if model not in policies:
        policies[model] = apply_service_defaults(base, Session(project=project, model=model))
    policy = policies[model]
    counter = counter_for(policy)
    msgs = [Message(raw, original_id(i), Provenance.ORIGINAL, i) for i, raw in enumerate(imported.messages)]
    tokens = counter.count_many(msgs)
    totals = empty_totals()
    for t in tokens:
        add_totals(totals, t.by_category)
    tracker = CallTracker()
    for i, raw in enumerate(imported.messages):
        tracker.feed(raw, i)  # already validated by convert; this recovers the open calls
    return _Prepared(imported, policy, msgs, tokens, counter.count_tools(imported.tools or []), totals,
                     dict(tracker.open))


def _session_row(project: Project, p: _Prepared, stamp) -> Session:
    imported, n = p.imported, len(p.msgs)
    history = with_total(p.totals)
    return Session(
        project=project, title=clean_text(imported.title or "")[:500], external_id=imported.external_id or "",
        model=imported.model or "", metadata=imported.metadata, source_format=imported.format or "", tools=imported.tools or [],
        tools_tokens=p.tools_tokens, tokenizer=counter_for(p.policy).name, message_count=n, history_tokens=history,
        history_total=history["total"], context_tokens=with_total(dict(p.totals, tools=p.tools_tokens)),
        context_total=history["total"] + p.tools_tokens, context_messages=n, context_version=1,
        tokens_since_summary=history["total"], messages_since_summary=n, open_tool_calls=p.open_calls,
        last_message_at=stamp)


def _write_chunk(project: Project, prepared: list[_Prepared], message_batch: int) -> list[int]:
    stamp = now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                rows = Session.objects.bulk_create([_session_row(project, p, stamp) for p in prepared])
        except IntegrityError:
            raise Conflict("a session with one of these external_ids already exists in this project") from None
        StoredMessage.objects.bulk_create(
            (_message_row(row, i, m.raw, t, m.hash) for p, row in zip(prepared, rows)
             for i, (m, t) in enumerate(zip(p.msgs, p.tokens))), batch_size=message_batch)
        contexts = []
        for p, row in zip(prepared, rows):
            counter = counter_for(p.policy)
            live, live_tokens, entries = _arrival(p.policy, counter, row.pk, p.msgs, p.tokens,
                                                  _call_names(p.imported.messages))
            if entries:  # tool output over the size limit: its preview is what the context holds
                store_entries(entries, session=row)
                live_totals = empty_totals()
                for t in live_tokens:
                    add_totals(live_totals, t.by_category)
                row.context_tokens = with_total(dict(live_totals, tools=row.tools_tokens))
                row.context_total = row.context_tokens["total"]
                row.tokens_since_summary = sum(t.total for t in live_tokens)
                row.save(update_fields=["context_tokens", "context_total", "tokens_since_summary"])
            contexts.append(SessionContext(session=row, version=1,
                                           items=_dumps([context_item(m, t, counter.name) for m, t in zip(live, live_tokens)]),
                                           rendered=_dumps(render_messages(live))))
        SessionContext.objects.bulk_create(contexts, batch_size=max(1, message_batch // 100))
    return [row.pk for row in rows]
