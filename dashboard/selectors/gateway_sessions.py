"""What the pages show of a gateway session: who it belongs to (the identity the client
gave: ``X-Session-Id``, ``metadata.session_id`` or ``user``, or none, then its leading
messages stood for it), and how it relates to the other sessions of that conversation: the
session it was forked from, where and why ("forked from #87 at message 12: message #12 was
edited"), and its own forks. The sessions list groups a fork tree under the session it
started from (``GatewaySession.fork_root``)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..models import GatewaySession, Session

#: Forks listed under one session, in the list and on its page (the rest are counted).
MAX_FORKS = 20


@dataclass(frozen=True)
class Fork:
    session_id: int
    title: str
    forked_from: int | None
    forked_at: int | None
    reason: str
    messages: int


@dataclass(frozen=True)
class Identity:
    source: str   # what the identity came from; "" for sessions stored before it was kept
    name: str     # the name the client gave ("" when its leading messages stood for it)
    user: str
    metadata: tuple[tuple[str, str], ...]  # the request's OpenAI metadata, as the session keeps it
    forked_from: int | None
    forked_at: int | None
    reason: str


def identity_of(gw: GatewaySession, session: Session) -> Identity:
    """The identity of a gateway row and its session (reads nothing more)."""
    kind, _, value = gw.identity.partition(":")
    source = gw.identity_source or {"user": "user", "lead": "leading messages"}.get(kind, "")
    name = "" if kind == "lead" else value
    kept = session.metadata.get("metadata") if isinstance(session.metadata, dict) else None
    metadata = tuple((str(k)[:60], str(v)[:120]) for k, v in sorted(kept.items()))[:8] if isinstance(kept, dict) else ()
    return Identity(source=source, name=name, user=gw.client_user or (value if kind == "user" else ""),
                    metadata=metadata, forked_from=gw.forked_from_id, forked_at=gw.forked_at, reason=gw.fork_reason)


def gateway_row(session: Session) -> GatewaySession | None:
    """The session's gateway row, or None for a session the gateway did not start (1 query
    unless the row came with the session through ``select_related("gateway")``)."""
    try:
        return session.gateway  # type: ignore[attr-defined,no-any-return]
    except GatewaySession.DoesNotExist:
        return None


def _fork(gw: GatewaySession) -> Fork:
    s = gw.session
    return Fork(session_id=s.pk, title=s.title, forked_from=gw.forked_from_id, forked_at=gw.forked_at,
                reason=gw.fork_reason, messages=s.message_count)


def forks_of(session: Session) -> list[Fork]:
    """The sessions forked from this one, oldest first (1 query)."""
    rows = (GatewaySession.objects.filter(forked_from_id=session.pk).select_related("session")
            .only("forked_from_id", "forked_at", "fork_reason", "session__title", "session__message_count")
            .order_by("session_id")[:MAX_FORKS])
    return [_fork(gw) for gw in rows]


def fork_trees(root_ids: Iterable[int]) -> dict[int, list[Fork]]:
    """Every fork under each of these sessions (forks of forks too), oldest first: 1 query."""
    ids = list(root_ids)
    if not ids:
        return {}
    rows = (GatewaySession.objects.filter(fork_root_id__in=ids).select_related("session")
            .only("fork_root_id", "forked_from_id", "forked_at", "fork_reason", "session__title",
                  "session__message_count")
            .order_by("fork_root_id", "session_id"))
    out: dict[int, list[Fork]] = defaultdict(list)
    for gw in rows:
        assert gw.fork_root_id is not None
        out[gw.fork_root_id].append(_fork(gw))
    return dict(out)
