"""What a waiting run tells its reader about workers: "waiting for a worker (none seen for
N s)" while no worker beats, and what happens next (the no-worker fallback)."""
from __future__ import annotations

from datetime import datetime

from django.conf import settings

from ..models import CompactionRun, RunStatus, SweepStatus, TuningSweep
from ..services import workers
from ..services.common import now


def waiting_note(run: CompactionRun) -> str | None:
    """None unless the run is queued and no worker is alive."""
    if run.status != RunStatus.QUEUED or run.inline:
        return None
    return _note(run.enqueued_at or run.created_at, "compactions")


def sweep_waiting_note(sweep: TuningSweep) -> str | None:
    """The same for a tuning sweep (the same fallback runs it)."""
    if sweep.status != SweepStatus.QUEUED:
        return None
    return _note(sweep.created_at, "sweeps")


def _note(since: datetime | None, what: str) -> str | None:
    silent = workers.silent_for()
    if silent is None:
        return None
    if silent == float("inf"):
        silent = max(0.0, (now() - since).total_seconds()) if since else 0.0
    note = f"waiting for a worker (none seen for {silent:.0f} s)"
    if settings.RUN_NO_WORKER_FALLBACK == "inline":
        return (f"{note}; the service runs it itself once it has waited {settings.RUN_NO_WORKER_WAIT:g} s "
                "with no worker")
    return (f"{note}; this service does not run {what} without a worker (RUN_NO_WORKER_FALLBACK=off): "
            "start one with `celery -A dashboard worker`")
