"""Writing a run's outcome: the compacted context (success), or the cause (failed,
skipped). Each write is one transaction that first checks the run still holds the claim
of the execution writing it."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from compaction import Outcome
from compaction.context import render_messages
from compaction.messages import Message
from compaction.redaction import redact, redact_json
from compaction.tokens import MessageCounter

from ...models import (
    CompactionRun,
    RunEvent,
    RunStatus,
    Session,
    SessionContext,
    TriggerKind,
    Unsuccessful,
)
from .. import run_recall
from ..archive import BufferedArchive
from ..branches import BranchOutcome
from ..common import (
    add_totals,
    batched_writes,
    context_item,
    empty_totals,
    lock_row,
    now,
    update_row,
    with_total,
)
from ..triggers import check_trigger
from .request import enqueue_next, request_run

log = logging.getLogger("dashboard.runs")

# What writing an outcome did: the final status written, or nothing because the run or
# its session is gone (missing) or its claim was taken away meanwhile (lost).
Written = Literal["succeeded", "failed", "skipped", "missing", "lost"]

NO_REQUEST: tuple[str, str] = ("", "")


def commit(run: CompactionRun, token: str, snapshot: list[dict[str, Any]], outcome: Outcome,
           archive: BufferedArchive, counter: MessageCounter, started: float,
           mode: tuple[str, str] = NO_REQUEST, branches: BranchOutcome | None = None) -> Written:
    """Install the compacted prefix, keep what was appended meanwhile, write the archive and
    the run's results: one transaction, or nothing. ``started``: perf_counter() when the
    execution began."""
    with transaction.atomic():
        held = _lock_claimed(run, token)
        if isinstance(held, str):
            if held == "lost":
                log.warning("run %s: lost its claim before committing; nothing written", run.pk)
            return held
        session, locked = held
        # Every change of the live context (an append, a commit) bumps the session's
        # version: at the claim's version the context is the snapshot, and its texts
        # (~1 MB for 500 messages) need not be read and parsed again.
        unchanged = locked.snapshot_version is not None and session.context_version == locked.snapshot_version
        contexts = SessionContext.objects.select_for_update()
        if unchanged:
            contexts = contexts.defer("items", "rendered", "served")
        ctx = contexts.get(session_id=session.pk)
        current = snapshot if unchanged else ctx.load_items()
        n = len(snapshot)
        if [i["id"] for i in current[:n]] != [i["id"] for i in snapshot]:
            # Cannot happen while runs are serialized; refuse rather than lose messages.
            finish_locked(session, locked, "failed", error=(
                "the live context changed under the run (another compaction committed); nothing was changed"),
                error_kind="conflict")
            return "failed"
        appended = current[n:]
        live = _LiveContext.build(outcome, appended, counter, tools_tokens=session.tools_tokens)
        refs = archive.flush(session, locked.pk)

        # The writes below go to PostgreSQL as one round trip (batched_writes), none of
        # them reads what another writes; the reads that follow see them all.
        sent = render_messages(live.messages)
        with batched_writes():
            ctx.write_whole(json.dumps(live.items, separators=(",", ":")), json.dumps(sent, separators=(",", ":")),
                            session.context_version + 1)
            stamp = now()
            _record_compaction(session, live, len(sent), outcome, ctx.version, stamp)
            locked.mark_succeeded(outcome, finished_at=stamp,
                                  duration_ms=int((time.perf_counter() - started) * 1000),
                                  archive_refs=refs, appended=len(appended), context_version=ctx.version, mode=mode,
                                  branches=branches.summary() if branches is not None else None)
            if branches is not None:
                ctx.branch_summaries = branches.data
                update_row(ctx, ["branch_summaries"])
            RunEvent.record(locked.pk, "succeeded", {"messages_after": len(sent),
                                                     "appended_during_run": len(appended),
                                                     "archive_refs": locked.archive_refs}, locked.deliveries)
        enqueue_next(session.pk, locked.pk)
        if appended:
            _follow_up(session)
        # the agent has answered after the session's earlier runs by now: keep their recall
        # (a first compaction has none: every succeeded run counts in compaction_count)
        if session.compaction_count > 1:
            session_id, run_id = session.pk, locked.pk
            transaction.on_commit(lambda: run_recall.measure_quietly(session_id, run_id))
    _record_retention(run.pk, outcome)
    return "succeeded"


def _record_retention(run_id: int, outcome: Outcome) -> None:
    """The run's retention score, once its outcome is committed: scoring scans the evicted
    span (~10 ms for a 500-message session), which need not delay the end of the run. The
    run page and API show no score until it is written; a failure here loses only the score."""
    try:
        CompactionRun.record_retention(run_id, outcome.retention)
    except Exception:  # noqa: BLE001 - the run has succeeded; only its score is missing
        log.exception("run %s: could not record its retention score", run_id)


@dataclass
class _LiveContext:
    """The live context a successful run installs: the compacted prefix, then the messages
    appended while it executed."""

    messages: list[Message]
    items: list[dict[str, Any]]          # SessionContext items (message dicts with token counts)
    totals: dict[str, int]               # tokens per category, tools and total included
    since_summary: list[dict[str, Any]]  # items of the originals after the last engine-written message

    @classmethod
    def build(cls, outcome: Outcome, appended: list[dict[str, Any]], counter: MessageCounter, *,
              tools_tokens: int) -> _LiveContext:
        prefix = list(outcome.messages)
        items = [context_item(m, t, counter.name) for m, t in zip(prefix, counter.count_many(prefix))] + appended
        messages = prefix + [Message.from_dict(i) for i in appended]
        totals = empty_totals()
        for item in items:
            add_totals(totals, item["tokens"]["by_category"])
        totals["tools"] = tools_tokens
        last = max((k for k, m in enumerate(messages) if m.is_engine_written), default=-1)
        since = [i for m, i in zip(messages[last + 1:], items[last + 1:]) if m.is_original]
        return cls(messages, items, with_total(totals), since)


def _record_compaction(session: Session, live: _LiveContext, sent: int, outcome: Outcome, version: int,
                       stamp: Any) -> None:
    """The session's running totals after the commit; frees its run slot. ``sent``: the
    context's messages as sent (what GET context lists and counts, and the run's
    ``messages_after`` plus what was appended meanwhile), not the engine's items: a
    summary's re-inserted user messages travel inside its turn."""
    session.context_tokens = live.totals
    session.context_total = live.totals["total"]
    session.context_messages = sent
    session.context_version = version
    if outcome.summarized:
        session.tokens_since_summary = sum(i["tokens"]["total"] for i in live.since_summary)
        session.messages_since_summary = len(live.since_summary)
    session.compaction_count += 1
    session.last_compacted_at = stamp
    session.active_run_id = None
    # the fields set above, as a plain statement sent with the commit's other writes
    update_row(session, _COMPACTION_FIELDS)


