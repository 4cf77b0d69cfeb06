from __future__ import annotations

from ..models import CompactionRun, RunEvent, Session
from ..services import NotFound
from .pagination import paginate


def get_run(project_id: int, run_id: int) -> CompactionRun:
    run = CompactionRun.objects.filter(project_id=project_id, pk=run_id).first()
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def list_runs(session: Session, cursor: str | None = None, limit: int | None = None):
    return paginate(CompactionRun.objects.filter(session_id=session.pk).defer("ledger", "prompt"), cursor, limit,
                    key="id", descending=True)


def run_events(run: CompactionRun) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run_id=run.pk).order_by("id"))
