"""Compaction runs: request, claim, execute, commit, recover. The state machine is

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

Modules, in dependency order: ``request`` (create, enqueue, the inline fallback),
``commit`` (write the outcome), ``claim``, ``execute`` (heartbeat, the engine, events),
``recover`` (runs whose worker died), ``no_worker`` (runs queued while no worker is
alive wait, then execute inline). The Celery task (dashboard.tasks) calls ``execute``;
these modules reach it only by its name, through the Celery app.
"""
from __future__ import annotations

from .claim import Claim, ClaimState, claim
from .commit import Written, commit, fail, skip
from .execute import execute
from .recover import (
    RecoveryCounts,
    prune_processed,
    recover,
    recover_once,
    start_recovery_loop,
    stop_recovery_loop,
)
from .request import (
    RUN_TASK,
    QueueFull,
    RunResult,
    enqueue,
    force_run,
    pending_run,
    request_run,
    run_inline,
    validate_overrides,
)

__all__ = [
    "Claim",
    "ClaimState",
    "QueueFull",
    "RUN_TASK",
    "RecoveryCounts",
    "RunResult",
    "Written",
    "claim",
    "commit",
    "enqueue",
    "execute",
    "fail",
    "force_run",
    "pending_run",
    "prune_processed",
    "recover",
    "recover_once",
    "request_run",
    "run_inline",
    "skip",
    "start_recovery_loop",
    "stop_recovery_loop",
    "validate_overrides",
]
