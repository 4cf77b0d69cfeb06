"""Tuning jobs whose worker was lost: a threshold sweep or a grid chunk left "running" with
a heartbeat RUN_STALE_AFTER seconds old is queued again and sent to the workers (its
progress resumes: a sweep from the start, a grid chunk counting only the replays the lost
execution had not counted), or failed, saying so, after RUN_MAX_DELIVERIES executions.
Importing this module adds :func:`recover_tuning_jobs` to the runs' recovery pass (the
worker's tasks module and ``manage.py recover_runs`` import it);
each change is a conditional update, so several workers doing it at once change each job
once."""
from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db.models import Q

from ..models import GridStatus, SweepStatus, TuningGridChunk, TuningSweep
from .common import now
from .runs.recover import register_pass
from .tuning_grids import enqueue_chunks, fail_grid
from .tuning_sweeps import enqueue_sweep

log = logging.getLogger("dashboard.recovery")


def _stale(cutoff: datetime) -> Q:
    # no heartbeat at all: taken by a version that wrote none, whose worker is gone since
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)


def _lost_for(heartbeat: datetime | None) -> str:
    return f"no heartbeat for {(now() - heartbeat).total_seconds():.0f} s" if heartbeat else "no heartbeat"


def recover_tuning_jobs(cutoff: datetime) -> int:
    """Queue again (or fail) the sweeps and grid chunks running without a heartbeat since
    ``cutoff``; how many were queued again."""
    requeued = 0
    for sweep_id, attempts, heartbeat in list(TuningSweep.objects.filter(_stale(cutoff), status=SweepStatus.RUNNING)
                                              .values_list("id", "attempts", "heartbeat_at")):
        seen = TuningSweep.objects.filter(pk=sweep_id, status=SweepStatus.RUNNING, attempts=attempts,
                                          heartbeat_at=heartbeat)
        if attempts >= settings.RUN_MAX_DELIVERIES:
            seen.update(status=SweepStatus.FAILED, finished_at=now(), error=(
                f"worker lost {attempts} times ({_lost_for(heartbeat)}); RUN_MAX_DELIVERIES={settings.RUN_MAX_DELIVERIES}"))
            continue
        if seen.update(status=SweepStatus.QUEUED):
            log.warning("sweep %s: worker lost (%s); queued again", sweep_id, _lost_for(heartbeat))
            enqueue_sweep(sweep_id)
            requeued += 1
    for chunk_id, grid_id, attempts, heartbeat in list(
            TuningGridChunk.objects.filter(_stale(cutoff), status=GridStatus.RUNNING)
            .values_list("id", "grid_id", "attempts", "heartbeat_at")):
        seen_chunk = TuningGridChunk.objects.filter(pk=chunk_id, status=GridStatus.RUNNING, attempts=attempts,
                                                    heartbeat_at=heartbeat)
        if attempts >= settings.RUN_MAX_DELIVERIES:
            if seen_chunk.update(status=GridStatus.FAILED):
                fail_grid(grid_id, f"a chunk's worker was lost {attempts} times ({_lost_for(heartbeat)}); "
                                   f"RUN_MAX_DELIVERIES={settings.RUN_MAX_DELIVERIES}")
            continue
        if seen_chunk.update(status=GridStatus.QUEUED):
            log.warning("grid %s chunk %s: worker lost (%s); queued again", grid_id, chunk_id, _lost_for(heartbeat))
            enqueue_chunks(grid_id, [chunk_id])
            requeued += 1
    return requeued


register_pass(recover_tuning_jobs)
