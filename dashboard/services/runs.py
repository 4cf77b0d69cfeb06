"""Compaction runs: request, claim, execute, commit; the state machine is

    queued ──claim──▶ running ──commit──▶ succeeded
                         │   └──────────▶ failed | skipped
                         └─(worker lost: no heartbeat)─▶ queued again (at most RUN_MAX_DELIVERIES)

Guarantees:
- at most one run executes per session: claiming sets ``Session.active_run_id`` under the
  session lock (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the IMMEDIATE transaction holds
  the database write lock), and a run of a session whose slot is taken stays queued; the
  run that holds the slot enqueues the next queued run when it finishes;
- a run compacts a snapshot (the live context when it was claimed); messages appended
  while it executes are kept after the compacted prefix when it commits;
- a run's results (archive entries, new live context, run row) are written in one
  transaction that first checks the run's claim token, so a duplicated or redelivered
  task, or a worker that was presumed dead, can never commit twice;
- on any failure the live context is untouched and the run records the cause.

Lock order everywhere: Session, then CompactionRun, then SessionContext.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from compaction import Compactor, PolicyError
from compaction import Policy as EnginePolicy
from compaction.context import render_messages
from compaction.errors import SummaryError
from compaction.messages import Message as EngineMessage

from ..models import CompactionRun, RunEvent, RunStatus, Session, SessionContext, TriggerKind
from . import Invalid
from .archive import BufferedArchive
from .common import add_totals, counter_for, empty_totals, now, with_total
from .policies import apply_service_defaults, build_policy, check_hooks, effective_policy, policy_invalid

log = logging.getLogger("dashboard.runs")


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def add_event(run_id: int, kind: str, data: dict | None = None, delivery: int = 0) -> None:
    RunEvent.objects.create(run_id=run_id, kind=kind[:50], data=_json_safe(data or {}), delivery=delivery)


# -- requesting ------------------------------------------------------------------------------

def pending_run(session: Session) -> CompactionRun | None:
    return (CompactionRun.objects.filter(session_id=session.pk, status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
            .order_by("id").first())


def request_run(session: Session, *, trigger: str = TriggerKind.API, force: bool = True, reason: str = "",
                overrides: dict | None = None, policy: dict | None = None, preset: str | None = None,
                filter_key: str | None = None) -> CompactionRun:
    """Create a queued run and enqueue its task once the transaction commits.

    The policy is the session's effective policy (or the given policy / preset), with
    dotted ``overrides``; it is validated now (PolicyError -> 422) and snapshotted.
    ``filter_key``: the branch whose messages triggered the run (refreshed first).

    When the task cannot be enqueued (broker down, queue full) the run executes inline,
    in this process, as soon as the transaction commits (see :func:`enqueue`); the run
    row then says ``inline`` and why."""
    from .branches import clean_key  # noqa: PLC0415

    filter_key = clean_key(filter_key, "filter_key")
    row = None
    if policy is not None or preset:
        engine_policy = apply_service_defaults(build_policy(policy, preset, overrides), session)
    else:
        engine_policy, row = effective_policy(session)
        if overrides:
            try:
                engine_policy = check_hooks(engine_policy.with_overrides(overrides))
            except PolicyError as exc:
                raise policy_invalid(exc) from None
    with transaction.atomic():
        run = CompactionRun.objects.create(
            project_id=session.project_id, session_id=session.pk, trigger=trigger, reason=reason, force=force,
            policy=row, policy_version=row.version if row is not None else None,
            policy_snapshot=engine_policy.to_json(), overrides=overrides or {}, task_id=uuid.uuid4().hex,
            enqueued_at=now(), progress_step="queued", filter_key=filter_key or "")
        add_event(run.pk, "queued", {"trigger": trigger, "force": force, "reason": reason,
                                     **({"filter_key": filter_key} if filter_key else {})})
        transaction.on_commit(partial(enqueue, run.pk, run.task_id), robust=True)
    return run


class QueueFull(Exception):
    """More runs are waiting than RUN_QUEUE_MAX allows."""


def _enqueue_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the task could not be handed to the broker"."""
    from kombu.exceptions import OperationalError as KombuOperationalError  # noqa: PLC0415

    errors: list[type[BaseException]] = [KombuOperationalError, ConnectionError, TimeoutError, OSError, QueueFull]
    try:
        from redis.exceptions import RedisError  # noqa: PLC0415  (OOM: "queue full" on a capped Redis)

        errors.append(RedisError)
    except ImportError:  # pragma: no cover - redis is a dependency of the Redis transport only
        pass
    return tuple(errors)


