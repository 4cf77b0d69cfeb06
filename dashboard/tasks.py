"""Celery tasks: thin wrappers over dashboard.services.runs, and the worker's recovery loop.

Every process imports this module once Django is ready (DashboardConfig.ready), so the
tasks are registered wherever runs are enqueued; the services address them by name."""
from __future__ import annotations

import os
import socket
from typing import Any

from celery import shared_task, signals
from django.conf import settings

from .schedules import CONTINUOUS_TUNING_TASK
from .services import tuning_recovery  # noqa: F401  (importing it adds the tuning jobs to the recovery pass)
from .services.continuous_tuning import TUNE_PROJECT_TASK, queue_projects, tune_project
from .services.runs import (
    RUN_TASK,
    RecoveryCounts,
    RunResult,
    execute,
    recover_once,
    start_recovery_loop,
    stop_recovery_loop,
)
from .services.tuning_grids import GRID_TASK, run_chunk
from .services.tuning_sweeps import SWEEP_TASK, run_sweep
from .services.workers import BeatLoop

_beat: BeatLoop | None = None


@shared_task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             soft_time_limit=settings.RUN_SOFT_TIME_LIMIT, time_limit=settings.RUN_TIME_LIMIT)
def run_compaction(run_id: int) -> RunResult:
    """Execute one compaction run. Idempotent: a run that is finished, or executing in
    another worker, is left alone; a run whose session is busy stays queued and is
    started by the run that holds the session when it finishes."""
    return execute(int(run_id))


@shared_task(name=SWEEP_TASK, ignore_result=True, soft_time_limit=settings.RUN_SOFT_TIME_LIMIT,
             time_limit=settings.RUN_TIME_LIMIT)
def run_tuning_sweep(sweep_id: int) -> str:
    """Replay a stored threshold sweep (dashboard.services.tuning_sweeps); a sweep that is
    running or finished is left alone."""
    return run_sweep(int(sweep_id))


@shared_task(name=GRID_TASK, ignore_result=True, soft_time_limit=settings.RUN_SOFT_TIME_LIMIT,
             time_limit=settings.RUN_TIME_LIMIT)
def run_tuning_grid_chunk(chunk_id: int) -> str:
    """Replay one chunk of a tuning grid (dashboard.services.tuning_grids); the last chunk
    of a grid sums it. A chunk taken, finished or cancelled is left alone."""
    return run_chunk(int(chunk_id))


@shared_task(name=CONTINUOUS_TUNING_TASK, ignore_result=True)
def continuous_tuning() -> int:
    """What Celery beat sends on TUNING_SCHEDULE: queue one tuning pass per project (they
    then run in parallel on the workers); how many were queued."""
    return queue_projects()


# A pass replays about TUNING_TIME_BUDGET seconds' worth of sessions (an estimate, see
# services.continuous_tuning), so its limits leave it room above a run's.
@shared_task(name=TUNE_PROJECT_TASK, ignore_result=True,
             soft_time_limit=max(settings.RUN_SOFT_TIME_LIMIT, int(4 * settings.TUNING_TIME_BUDGET)),
             time_limit=max(settings.RUN_TIME_LIMIT, int(4 * settings.TUNING_TIME_BUDGET) + 60))
def tune_project_task(project_id: int) -> int:
    """One continuous tuning pass over a project; the id of the stored result."""
    return tune_project(int(project_id)).pk


@shared_task(name="dashboard.recover_runs", ignore_result=True)
def recover_runs() -> RecoveryCounts:
    return recover_once()


@signals.worker_ready.connect
def _start_recovery(sender: Any = None, **_: Any) -> None:
    global _beat
    start_recovery_loop()
    name = getattr(sender, "hostname", None) or f"worker@{socket.gethostname()}:{os.getpid()}"
    _beat = BeatLoop(str(name)).start()


@signals.worker_shutdown.connect
def _stop_recovery(**_: Any) -> None:
    stop_recovery_loop()
    if _beat is not None:
        _beat.stop()
