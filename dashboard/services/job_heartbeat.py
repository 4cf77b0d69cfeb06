"""Tuning jobs (threshold sweeps, grid chunks) a worker executes: claimed with an attempt
number, kept alive by a heartbeat, and finished only by the execution that holds the claim.

Their tasks are acknowledged when they start, so a worker lost mid-job (killed, OOM, a
restart without a warm shutdown) leaves its row "running" with nobody on it. The recovery
loop (``services/runs/recover.recover_tuning_jobs``) queues such a row again once its
heartbeat is RUN_STALE_AFTER seconds old, as it does for runs; an execution that was only
slow and finds its claim taken writes nothing."""
from __future__ import annotations

from typing import Any

from django.db.models import F, Model, QuerySet

from .common import now
from .runs.beat_thread import BeatThread


def claim_job(model: type[Model], pk: int, queued: str, running: str, **reset: Any) -> int | None:
    """Take a queued job: status ``running``, one more attempt, a first heartbeat (and the
    fields in ``reset``). The attempt number this execution holds, or None when the job
    was not queued (taken, finished or cancelled)."""
    taken = model._default_manager.filter(pk=pk, status=queued).update(
        status=running, attempts=F("attempts") + 1, heartbeat_at=now(), **reset)
    if not taken:
        return None
    return int(model._default_manager.filter(pk=pk).values_list("attempts", flat=True).get())


def holds(model: type[Model], pk: int, attempt: int, running: str) -> QuerySet[Any]:
    """The job's row, filtered to the execution holding ``attempt`` while it runs: an
    update through it writes nothing once the job was queued again or ended."""
    return model._default_manager.filter(pk=pk, attempts=attempt, status=running)


class JobHeartbeat(BeatThread):
    """Writes the job's ``heartbeat_at`` while the job executes (``with JobHeartbeat(...):``)."""

    def __init__(self, model: type[Model], pk: int, attempt: int, running: str):
        super().__init__()
        self.model, self.pk, self.attempt, self.running = model, pk, attempt, running
        self.label = f"{model.__name__} {pk}"

    def beat(self) -> bool:
        return bool(holds(self.model, self.pk, self.attempt, self.running).update(heartbeat_at=now()))