def _check_queue_room(run_id: int) -> None:
    limit = settings.RUN_QUEUE_MAX
    if not limit:
        return
    waiting = CompactionRun.objects.filter(status=RunStatus.QUEUED).exclude(pk=run_id).count()
    if waiting >= limit:
        raise QueueFull(f"queue full: {waiting} runs are waiting (RUN_QUEUE_MAX={limit})")


def enqueue(run_id: int, task_id: str) -> None:
    """Send the run's task; when that fails (broker unreachable, queue full) execute the run
    here and now instead, recorded the same way (run row, events) plus ``inline``."""
    from ..tasks import run_compaction  # noqa: PLC0415

    if _eager():
        run_compaction.apply_async(args=[run_id], task_id=task_id)
        return
    try:
        _check_queue_room(run_id)
        run_compaction.apply_async(args=[run_id], task_id=task_id,
                                   retry_policy={"max_retries": settings.RUN_ENQUEUE_RETRIES,
                                                 "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5})
    except _enqueue_errors() as exc:
        reason = str(exc) if isinstance(exc, QueueFull) else f"broker unavailable: {type(exc).__name__}: {exc}"
        log.warning("run %s could not be enqueued (%s); executing it inline", run_id, reason)
        run_inline(run_id, reason)


def run_inline(run_id: int, reason: str) -> str:
    """Execute a queued run synchronously in this process (the sync fallback)."""
    reason = reason[:2000]
    CompactionRun.objects.filter(pk=run_id).update(inline=True, inline_reason=reason)
    add_event(run_id, "inline", {"reason": reason})
    state = execute(run_id)
    if state == "busy":
        add_event(run_id, "inline_deferred", {
            "reason": "another run of this session is executing; this run stays queued and starts when it ends"})
    return state


# -- claiming ----------------------------------------------------------------------------------

@dataclass
class Claim:
    state: str  # claimed | done | busy | running_elsewhere | missing
    run: CompactionRun | None = None
    token: str = ""
    items: list[dict] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)
    last_message_at: float | None = None
    parent_request: dict | None = None     # what GET .../context served last (cache-safe requests)
    branches: dict | None = None           # the stored branch summaries


def _fresh(run: CompactionRun) -> bool:
    if run.heartbeat_at is None:
        return False
    return (now() - run.heartbeat_at).total_seconds() < settings.RUN_STALE_AFTER


def claim(run_id: int) -> Claim:
    head = CompactionRun.objects.filter(pk=run_id).values("session_id").first()
    if head is None:
        return Claim("missing")
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=head["session_id"]).first()
        run = CompactionRun.objects.select_for_update().filter(pk=run_id).first()
        if session is None or run is None:
            return Claim("missing")
        if run.is_final:
            return Claim("done", run)
        if run.status == RunStatus.RUNNING and _fresh(run):
            return Claim("running_elsewhere", run)
        if session.active_run_id not in (None, run.pk):
            other = CompactionRun.objects.filter(pk=session.active_run_id).values("status").first()
            if other is not None and other["status"] == RunStatus.RUNNING:
                return Claim("busy", run)
            # the slot points at a run that is not executing (finished or deleted): take it
        if run.status == RunStatus.QUEUED and CompactionRun.objects.filter(
                session_id=session.pk, status=RunStatus.QUEUED, pk__lt=run.pk).exists():
            # First come, first served: an older queued run goes first (the run that
            # finishes next, or the recovery loop, enqueues it).
            return Claim("busy", run)
        if run.deliveries >= settings.RUN_MAX_DELIVERIES:
            _finish_locked(session, run, RunStatus.FAILED, error=(
                f"gave up after {run.deliveries} executions that did not finish (worker lost or hard time "
                f"limit); the session is unchanged"), error_kind="worker_lost")
            return Claim("done", run)
        ctx = SessionContext.objects.select_for_update().get(session_id=session.pk)
        items = ctx.load_items()
        stamp = now()
        run.status = RunStatus.RUNNING
        run.claim_token = uuid.uuid4().hex
        run.started_at = run.started_at or stamp
        run.heartbeat_at = stamp
        run.deliveries += 1
        run.snapshot_messages = len(items)
        run.snapshot_version = ctx.version
        run.progress_step = "started"
        run.progress_detail = {"messages": len(items), "tokens": session.context_total}
        run.save()
        session.active_run_id = run.pk
        session.save(update_fields=["active_run_id"])
        add_event(run.pk, "started", {"snapshot_messages": len(items), "context_version": ctx.version,
                                      "delivery": run.deliveries}, run.deliveries)
        parent = None
        if ctx.served:
            parent = {"messages": json.loads(ctx.served)}
            if session.tools:
                parent["tools"] = list(session.tools)
        return Claim("claimed", run, run.claim_token, items, list(session.tools or []),
                     session.last_message_at.timestamp() if session.last_message_at else None,
                     parent, ctx.branch_summaries or {})


