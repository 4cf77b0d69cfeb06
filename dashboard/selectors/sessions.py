"""Session reads: lists, details, history, the live context."""
from __future__ import annotations

import json

from compaction.windows import resolve_window

from ..models import CompactionRun, Message, RunStatus, Session, SessionContext
from ..services import NotFound
from .pagination import paginate


def get_session(project_id: int, session_id: int) -> Session:
    session = Session.objects.filter(project_id=project_id, pk=session_id).first()
    if session is None:
        raise NotFound(f"session {session_id} not found")
    return session


def list_sessions(project_id: int, cursor: str | None = None, limit: int | None = None):
    qs = Session.objects.filter(project_id=project_id)
    return paginate(qs, cursor, limit, key="id", descending=True)


def list_messages(session: Session, cursor: str | None = None, limit: int | None = None):
    qs = Message.objects.filter(session_id=session.pk)
    return paginate(qs, cursor, limit, key="position")


def pending_run(session: Session) -> CompactionRun | None:
    return (CompactionRun.objects.filter(session_id=session.pk, status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
            .order_by("id").first())


def session_detail(session: Session) -> dict:
    """Everything the session endpoint and page show, from stored numbers (no recount)."""
    from ..services.policies import effective_policy  # noqa: PLC0415
    from ..services.sessions import check_trigger  # noqa: PLC0415

    policy, row = effective_policy(session)
    window, source = resolve_window(policy)
    trig = check_trigger(session, policy)
    pending = pending_run(session)
    return {
        "policy_id": row.pk if row is not None else None,
        "policy_name": row.name if row is not None else policy.name,
        "window": window,
        "window_source": source,
        "trigger": {"fired": trig.fired, "reason": trig.reason, "detail": trig.to_dict()},
        "pending_run": {"run_id": pending.pk, "status": pending.status,
                        "status_url": f"/api/runs/{pending.pk}"} if pending else None,
    }


def context_json(project_id: int, session_id: int) -> tuple[str, int] | None:
    """The context response body as text (no parse, no re-serialisation) and its version."""
    row = (SessionContext.objects.filter(session_id=session_id, session__project_id=project_id)
           .select_related("session")
           .only("version", "rendered", "session__id", "session__context_tokens", "session__context_messages",
                 "session__compaction_count", "session__project_id").first())
    if row is None:
        return None
    s = row.session
    head = {"session_id": s.pk, "version": row.version, "tag": context_tag(s.pk, row.version),
            "tokens": s.context_tokens, "message_count": s.context_messages, "compactions": s.compaction_count}
    text = json.dumps(head, separators=(",", ":"))
    return text[:-1] + ',"messages":' + row.rendered + "}", row.version


def context_tag(session_id: int, version: int) -> str:
    return f"{session_id}-{version}"
