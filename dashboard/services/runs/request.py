"""Requesting a run: create the queued row, hand its task to the broker once the
transaction commits, and, when the broker cannot take it (unreachable, queue full),
execute the run in this process instead."""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from compaction import PolicyError
from compaction.messages import canonical_json

from ...celery import app as celery_app
from ...models import CompactionRun, RunEvent, RunStatus, Session, StoredPolicy, TriggerKind
from .. import Conflict, Invalid, NotFound, rate_limits, workers
from ..branches import clean_key
from ..common import now
from ..policies import (
    apply_service_defaults,
    build_policy,
    check_policy,
    effective_policy,
    policy_invalid,
)
from . import no_worker

log = logging.getLogger("dashboard.runs")

# The Celery task that executes a run (dashboard.tasks), addressed by name: the task calls
# into this package, so this package never imports it.
RUN_TASK = "dashboard.run_compaction"

# What one execution of a run came to; the Celery task returns it (for logs and tests).
#   done: already finished; busy: another run holds the session (this one stays queued);
#   running_elsewhere: another worker executes it; missing: the run or session was deleted;
#   lost: its claim was taken away before it could commit (nothing written);
#   requeued: its database connection died mid-way; nothing written, queued again;
#   succeeded | failed | skipped: the final status this execution wrote.
RunResult = Literal["done", "busy", "running_elsewhere", "missing", "lost", "requeued", "succeeded", "failed",
                    "skipped"]