# -- executing ----------------------------------------------------------------------------------

class Heartbeat:
    """Writes ``heartbeat_at`` every RUN_HEARTBEAT_INTERVAL seconds while a run executes; a run
    whose heartbeat stops (its worker died) is queued again by the recovery loop."""

    def __init__(self, run_id: int, token: str):
        self.run_id, self.token = run_id, token
        self.interval = settings.RUN_HEARTBEAT_INTERVAL
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Heartbeat":
        if self.interval > 0 and not _eager():
            self._thread = threading.Thread(target=self._loop, name=f"heartbeat-run-{self.run_id}", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    CompactionRun.objects.filter(pk=self.run_id, claim_token=self.token,
                                                 status=RunStatus.RUNNING).update(heartbeat_at=now())
                except Exception:  # noqa: BLE001 - a missed beat is retried on the next tick
                    log.warning("heartbeat of run %s failed", self.run_id, exc_info=True)
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _eager() -> bool:
    # Inline execution (tests, CELERY_TASK_ALWAYS_EAGER): the caller's thread is the only
    # one executing, so no heartbeat; a second connection could not see its transaction.
    from ..celery import app  # noqa: PLC0415

    return bool(app.conf.task_always_eager)


def execute(run_id: int) -> str:
    """Run a compaction end to end; returns the final state word (for logs and tests)."""
    c = claim(run_id)
    if c.state != "claimed":
        log.info("run %s not executed: %s", run_id, c.state)
        return c.state
    run, token = c.run, c.token
    delivery = run.deliveries
    heartbeat = Heartbeat(run.pk, token).start()
    started = time.perf_counter()
    try:
        try:
            policy = EnginePolicy.load(run.policy_snapshot)
        except PolicyError as exc:
            return fail(run, token, f"the run's policy is invalid: {exc}", "policy_error")
        counter = counter_for(policy)
        archive = BufferedArchive()
        compactor = Compactor(policy, archive=archive, session_id=str(run.session_id), counter=counter)
        messages = [EngineMessage.from_dict(i) for i in c.items]
        reporter = _Reporter(run.pk, token, delivery)
        parent = c.parent_request if policy.summarizer.cache_safe else None
        try:
            outcome = compactor.compact(messages, tools=c.tools or None, force=run.force, run_id=str(run.pk),
                                        on_event=reporter.event, progress=reporter.progress,
                                        last_message_at=c.last_message_at, parent_request=parent)
        except SummaryError as exc:
            return fail(run, token, str(exc), "summary_error", attempts=[_attempt(a) for a in exc.attempts])
        except _soft_time_limit() as exc:
            return fail(run, token, f"soft time limit of {settings.RUN_SOFT_TIME_LIMIT}s reached while "
                                    f"compacting ({type(exc).__name__}); the session is unchanged", "time_limit")
        except Exception as exc:  # noqa: BLE001 - any engine fault is recorded on the run
            log.exception("run %s failed", run.pk)
            return fail(run, token, f"{type(exc).__name__}: {exc}", type(exc).__name__)
        mode = request_mode(policy, reporter, bool(outcome) and getattr(outcome, "summarized", False), c)
        branches = _refresh_branches(run, c, policy, compactor, reporter, parent)
        if not outcome:
            return skip(run, token, outcome.reason, outcome.trigger, mode=mode, branches=branches)
        return commit(run, token, c.items, outcome, archive, counter, started, mode=mode, branches=branches)
    except _soft_time_limit():
        return fail(run, token, f"soft time limit of {settings.RUN_SOFT_TIME_LIMIT}s reached while saving; "
                                "the session is unchanged", "time_limit")
    finally:
        heartbeat.stop()


def _soft_time_limit():
    from celery.exceptions import SoftTimeLimitExceeded  # noqa: PLC0415

    return SoftTimeLimitExceeded


def _attempt(a: Any) -> dict:
    return _json_safe(a.to_dict() if hasattr(a, "to_dict") else a)


def request_mode(policy, reporter: "_Reporter", summarized: bool, c: Claim) -> tuple[str, str]:
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


def _refresh_branches(run: CompactionRun, c: Claim, policy, compactor, reporter: "_Reporter",
                      parent: dict | None):
    """Branch summaries of sessions that use filter keys (None otherwise). A fault here is
    recorded and never fails the run."""
    from . import branches as branch_service  # noqa: PLC0415

    try:
        reporter.progress("branches", {"filter_key": run.filter_key or None})
        return branch_service.refresh(run.session_id, c.branches, policy, force=run.force, run_id=str(run.pk),
                                      trigger_key=run.filter_key or None, parent_request=parent,
                                      on_event=reporter.event, compactor=compactor,
                                      last_message_at=c.last_message_at)
    except _soft_time_limit():
        raise
    except Exception as exc:  # noqa: BLE001 - branch summaries are a side product of the run
        log.exception("run %s: branch summaries failed", run.pk)
        reporter.event({"type": "branch_summaries_failed", "error": f"{type(exc).__name__}: {exc}"})
        return None


def _save_branches(session_id: int, branches) -> None:
    if branches is not None:
        SessionContext.objects.filter(session_id=session_id).update(branch_summaries=branches.data)


class _Reporter:
    """Writes engine events as RunEvent rows and progress (step, attempt) on the run."""

    def __init__(self, run_id: int, token: str, delivery: int):
        self.run_id, self.token, self.delivery = run_id, token, delivery
        self.attempt = 0
        self.summary_request: dict | None = None

    def event(self, event: dict) -> None:
        kind = str(event.get("type") or "event")
        if kind == "summary_request" and "filter_key" not in event:
            self.summary_request = event
        try:
            add_event(self.run_id, kind, event, self.delivery)
            if kind == "generate_summary":
                self.attempt += 1
                CompactionRun.objects.filter(pk=self.run_id, claim_token=self.token).update(
                    progress_attempt=self.attempt, heartbeat_at=now())
        except Exception:  # noqa: BLE001 - diagnostics must not break a run
            log.warning("could not record event of run %s", self.run_id, exc_info=True)

    def progress(self, step: str, detail: dict) -> None:
        try:
            CompactionRun.objects.filter(pk=self.run_id, claim_token=self.token).update(
                progress_step=step[:50], progress_detail=_json_safe(detail), heartbeat_at=now())
        except Exception:  # noqa: BLE001
            log.warning("could not record progress of run %s", self.run_id, exc_info=True)


def _item(msg: EngineMessage, tokens) -> dict:
    d = msg.to_dict()
    d["tokens"] = {"total": tokens.total, "by_category": dict(tokens.by_category)}
    return d


def commit(run: CompactionRun, token: str, snapshot: list[dict], outcome, archive: BufferedArchive, counter,
           started: float, mode: tuple[str, str] = ("", ""), branches=None) -> str:
    """Install the compacted prefix, keep what was appended meanwhile, write the archive and
    the run's results: one transaction, or nothing."""
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=run.session_id).first()
        locked = CompactionRun.objects.select_for_update().filter(pk=run.pk).first()
        if session is None or locked is None:
            return "missing"
        if locked.claim_token != token or locked.status != RunStatus.RUNNING:
            log.warning("run %s: lost its claim before committing; nothing written", run.pk)
            return "lost"
        ctx = SessionContext.objects.select_for_update().get(session_id=session.pk)
        current = ctx.load_items()
        n = len(snapshot)
        if [i["id"] for i in current[:n]] != [i["id"] for i in snapshot]:
            # Cannot happen while runs are serialized; refuse rather than lose messages.
            _finish_locked(session, locked, RunStatus.FAILED, error=(
                "the live context changed under the run (another compaction committed); nothing was changed"),
                error_kind="conflict")
            return RunStatus.FAILED
        appended = current[n:]
        prefix = list(outcome.messages)
        prefix_tokens = counter.count_many(prefix)
        new_items = [_item(m, t) for m, t in zip(prefix, prefix_tokens)] + appended
        all_messages = prefix + [EngineMessage.from_dict(i) for i in appended]
        rows = archive.flush(session, locked.pk)

        totals = empty_totals()
        for item in new_items:
            add_totals(totals, item["tokens"]["by_category"])
        totals["tools"] = session.tools_tokens
        totals = with_total(totals)
        last = max((k for k, m in enumerate(all_messages) if m.is_engine_written), default=-1)
        since = [(m, i) for m, i in zip(all_messages[last + 1:], new_items[last + 1:]) if m.is_original]

        ctx.items = json.dumps(new_items, separators=(",", ":"))
        ctx.rendered = json.dumps(render_messages(all_messages), separators=(",", ":"))
        ctx.version += 1
        ctx.save(update_fields=["items", "rendered", "version", "updated_at"])

        stamp = now()
        session.context_tokens = totals
        session.context_total = totals["total"]
        session.context_messages = len(new_items)
        session.context_version = ctx.version
        if outcome.summarized:
            session.tokens_since_summary = sum(i["tokens"]["total"] for _, i in since)
            session.messages_since_summary = len(since)
        session.compaction_count += 1
        session.last_compacted_at = stamp
        session.active_run_id = None
        session.save()

        data = outcome.to_dict()
        locked.status = RunStatus.SUCCEEDED
        locked.finished_at = stamp
        locked.duration_ms = int((time.perf_counter() - started) * 1000)
        locked.tokens_before = outcome.tokens_before
        locked.tokens_after = outcome.tokens_after
        locked.messages_before = outcome.messages_before
        locked.messages_after = outcome.messages_after
        locked.model = (outcome.model or "")[:200]
        locked.prompt = _json_safe(outcome.prompt or [])
        locked.summary = outcome.summary or ""
        locked.attempts = _json_safe(outcome.attempts or [])
        locked.ledger = _json_safe(outcome.ledger)
        locked.retention = _json_safe(outcome.retention)
        locked.compression = outcome.compression
        locked.archive_refs = [r.entry_id for r in rows]
        locked.trigger_info = _json_safe(outcome.trigger)
        locked.result = _json_safe({k: data.get(k) for k in (
            "summarized", "extractive", "evicted_messages", "summary_tokens", "tokens_cleared", "tokens_truncated",
            "reduction_events", "cut", "notes", "clipped")})
        locked.appended_during_run = len(appended)
        locked.context_version_after = ctx.version
        locked.progress_step = "done"
        locked.request_mode, locked.request_mode_reason = mode
        if branches is not None:
            locked.result["branches"] = _json_safe(branches.summary())
            ctx.branch_summaries = branches.data
            ctx.save(update_fields=["branch_summaries"])
        locked.save()
        add_event(locked.pk, "succeeded", {"messages_after": len(new_items), "appended_during_run": len(appended),
                                           "archive_refs": locked.archive_refs}, locked.deliveries)
        _enqueue_next(session, locked)
        if appended:
            _follow_up(session)
    return RunStatus.SUCCEEDED


