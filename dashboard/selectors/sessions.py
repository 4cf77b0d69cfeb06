"""Session reads: lists, details, history, the live context, and the session a page names."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.db import connection
from django.http import Http404

from compaction.windows import resolve_window

from ..models import Session, StoredMessage, splice_json_list
from ..services import NotFound
from ..services.policies import effective_policy
from ..services.runs import pending_run
from ..services.sessions import check_trigger
from ..text_repair import repaired_json_text
from .pagination import paginate


def get_session(project_id: int, session_id: int) -> Session:
    session = Session.objects.filter(project_id=project_id, pk=session_id).first()
    if session is None:
        raise NotFound(f"session {session_id} not found")
    return session


def load_session(pk: int) -> Session:
    """The session a page URL names (with its project and policies), or 404."""
    s = Session.objects.select_related("project", "policy", "project__active_policy").filter(pk=pk).first()
    if s is None:
        raise Http404("no such session")
    return s


def list_sessions(project_id: int, cursor: str | None = None, limit: int | None = None):
    qs = Session.objects.filter(project_id=project_id)
    return paginate(qs, cursor, limit, key="id", descending=True)


def list_messages(session: Session, cursor: str | None = None, limit: int | None = None):
    qs = StoredMessage.objects.filter(session_id=session.pk)
    return paginate(qs, cursor, limit, key="position")


def session_detail(session: Session) -> dict:
    """Everything the session endpoint and page show, from stored numbers (no recount)."""

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


_VERSION_SQL = "SELECT context_version, updated_at FROM dashboard_session WHERE id = %s AND project_id = %s"
# One statement (one snapshot, so a commit in between cannot tear it): the stored texts and
# the session's totals, then the rendered tail rows in order.
_CONTEXT_SQL = (
    "SELECT -1, c.rendered, s.context_version, s.updated_at, s.context_tokens, s.context_messages, "
    "s.compaction_count FROM dashboard_sessioncontext c JOIN dashboard_session s ON s.id = c.session_id "
    "WHERE c.session_id = %s AND s.project_id = %s "
    "UNION ALL SELECT t.position, t.rendered, NULL, NULL, NULL, NULL, NULL FROM dashboard_contexttail t "
    "WHERE t.session_id = %s ORDER BY 1")

# Encoded response bodies of recently read contexts, per process: {session id: ((version,
# updated_at), body, tail bound)}. Every read still asks the database for the current
# version (a small indexed row), so a body is served only while it is current, whichever
# process wrote.
_BODIES: OrderedDict[int, tuple[tuple, bytes, int]] = OrderedDict()
_BODIES_LOCK = threading.Lock()
_BODIES_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ContextBody:
    body: bytes
    version: int
    stamp: tuple
    upto: int  # the body holds the stored texts, then the tail rows below this history position


def context_version(project_id: int, session_id: int) -> tuple[int, tuple] | None:
    """The session's current context version and its stamp (version, updated_at), from the
    session row alone; None when the project has no such session. Enough to answer a
    conditional GET whose tag is current."""
    with connection.cursor() as cur:
        cur.execute(_VERSION_SQL, [session_id, project_id])
        row = cur.fetchone()
    if row is None:
        return None
    return row[0], (row[0], str(row[1]))


def context_json(project_id: int, session_id: int, stamp: tuple | None = None) -> ContextBody | None:
    """The context response body. This is the hot path of an agent loop (one call per
    model call): nothing more when the body of the current version (``stamp``, else read
    here) is cached, else one statement that fetches the stored texts and the tail, spliced
    as they are (no parse, no re-serialisation)."""
    if stamp is None:
        current = context_version(project_id, session_id)
        if current is None:
            return None
        stamp = current[1]
    with _BODIES_LOCK:
        hit = _BODIES.get(session_id)
        if hit is not None and hit[0] == stamp:
            _BODIES.move_to_end(session_id)
            return ContextBody(hit[1], stamp[0], stamp, hit[2])
    with connection.cursor() as cur:
        cur.execute(_CONTEXT_SQL, [session_id, project_id, session_id])
        rows = cur.fetchall()
    if not rows or rows[0][0] != -1:
        return None
    _, rendered, version, updated_at, tokens, messages, compactions = rows[0]
    stamp = (version, str(updated_at))
    upto = rows[-1][0] + 1 if len(rows) > 1 else 0
    body = context_head(session_id, version, tokens, messages, compactions) + splice_json_list(
        repaired_json_text(rendered), [repaired_json_text(r[1]) for r in rows[1:]])
    data = (body + "}").encode("utf-8")
    with _BODIES_LOCK:
        _BODIES[session_id] = (stamp, data, upto)
        _BODIES.move_to_end(session_id)
        total = sum(len(b) for _, b, _ in _BODIES.values())
        while total > _BODIES_MAX_BYTES and len(_BODIES) > 1:
            _, (_, dropped, _) = _BODIES.popitem(last=False)
            total -= len(dropped)
    return ContextBody(data, version, stamp, upto)


def context_head(session_id: int, version: int, tokens: str, messages: int, compactions: int) -> str:
    """The context body up to its message list."""
    return (f'{{"session_id":{int(session_id)},"version":{int(version)},'
            f'"tag":"{context_tag(session_id, version)}","tokens":{tokens},'
            f'"message_count":{int(messages)},"compactions":{int(compactions)},"messages":')


def context_tag(session_id: int, version: int) -> str:
    return f"{session_id}-{version}"
