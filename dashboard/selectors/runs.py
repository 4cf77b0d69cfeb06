"""Run reads: the API's lists and details, the run a page names, and the badge of a run."""
from __future__ import annotations

from typing import Any

from django.http import Http404

from ..models import CompactionRun, RunEvent, RunStatus, Session
from ..services import NotFound
from .pagination import paginate

# Fields a page list or badge needs from a run; the big JSON columns (ledger, prompt,
# policy snapshot, attempts) are left out so a session page never loads them.
RUN_LIST_FIELDS = (
    "id", "session_id", "project_id", "trigger", "reason", "force", "status", "created_at", "started_at",
    "finished_at", "duration_ms", "tokens_before", "tokens_after", "messages_before", "messages_after",
    "appended_during_run", "model", "summary", "error", "error_kind", "progress_step", "progress_attempt",
    "result", "compression", "archive_refs", "inline", "request_mode", "filter_key", "snapshot_position",
)


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


def load_run(pk: int) -> CompactionRun:
    """The run a page URL names (with its session, project and policy), or 404."""
    run = CompactionRun.objects.select_related("session", "project", "policy").filter(pk=pk).first()
    if run is None:
        raise Http404("no such run")
    return run


def load_run_status(pk: int) -> CompactionRun:
    """What the progress block of a run shows, without the big JSON columns, or 404."""
    run = CompactionRun.objects.only(*RUN_LIST_FIELDS, "progress_detail", "deliveries", "heartbeat_at",
                                     "enqueued_at").filter(pk=pk).first()
    if run is None:
        raise Http404("no such run")
    return run


def run_badge(run: CompactionRun) -> dict[str, Any] | None:
    """Figures of the "Compacted 84 → 12 messages, 61k → 9k tokens" badge."""
    if run.status != RunStatus.SUCCEEDED or not run.tokens_before or not run.tokens_after:
        return None
    result = run.result or {}
    return {
        "messages_before": run.messages_before, "messages_after": run.messages_after,
        "tokens_before": run.tokens_before.get("total", 0), "tokens_after": run.tokens_after.get("total", 0),
        "evicted": result.get("evicted_messages") or 0, "summarized": bool(result.get("summarized")),
        "cleared": result.get("tokens_cleared") or 0, "truncated": result.get("tokens_truncated") or 0,
    }