def _follow_up(session: Session) -> None:
    """Messages arrived during the run: if the trigger still fires, queue another auto run."""
    from .sessions import check_trigger  # noqa: PLC0415

    if CompactionRun.objects.filter(session_id=session.pk, status=RunStatus.QUEUED).exists():
        return
    result = check_trigger(session)
    if result.fired:
        request_run(session, trigger=TriggerKind.AUTO, force=False, reason=f"after run: {result.reason}")


def fail(run: CompactionRun, token: str, error: str, error_kind: str, attempts: list | None = None) -> str:
    return _finish(run, token, RunStatus.FAILED, error=error, error_kind=error_kind, attempts=attempts)


def skip(run: CompactionRun, token: str, reason: str, trigger: dict | None, mode: tuple[str, str] = ("", ""),
         branches=None) -> str:
    return _finish(run, token, RunStatus.SKIPPED, error=reason, error_kind="skipped", trigger=trigger, mode=mode,
                   branches=branches)


def _finish(run: CompactionRun, token: str, status: str, mode: tuple[str, str] = ("", ""), branches=None,
            **fields) -> str:
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=run.session_id).first()
        locked = CompactionRun.objects.select_for_update().filter(pk=run.pk).first()
        if session is None or locked is None:
            return "missing"
        if locked.claim_token != token or locked.status != RunStatus.RUNNING:
            return "lost"
        locked.request_mode, locked.request_mode_reason = mode
        if branches is not None:
            locked.result = {**(locked.result or {}), "branches": _json_safe(branches.summary())}
            _save_branches(session.pk, branches)
        _finish_locked(session, locked, status, **fields)
    return status


