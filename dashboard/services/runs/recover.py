"""Recovering runs whose worker died: :func:`recover` queues them again (or fails them
after RUN_MAX_DELIVERIES) and re-sends queued runs whose message may be lost (and does the
same for tuning sweeps and grid chunks, services/tuning_recovery);
:func:`requeue_now` is the same for an execution that knows it cannot finish (its database
connection died), without waiting for its heartbeat to go stale.

Each worker runs the recovery loop in a background thread (started on worker_ready):
every RUN_RECOVERY_INTERVAL seconds it calls :func:`recover` and prunes the filesystem
broker's processed/ folder. Several workers running it at once is fine."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from django.conf import settings
from django.db import close_old_connections, connection, transaction

from ...models import CompactionRun, RunEvent, RunStatus, Session
from ..common import now
from ..fork_guard import no_fork
from .commit import finish_locked
from .request import enqueue_on_commit

log = logging.getLogger("dashboard.recovery")

RecoveryCounts = dict[Literal["requeued", "failed", "resent", "tuning"], int]

#: Recovery passes for other work a lost worker leaves running, each called with the
#: staleness cutoff by every recovery pass; what they queue again counts as "tuning".
OTHER_PASSES: list[Callable[[datetime], int]] = []


def register_pass(other: Callable[[datetime], int]) -> None:
    if other not in OTHER_PASSES:
        OTHER_PASSES.append(other)


def recover(stale_after: float | None = None) -> RecoveryCounts:
    """Queue again the runs whose worker died (no heartbeat for ``stale_after`` seconds) and
    re-send the queued runs whose message may have been lost. Safe to call from every
    worker at once: each change is a conditional update under the session lock."""
    stale_after = settings.RUN_STALE_AFTER if stale_after is None else stale_after
    cutoff = now() - timedelta(seconds=stale_after)
    counts: RecoveryCounts = {"requeued": 0, "failed": 0, "resent": 0, "tuning": 0}
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
                finish_locked(session, run, "failed", error=(
                    f"worker lost {run.deliveries} times (no heartbeat for {silent:.0f}s); the session is unchanged"),
                    error_kind="worker_lost")
                counts["failed"] += 1
                continue
            run.requeue()
            session.release_run(run.pk)
            RunEvent.record(run.pk, "requeued", {"reason": f"no heartbeat for {silent:.1f}s: worker lost",
                                                 "delivery": run.deliveries}, run.deliveries)
            enqueue_on_commit(run.pk, run.task_id)
            counts["requeued"] += 1
    # Queued runs whose message may be gone (a broker that lost it, a worker killed while
    # holding it): re-send when nothing executes on their session.
    resend_cutoff = now() - timedelta(seconds=settings.RUN_RESEND_AFTER)
    for queued in list(CompactionRun.objects.filter(status=RunStatus.QUEUED, enqueued_at__lt=resend_cutoff)
                       .select_related("session").order_by("id")):
        if queued.session.active_run_id is not None:
            continue
        with transaction.atomic():
            if queued.resend():
                enqueue_on_commit(queued.pk, queued.task_id)
                counts["resent"] += 1
    # A session slot held by a run that is not running (crash between two writes).
    for held in Session.objects.filter(active_run_id__isnull=False).only("id", "active_run_id"):
        holder = held.active_run_id
        if holder is None:
            continue
        status = CompactionRun.objects.filter(pk=holder).values_list("status", flat=True).first()
        if status != RunStatus.RUNNING:
            Session.release_stale_slot(held.pk, holder)
    # Sweeps and grid chunks lost with their worker (services/tuning_recovery, registered
    # there: the tuning services import this package, so it cannot import them).
    counts["tuning"] = sum(other(cutoff) for other in OTHER_PASSES)
    return counts

def requeue_now(session_id: int, run_id: int, token: str, reason: str) -> bool:
    """Queue again, at once, a run whose execution (holding ``token``) cannot finish but knows
    it (its database connection died mid-commit): no need to wait for its heartbeat to go
    stale. Returns False when the run moved on meanwhile, or after RUN_MAX_DELIVERIES
    executions (the recovery loop then fails it as usual)."""
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        run = CompactionRun.objects.select_for_update().filter(pk=run_id).first()
        if session is None or run is None or not run.holds_claim(token):
            return False
        if run.deliveries >= settings.RUN_MAX_DELIVERIES:
            return False
        run.requeue()
        session.release_run(run.pk)
        RunEvent.record(run.pk, "requeued", {"reason": reason, "delivery": run.deliveries}, run.deliveries)
        enqueue_on_commit(run.pk, run.task_id)
    return True


_thread: threading.Thread | None = None
_stop = threading.Event()


def recover_once() -> RecoveryCounts:
    """One recovery pass (the loop's tick; also ``manage.py recover_runs``)."""
    close_old_connections()
    counts = recover()
    if any(counts.values()):
        log.info("recovery: %s", counts)
    prune_processed()
    return counts


def prune_processed(max_age: float = 3600.0) -> int:
    opts = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    folder = opts.get("processed_folder")
    if not folder or not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return 0
    cutoff = time.time() - max_age
    removed = 0
    for p in Path(folder).glob("*.msg"):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def _loop() -> None:
    interval = settings.RUN_RECOVERY_INTERVAL
    try:
        while True:
            try:
                # this thread shares its process with the pool's forks (see fork_guard)
                with no_fork():
                    recover_once()
            except Exception:  # noqa: BLE001 - keep the loop alive; the next tick retries
                log.warning("recovery pass failed", exc_info=True)
            if _stop.wait(interval):
                return
    finally:
        with no_fork():
            connection.close()


def start_recovery_loop() -> None:
    global _thread
    if settings.RUN_RECOVERY_INTERVAL <= 0 or (_thread is not None and _thread.is_alive()):
        return
    _stop.clear()
    _thread = threading.Thread(target=_loop, name="compaction-recovery", daemon=True)
    _thread.start()


def stop_recovery_loop() -> None:
    _stop.set()
