"""Executing a run: claim it, beat while the engine compacts the snapshot, record the
engine's events and progress, then write the outcome."""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from compaction import Compactor, Outcome, Policy, PolicyError, Skipped
from compaction.errors import SummaryError
from compaction.messages import Message
from compaction.redaction import redact
from compaction.tokens import MessageCounter, MessageTokens

from ...models import CompactionRun, RunEvent, RunStatus, json_safe
from ...text_repair import RepairCount, counting_repairs
from .. import branches as branch_service
from .. import connections
from ..archive import BufferedArchive
from ..common import counter_for, insert_values
from ..durability import relaxed_transaction
from .beat_thread import BeatThread
from .claim import Claim, claim
from .commit import commit, fail, skip
from .recover import requeue_now
from .request import RunResult

log = logging.getLogger("dashboard.runs")


class Heartbeat(BeatThread):
    """Writes ``heartbeat_at`` while a run executes; a run whose heartbeat stops (its worker
    died) is queued again by the recovery loop. Each beat also calls ``on_beat`` (the
    reporter's flush: a run inside a long summary call shows where it is)."""

    def __init__(self, run_id: int, token: str, on_beat: Callable[[], None] | None = None):
        super().__init__()
        self.run_id, self.token, self.on_beat = run_id, token, on_beat
        self.label = f"run {run_id}"

    def beat(self) -> bool:
        if not CompactionRun.beat(self.run_id, self.token):
            return False
        if self.on_beat is not None:
            self.on_beat()
        return True