def _finish_locked(session: Session, run: CompactionRun, status: str, *, error: str = "", error_kind: str = "",
                   attempts: list | None = None, trigger: dict | None = None) -> None:
    stamp = now()
    run.status = status
    run.finished_at = stamp
    if run.started_at:
        run.duration_ms = int((stamp - run.started_at).total_seconds() * 1000)
    run.error = error
    run.error_kind = error_kind[:100]
    if attempts is not None:
        run.attempts = attempts
    if trigger is not None:
        run.trigger_info = _json_safe(trigger)
    run.progress_step = "done"
    run.save()
    if session.active_run_id == run.pk:
        session.active_run_id = None
        session.save(update_fields=["active_run_id"])
    add_event(run.pk, status, {"error": error, "error_kind": error_kind}, run.deliveries)
    _enqueue_next(session, run)


def _enqueue_next(session: Session, finished: CompactionRun) -> None:
    """Hand the session's slot to its oldest queued run."""
    nxt = (CompactionRun.objects.filter(session_id=session.pk, status=RunStatus.QUEUED).exclude(pk=finished.pk)
           .order_by("id").first())
    if nxt is not None:
        nxt.task_id = uuid.uuid4().hex
        nxt.enqueued_at = now()
        nxt.save(update_fields=["task_id", "enqueued_at"])
        transaction.on_commit(partial(enqueue, nxt.pk, nxt.task_id), robust=True)