_COMPACTION_FIELDS = ("context_tokens", "context_total", "context_messages", "context_version",
                      "tokens_since_summary", "messages_since_summary", "compaction_count", "last_compacted_at",
                      "active_run_id", "updated_at")


def _follow_up(session: Session) -> None:
    """Messages arrived during the run: if the trigger still fires, queue another auto run."""
    if CompactionRun.objects.filter(session_id=session.pk, status=RunStatus.QUEUED).exists():
        return
    result = check_trigger(session)
    if result.fired:
        request_run(session, trigger=TriggerKind.AUTO, force=False, reason=f"after run: {result.reason}")


# -- failed, skipped ------------------------------------------------------------------------------

def fail(run: CompactionRun, token: str, error: str, error_kind: str, attempts: list[Any] | None = None) -> Written:
    return _finish(run, token, "failed", error=error, error_kind=error_kind, attempts=attempts)


def skip(run: CompactionRun, token: str, reason: str, trigger: dict[str, Any] | None,
         mode: tuple[str, str] = NO_REQUEST, branches: BranchOutcome | None = None, wait_tokens: int = 0) -> Written:
    """End a run that had nothing worth doing; ``wait_tokens`` (a compaction would have freed
    less than the policy's minimum) holds automatic runs back until that many tokens arrived."""
    return _finish(run, token, "skipped", error=reason, error_kind="skipped", trigger=trigger, mode=mode,
                   branches=branches, wait_tokens=wait_tokens)


def _lock_claimed(run: CompactionRun, token: str) -> tuple[Session, CompactionRun] | Literal["missing", "lost"]:
    """Lock the session, then the run (the lock order everywhere), inside the caller's
    transaction; "missing" when either is gone, "lost" when the claim is no longer ours."""
    session = lock_row(Session, run.session_id)
    locked = lock_row(CompactionRun, run.pk)
    if not isinstance(session, Session) or not isinstance(locked, CompactionRun):
        return "missing"
    if not locked.holds_claim(token):
        return "lost"
    return session, locked


def _finish(run: CompactionRun, token: str, status: Unsuccessful, *, error: str, error_kind: str,
            attempts: list[Any] | None = None, trigger: dict[str, Any] | None = None,
            mode: tuple[str, str] = NO_REQUEST, branches: BranchOutcome | None = None,
            wait_tokens: int = 0) -> Written:
    with transaction.atomic():
        held = _lock_claimed(run, token)
        if isinstance(held, str):
            return held
        session, locked = held
        if wait_tokens > 0:
            session.rearm_at_total = session.history_total + wait_tokens
            session.save(update_fields=["rearm_at_total"])
        if branches is not None:
            SessionContext.objects.filter(session_id=session.pk).update(branch_summaries=branches.data)
        finish_locked(session, locked, status, error=error, error_kind=error_kind, attempts=attempts,
                      trigger=trigger, mode=mode, branches=branches.summary() if branches is not None else None)
    return status


def finish_locked(session: Session, run: CompactionRun, status: Unsuccessful, *, error: str, error_kind: str,
                  attempts: list[Any] | None = None, trigger: dict[str, Any] | None = None,
                  mode: tuple[str, str] | None = None, branches: dict[str, Any] | None = None) -> None:
    """End a run that did not succeed, free its session's slot and hand the slot on (the
    caller holds the session and run locks). The error and the attempts' errors may hold an
    upstream's text: stored without any secret it echoed (``compaction.redaction``)."""
    error = redact(error)
    attempts = [redact_json(a) for a in attempts] if attempts is not None else None
    run.mark_finished(status, error=error, error_kind=error_kind, attempts=attempts, trigger=trigger, mode=mode,
                      branches=branches)
    session.release_run(run.pk)
    RunEvent.record(run.pk, status, {"error": error, "error_kind": error_kind}, run.deliveries)
    enqueue_next(session.pk, run.pk)