def pending_run(session: Session, *, forced_only: bool = False) -> CompactionRun | None:
    """The session's oldest queued or running run (only forced ones with ``forced_only``)."""
    runs = CompactionRun.objects.filter(session_id=session.pk, status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
    if forced_only:
        runs = runs.filter(force=True)
    return runs.order_by("id").first()


def request_run(session: Session, *, trigger: str = TriggerKind.API, force: bool = True, reason: str = "",
                overrides: dict[str, Any] | None = None, policy: dict[str, Any] | None = None,
                preset: str | None = None, filter_key: str | None = None) -> CompactionRun:
    """Create a queued run and enqueue its task once the transaction commits.

    The policy is the session's effective policy (or the given policy / preset), with
    dotted ``overrides``; it is validated now (PolicyError -> 422) and snapshotted.
    ``filter_key``: the branch whose messages triggered the run (refreshed first).

    When the task cannot be enqueued (broker down, queue full) the run executes inline,
    in this process, as soon as the transaction commits (see :func:`enqueue`); the run
    row then says ``inline`` and why."""
    plan = _plan(session, overrides, policy, preset, filter_key)
    with transaction.atomic():
        return _create(session, plan, trigger=trigger, force=force, reason=reason)


def force_run(session: Session, *, trigger: str = TriggerKind.API, reason: str = "",
              overrides: dict[str, Any] | None = None, policy: dict[str, Any] | None = None,
              preset: str | None = None, filter_key: str | None = None) -> tuple[CompactionRun, bool]:
    """Force a run unless a forced run of the session is already queued or running:
    returns ``(run, created)``.

    Repeated forces (a client retrying, a double click, many clients at once) share the
    pending forced run instead of each queueing another compaction of the same context.
    The check and the insert happen under the session lock, so concurrent forces make one
    run on PostgreSQL (row lock) and SQLite (the IMMEDIATE transaction's write lock).

    A pending forced run is shared only when it would do what was asked: the same resolved
    policy (session policy, ``policy``/``preset`` and ``overrides``) and the same
    ``filter_key``. A force that asks for something else while one is pending is refused
    (Conflict, 409, naming the pending run) rather than silently answered with a run that
    ignores its settings. An automatic run that is pending does not absorb a force: it may
    decide the trigger no longer fires and skip, so the forced run queues behind it.

    A force that would make a run beyond FORCE_SESSION_RATE_LIMIT is refused (RateLimited,
    429 with the seconds to wait); sharing the pending run is never refused."""
    plan = _plan(session, overrides, policy, preset, filter_key)
    with transaction.atomic():
        if Session.objects.select_for_update().filter(pk=session.pk).first() is None:
            raise NotFound(f"session {session.pk} not found")
        # The API and the dashboard create forced runs only here, under this lock.
        pending = pending_run(session, forced_only=True)
        if pending is None:
            rate_limits.check_session_force(session)
            return _create(session, plan, trigger=trigger, force=True, reason=reason), True
        if _same_request(pending, plan):
            return pending, False
        raise Conflict(
            f"run {pending.pk} of this session is already {pending.status} with a different policy, overrides "
            f"or filter_key; wait for it to finish (GET /api/runs/{pending.pk}) or repeat its request")


@dataclass(frozen=True)
class _RunPlan:
    """What a run will do, resolved and validated before any lock is taken."""

    snapshot: dict[str, Any]
    overrides: dict[str, Any]
    row: StoredPolicy | None
    filter_key: str


def _plan(session: Session, overrides: dict[str, Any] | None, policy: dict[str, Any] | None,
          preset: str | None, filter_key: str | None) -> _RunPlan:
    key = clean_key(filter_key, "filter_key")
    row = None
    if policy is not None or preset:
        engine_policy = apply_service_defaults(build_policy(policy, preset, overrides), session)
    else:
        engine_policy, row = effective_policy(session)
        if overrides:
            try:
                engine_policy = check_policy(engine_policy.with_overrides(overrides))
            except PolicyError as exc:
                raise policy_invalid(exc) from None
    return _RunPlan(engine_policy.to_json(), overrides or {}, row, key or "")


def _same_request(run: CompactionRun, plan: _RunPlan) -> bool:
    return (canonical_json(run.policy_snapshot) == canonical_json(plan.snapshot)
            and (run.filter_key or "") == plan.filter_key)


def _create(session: Session, plan: _RunPlan, *, trigger: str, force: bool, reason: str) -> CompactionRun:
    """Insert the queued run and send its task after commit (the caller's transaction)."""
    row = plan.row
    run = CompactionRun.objects.create(
        project_id=session.project_id, session_id=session.pk, trigger=trigger, reason=reason, force=force,
        policy=row, policy_version=row.version if row is not None else None,
        policy_snapshot=plan.snapshot, overrides=plan.overrides, task_id=uuid.uuid4().hex,
        enqueued_at=now(), progress_step="queued", filter_key=plan.filter_key)
    RunEvent.record(run.pk, "queued", {"trigger": trigger, "force": force, "reason": reason,
                                       **({"filter_key": plan.filter_key} if plan.filter_key else {})})
    enqueue_on_commit(run.pk, run.task_id)
    return run


def validate_overrides(overrides: dict[str, Any] | None) -> None:
    if overrides is None:
        return
    if not isinstance(overrides, dict):
        raise Invalid("overrides: expected an object of dotted setting paths")


# -- enqueueing ------------------------------------------------------------------------------

class QueueFull(Exception):
    """More runs are waiting than RUN_QUEUE_MAX allows."""


# Exceptions that mean "the task could not be handed to the broker" (a capped Redis
# answers OOM when it is full).
ENQUEUE_ERRORS: tuple[type[BaseException], ...] = (
    KombuOperationalError, ConnectionError, TimeoutError, OSError, QueueFull, RedisError)


def is_eager() -> bool:
    """Whether tasks execute in the caller's thread (tests, CELERY_TASK_ALWAYS_EAGER)."""
    return bool(celery_app.conf.task_always_eager)


def _check_queue_room(run_id: int) -> None:
    limit = settings.RUN_QUEUE_MAX
    if not limit:
        return
    waiting = CompactionRun.objects.filter(status=RunStatus.QUEUED).exclude(pk=run_id).count()
    if waiting >= limit:
        raise QueueFull(f"queue full: {waiting} runs are waiting (RUN_QUEUE_MAX={limit})")


def enqueue_on_commit(run_id: int, task_id: str) -> None:
    """Send the run's task (:func:`enqueue`) once the transaction commits. A failure then
    (the connection dropped right after the commit) is logged, never raised into what has
    committed: the run stays queued and the recovery loop sends it again. The callback is a
    named function, not a functools.partial: Django logs a failed robust callback by its
    ``__qualname__``, which a partial lacks, and that AttributeError escaped instead, failing
    a request whose writes had committed (a client then repeats a stored append) and
    skipping the callbacks after it."""
    def send_task() -> None:
        try:
            enqueue(run_id, task_id)
        except (OperationalError, InterfaceError):
            # enqueue reads the worker beats and the queue's size first: a connection that
            # dropped right after the commit gets one more try on a new one, or the run
            # would wait for the recovery loop's re-send (RUN_RESEND_AFTER, minutes)
            log.warning("run %s: database connection lost before its task was sent; sending it on a new one",
                        run_id, exc_info=True)
            connection.close()
            enqueue(run_id, task_id)

    transaction.on_commit(send_task, robust=True)


def enqueue(run_id: int, task_id: str) -> None:
    """Send the run's task; when that fails (broker unreachable, queue full) execute the run
    here and now instead, recorded the same way (run row, events) plus ``inline``.

    With no live worker (no heartbeat within WORKER_LIVE_WITHIN), the task is sent all the
    same, and unless RUN_NO_WORKER_FALLBACK is ``off`` the run executes here once it has
    waited RUN_NO_WORKER_WAIT seconds with still no worker in sight (at once when workers
    have been gone that long already)."""
    task = celery_app.tasks[RUN_TASK]
    if is_eager():
        task.apply_async(args=[run_id], task_id=task_id)
        return
    silent = worker_silence()
    try:
        _check_queue_room(run_id)
        if silent is not None and silent >= settings.RUN_NO_WORKER_WAIT and (
                silent != float("inf") or settings.RUN_NO_WORKER_WAIT <= 0):
            run_inline(run_id, no_worker_reason(silent), task_id)
            return
        task.apply_async(args=[run_id], task_id=task_id,
                         retry_policy={"max_retries": settings.RUN_ENQUEUE_RETRIES,
                                       "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5})
    except ENQUEUE_ERRORS as exc:
        reason = str(exc) if isinstance(exc, QueueFull) else f"broker unavailable: {type(exc).__name__}: {exc}"
        log.warning("run %s could not be enqueued (%s); executing it inline", run_id, reason)
        run_inline(run_id, reason, task_id)
        return
    if silent is not None:
        remaining = no_worker_wait_left(silent)
        log.warning("run %s queued with no live worker; executing it here in %.0f s unless one appears",
                    run_id, remaining)
        no_worker.watch(run_id, remaining, run_if_no_worker)


def worker_silence() -> float | None:
    """Seconds a queued task (a run, a sweep) should count as already waited for a worker (None: a worker is alive,
    or the fallback is off). ``inf`` when none was ever seen and this process has not yet
    waited in vain for one."""
    if settings.RUN_NO_WORKER_FALLBACK != "inline":
        return None
    silent = workers.silent_for(fresh=True)
    if silent is None:
        no_worker.note_gave_up(False)
        return None
    if silent == float("inf") and no_worker.gave_up():
        return settings.RUN_NO_WORKER_WAIT
    return silent


def no_worker_wait_left(silent: float) -> float:
    """Seconds a task queued now waits for a worker before the fallback (``silent``: from
    ``worker_silence``; ``inf``, never seen, counts as not waited yet)."""
    return settings.RUN_NO_WORKER_WAIT - (0.0 if silent == float("inf") else silent)


def no_worker_reason(silent: float) -> str:
    seen = "none seen yet" if silent == float("inf") else f"none seen for {silent:.0f} s"
    return (f"no worker (WORKER_LIVE_WITHIN={settings.WORKER_LIVE_WITHIN:g} s, {seen}) after waiting "
            f"RUN_NO_WORKER_WAIT={settings.RUN_NO_WORKER_WAIT:g} s")


def run_if_no_worker(run_id: int) -> None:
    """The no-worker wait of a run ran out: execute it here if it is still queued and still
    no worker beats (a worker that appeared in the meantime takes its message)."""
    silent = workers.silent_for(fresh=True)
    if silent is None:
        return
    row = CompactionRun.objects.filter(pk=run_id).values_list("status", "task_id").first()
    if row is None or row[0] != RunStatus.QUEUED:
        return
    no_worker.note_gave_up(True)
    log.warning("run %s waited RUN_NO_WORKER_WAIT=%ss with no live worker; executing it inline", run_id,
                settings.RUN_NO_WORKER_WAIT)
    run_inline(run_id, no_worker_reason(silent), row[1])


def run_inline(run_id: int, reason: str, task_id: str | None = None) -> RunResult:
    """Execute a queued run synchronously in this process (the sync fallback): its task,
    applied locally instead of through the broker."""
    reason = reason[:2000]
    CompactionRun.mark_inline(run_id, reason)
    RunEvent.record(run_id, "inline", {"reason": reason})
    state: RunResult = celery_app.tasks[RUN_TASK].apply(args=[run_id], task_id=task_id, throw=True).result
    if state == "busy":
        RunEvent.record(run_id, "inline_deferred", {
            "reason": "another run of this session is executing; this run stays queued and starts when it ends"})
    return state


def enqueue_next(session_id: int, finished_id: int) -> None:
    """Hand the session's slot to its oldest queued run (the caller holds the session lock;
    the task is sent once the transaction commits)."""
    # Its id first (a query Django builds in half the time of a whole run's), the run only if
    # there is one: at the end of most runs none is queued.
    first = (CompactionRun.objects.filter(session_id=session_id, status=RunStatus.QUEUED).exclude(pk=finished_id)
             .order_by("id").values_list("id", flat=True).first())
    nxt = CompactionRun.objects.filter(pk=first).first() if first is not None else None
    if nxt is not None:
        nxt.reissue()
        enqueue_on_commit(nxt.pk, nxt.task_id)