# -- recovery -------------------------------------------------------------------------------------

def recover(stale_after: float | None = None) -> dict:
    """Queue again the runs whose worker died (no heartbeat for ``stale_after`` seconds) and
    re-send the queued runs whose message may have been lost. Safe to call from every
    worker at once: each change is a conditional update under the session lock."""
    stale_after = settings.RUN_STALE_AFTER if stale_after is None else stale_after
    cutoff = now() - timedelta(seconds=stale_after)
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    for run_id, session_id in list(CompactionRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff)
                                   .values_list("id", "session_id")):
        with transaction.atomic():
            session = Session.objects.select_for_update().filter(pk=session_id).first()
            run = CompactionRun.objects.select_for_update().filter(pk=run_id).first()
            if (session is None or run is None or run.status != RunStatus.RUNNING
                    or (run.heartbeat_at is not None and run.heartbeat_at >= cutoff)):
                continue
            silent = (now() - (run.heartbeat_at or run.started_at or now())).total_seconds()
            if run.deliveries >= settings.RUN_MAX_DELIVERIES:
                _finish_locked(session, run, RunStatus.FAILED, error=(
                    f"worker lost {run.deliveries} times (no heartbeat for {silent:.0f}s); the session is unchanged"),
                    error_kind="worker_lost")
                counts["failed"] += 1
                continue
            run.status = RunStatus.QUEUED
            run.claim_token = ""
            run.progress_step = "requeued"
            run.task_id = uuid.uuid4().hex
            run.enqueued_at = now()
            run.save()
            if session.active_run_id == run.pk:
                session.active_run_id = None
                session.save(update_fields=["active_run_id"])
            add_event(run.pk, "requeued", {"reason": f"no heartbeat for {silent:.1f}s: worker lost",
                                           "delivery": run.deliveries}, run.deliveries)
            transaction.on_commit(partial(enqueue, run.pk, run.task_id), robust=True)
            counts["requeued"] += 1
    # Queued runs whose message may be gone (a broker that lost it, a worker killed while
    # holding it): re-send when nothing executes on their session.
    resend_cutoff = now() - timedelta(seconds=settings.RUN_RESEND_AFTER)
    for run in list(CompactionRun.objects.filter(status=RunStatus.QUEUED, enqueued_at__lt=resend_cutoff)
                    .select_related("session").order_by("id")):
        if run.session.active_run_id is not None:
            continue
        with transaction.atomic():
            updated = CompactionRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED,
                                                   enqueued_at=run.enqueued_at).update(
                task_id=uuid.uuid4().hex, enqueued_at=now())
            if updated:
                fresh = CompactionRun.objects.get(pk=run.pk)
                transaction.on_commit(partial(enqueue, fresh.pk, fresh.task_id), robust=True)
                counts["resent"] += 1
    # A session slot held by a run that is not running (crash between two writes).
    for session in Session.objects.filter(active_run_id__isnull=False).only("id", "active_run_id"):
        status = CompactionRun.objects.filter(pk=session.active_run_id).values_list("status", flat=True).first()
        if status != RunStatus.RUNNING:
            Session.objects.filter(pk=session.pk, active_run_id=session.active_run_id).update(active_run_id=None)
    return counts


def validate_overrides(overrides: dict | None) -> None:
    if overrides is None:
        return
    if not isinstance(overrides, dict):
        raise Invalid("overrides: expected an object of dotted setting paths")
