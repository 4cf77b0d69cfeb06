"""What a waiting run tells its reader about workers: "waiting for a worker (none seen for
N s)" while no worker beats, and what happens next (the no-worker fallback)."""
from __future__ import annotations

from django.conf import settings

from ..models import CompactionRun, RunStatus
from ..services import workers
from ..services.common import now


def waiting_note(run: CompactionRun) -> str | None:
    """None unless the run is queued and no worker is alive."""
    if run.status != RunStatus.QUEUED or run.inline:
        return None
    silent = workers.silent_for()
    if silent is None:
        return None
    if silent == float("inf"):
        since = run.enqueued_at or run.created_at
        silent = max(0.0, (now() - since).total_seconds()) if since else 0.0
    note = f"waiting for a worker (none seen for {silent:.0f} s)"
    if settings.RUN_NO_WORKER_FALLBACK == "inline":
        return (f"{note}; the service runs it itself once it has waited {settings.RUN_NO_WORKER_WAIT:g} s "
                "with no worker")
    return (f"{note}; this service does not run compactions without a worker (RUN_NO_WORKER_FALLBACK=off): "
            "start one with `celery -A dashboard worker`")