class Reporter:
    """Writes engine events as RunEvent rows and progress (step, attempt) on the run.

    For its first RUN_PROGRESS_AFTER seconds a run writes nothing of either: most runs end
    by then, and ``flush`` writes all of it once, before the outcome. After that, events
    are written in batches (a reduction step can emit one per message): when the step
    changes, when EVENT_BATCH are waiting or EVENT_FLUSH_SECONDS have passed, and on every
    heartbeat. Each write is one transaction holding the waiting events and the latest
    progress, and its commit does not wait for the log flush (see services/durability):
    the outcome's commit, which does, makes them durable with it."""

    EVENT_BATCH = 100
    EVENT_FLUSH_SECONDS = 0.25

    def __init__(self, run_id: int, token: str, delivery: int):
        self.run_id, self.token, self.delivery = run_id, token, delivery
        self.attempt = 0
        self.summary_request: dict[str, Any] | None = None
        self._pending: list[tuple[str, str, datetime]] = []  # kind, data as stored, time
        self._progress: dict[str, Any] | None = None  # fields of the run not written yet
        self._since = time.monotonic()
        self._quiet_until = self._since + settings.RUN_PROGRESS_AFTER
        # The heartbeat's thread flushes too; one write at a time keeps the events in order.
        self._lock = threading.Lock()

    def event(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type") or "event")
        if kind == "summary_request" and "filter_key" not in event:
            self.summary_request = event
        try:
            # stored as RunEvent.data stores it (JSONTextField), encoded once
            row = (kind[:50], json.dumps(event, default=str, separators=(",", ":")), timezone.now())
            with self._lock:
                self._pending.append(row)
                if kind == "generate_summary":
                    self.attempt += 1
                    self._note(progress_attempt=self.attempt)
            if kind == "generate_summary" or len(self._pending) >= self.EVENT_BATCH or \
                    time.monotonic() - self._since >= self.EVENT_FLUSH_SECONDS:
                self._flush_unless_quiet()
        except Exception:  # noqa: BLE001 - diagnostics must not break a run
            log.warning("could not record event of run %s", self.run_id, exc_info=True)

    def progress(self, step: str, detail: dict[str, Any]) -> None:
        with self._lock:
            self._note(progress_step=step[:50], progress_detail=json_safe(detail))
        self._flush_unless_quiet()

    def _note(self, **fields: Any) -> None:
        self._progress = {**(self._progress or {}), **fields, "heartbeat_at": timezone.now()}

    def _flush_unless_quiet(self) -> None:
        if time.monotonic() >= self._quiet_until:
            self.flush()

    def flush(self) -> None:
        """Write the waiting events and progress now."""
        with self._lock:
            pending, self._pending, self._since = self._pending, [], time.monotonic()
            progress, self._progress = self._progress, None
            if not pending and not progress:
                return
            try:
                with relaxed_transaction():
                    if pending:
                        stamp = RunEvent._meta.get_field("created_at")
                        insert_values(RunEvent, ("run_id", "kind", "data", "delivery", "created_at"), [
                            (self.run_id, kind, data, self.delivery, stamp.get_db_prep_save(at, connection))
                            for kind, data, at in pending])
                    if progress:
                        CompactionRun.objects.filter(pk=self.run_id, claim_token=self.token,
                                                     status=RunStatus.RUNNING).update(**progress)
            except Exception:  # noqa: BLE001 - diagnostics must not break a run
                log.warning("could not record %d events or the progress of run %s", len(pending), self.run_id,
                            exc_info=True)


def execute(run_id: int) -> RunResult:
    """Run a compaction end to end; returns what it came to (for logs and tests)."""
    with counting_repairs() as repairs:
        c = claim_reconnecting(run_id)
    run = c.run
    if c.state != "claimed" or run is None:
        log.info("run %s not executed: %s", run_id, c.state)
        return "missing" if c.state == "claimed" else c.state
    token = c.token
    if repairs.characters:
        _report_repairs(run, repairs)
    reporter = Reporter(run.pk, token, run.deliveries)
    heartbeat = Heartbeat(run.pk, token, on_beat=reporter.flush).start()
    started = time.perf_counter()
    try:
        try:
            policy = connections.resolve(Policy.load(run.policy_snapshot))
        except PolicyError as exc:
            return fail(run, token, f"the run's policy is invalid: {exc}", "policy_error")
        counter = counter_for(policy)
        archive = BufferedArchive()
        compactor = Compactor(policy, archive=archive, session_id=str(run.session_id), counter=counter)
        messages = [Message.from_dict(i) for i in c.items]
        take_stored_counts(counter, messages, c.items)
        parent = c.parent_request if policy.summarizer.cache_safe else None
        try:
            outcome = compactor.compact(messages, tools=c.tools or None, force=run.force, run_id=str(run.pk),
                                        on_event=reporter.event, progress=reporter.progress,
                                        last_message_at=c.last_message_at, parent_request=parent)
        except SummaryError as exc:
            reporter.flush()
            return fail(run, token, str(exc), "summary_error", attempts=[_attempt(a) for a in exc.attempts])
        except SoftTimeLimitExceeded as exc:
            reporter.flush()
            return fail(run, token, f"soft time limit of {settings.RUN_SOFT_TIME_LIMIT}s reached while "
                                    f"compacting ({type(exc).__name__}); the session is unchanged", "time_limit")
        except Exception as exc:  # noqa: BLE001 - any engine fault is recorded on the run
            log.exception("run %s failed", run.pk)
            reporter.flush()
            return fail(run, token, f"{type(exc).__name__}: {exc}", type(exc).__name__)
        mode = request_mode(policy, reporter, isinstance(outcome, Outcome) and outcome.summarized, c)
        branches = _refresh_branches(run, c, policy, compactor, reporter, parent)
        reporter.flush()
        if isinstance(outcome, Skipped):
            return skip(run, token, outcome.reason, outcome.trigger, mode=mode, branches=branches,
                        wait_tokens=0 if run.force else outcome.wait_tokens)
        return commit(run, token, c.items, outcome, archive, counter, started, mode=mode, branches=branches)
    except SoftTimeLimitExceeded:
        reporter.flush()
        return fail(run, token, f"soft time limit of {settings.RUN_SOFT_TIME_LIMIT}s reached while saving; "
                                "the session is unchanged", "time_limit")
    except (OperationalError, InterfaceError) as exc:
        # The database connection died (server restarted, connection terminated) while the
        # outcome was being written: its transaction rolled back, so nothing was written.
        # Queue the run again on a new connection; if that fails too, the recovery loop
        # does it once the heartbeat is stale.
        log.warning("run %s: database connection lost (%s: %s); nothing written, queueing it again",
                    run.pk, type(exc).__name__, exc)
        heartbeat.stop()
        connection.close()
        try:
            if requeue_now(run.session_id, run.pk, token,
                           f"database connection lost during the run ({type(exc).__name__}); nothing was written"):
                return "requeued"
        except (OperationalError, InterfaceError):
            log.warning("run %s: could not queue it again now; the recovery loop will", run.pk, exc_info=True)
            connection.close()
        raise
    finally:
        heartbeat.stop()


CLAIM_ATTEMPTS = 3


def claim_reconnecting(run_id: int) -> Claim:
    """:func:`claim`, again on a new connection when the database connection died during it
    (terminated, server restarted): its transaction rolled back, so nothing was claimed, and
    giving up would leave the run queued until the recovery loop re-sends it
    (RUN_RESEND_AFTER, minutes)."""
    for attempt in range(1, CLAIM_ATTEMPTS + 1):
        try:
            return claim(run_id)
        except (OperationalError, InterfaceError) as exc:
            # inside a caller's transaction (inline execution) there is nothing to retry on
            if connection.in_atomic_block or attempt == CLAIM_ATTEMPTS:
                raise
            log.warning("run %s: database connection lost while claiming it (%s: %s); claiming again",
                        run_id, type(exc).__name__, exc)
            connection.close()
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def take_stored_counts(counter: MessageCounter, messages: list[Message], items: list[dict[str, Any]]) -> None:
    """The live context's items carry the counts made when their messages arrived, with the
    name of the counter that made them: a worker counting with the same one takes them
    instead of tokenizing the whole context again (~40 ms for 500 messages it has not seen)."""
    for msg, item in zip(messages, items):
        stored = item.get("tokens")
        if isinstance(stored, dict) and stored.get("counter") == counter.name:
            counter.remember(msg, MessageTokens(int(stored["total"]), dict(stored["by_category"])))


def _report_repairs(run: CompactionRun, repairs: RepairCount) -> None:
    """The live context held lone surrogates (stored before they were refused): the run
    works on U+FFFD in their place, so what it writes differs from the stored bytes."""
    RunEvent.record(run.pk, "text_repaired", {
        "messages": repairs.values, "characters": repairs.characters,
        "detail": (f"{repairs.characters} lone surrogate(s) in {repairs.values} stored message(s) were read as "
                   "U+FFFD (the replacement character); the summary, archive and new context hold U+FFFD, "
                   "the stored messages are unchanged"),
    }, run.deliveries)


def _attempt(a: Any) -> Any:
    return json_safe(a.to_dict() if hasattr(a, "to_dict") else a)


def request_mode(policy: Policy, reporter: Reporter, summarized: bool, c: Claim) -> tuple[str, str]:
    """(mode, why) of the run's summary request: ``cache_safe`` or ``standalone``, or ``""``
    when the run sent none. The engine reports its choice as a ``summary_request`` event."""
    event = reporter.summary_request
    if event is not None and (event.get("filter_key") is None):
        return str(event.get("mode") or "standalone"), str(event.get("reason") or "")
    if not summarized:
        return "", "no summary request in this run"
    if not policy.summarizer.cache_safe:
        return "standalone", "cache-safe requests are off in this policy (summarizer.cache_safe)"
    if c.parent_request is None:
        return "standalone", "no request prefix served yet (GET .../context was not called)"
    return "standalone", "standalone summary request"


def _refresh_branches(run: CompactionRun, c: Claim, policy: Policy, compactor: Compactor,
                      reporter: Reporter, parent: dict[str, Any] | None) -> branch_service.BranchOutcome | None:
    """Branch summaries of sessions that use filter keys (None otherwise). A fault here is
    recorded and never fails the run."""
    try:
        reporter.progress("branches", {"filter_key": run.filter_key or None})
        return branch_service.refresh(run.session_id, c.branches, policy, force=run.force, run_id=str(run.pk),
                                      trigger_key=run.filter_key or None, parent_request=parent,
                                      on_event=reporter.event, compactor=compactor,
                                      last_message_at=c.last_message_at)
    except SoftTimeLimitExceeded:
        raise
    except Exception as exc:  # noqa: BLE001 - branch summaries are a side product of the run
        log.exception("run %s: branch summaries failed", run.pk)
        reporter.event({"type": "branch_summaries_failed", "error": redact(f"{type(exc).__name__}: {exc}")})
        return None
