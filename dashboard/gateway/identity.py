"""Which stored session a request continues, and storing what it adds.

A request names its session (``X-Session-Id``, else ``metadata.session_id``, else
``user``) or not (then the digest of its leading messages stands for it). Among the
sessions of that identity, the request continues the one whose stored history is a prefix
of the request's messages (compared by running digest of their wire forms, see ``wire``);
only the messages after that prefix are stored. A request that continues none of them (the
client edited or dropped an earlier message) starts a new session from its whole history,
``forked_from`` the latest one; the stored sessions are never rewritten."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from ..models import GatewaySession, Project, Session
from ..services import ServiceError
from ..services.common import text_problem
from ..services.sessions import append_messages, convert_payload, import_session
from .body import ChatBody
from .errors import GatewayError, bad_request
from .wire import extend_chain, leading_digest

# Sessions of one identity looked at per request (a client forking more often than this
# starts over from its latest sessions).
CANDIDATES = 50


@dataclass
class Placement:
    session: Session
    gateway: GatewaySession
    added: int
    created: bool
    forked_from: int | None = None


def identity_of(body: ChatBody, header: str | None) -> tuple[str, str]:
    """(identity, what it came from)."""
    for value, source, param in ((header, "X-Session-Id", None),
                                 (body.metadata.get("session_id"), "metadata.session_id", "metadata.session_id"),
                                 (body.user, "user", "user")):
        if value is None or not value.strip():
            continue
        value = value.strip()
        if len(value) > 500 or text_problem(value):
            raise bad_request(f"{source}: at most 500 characters of valid text", param=param)
        return (f"id:{value}" if source != "user" else f"user:{value}"), source
    return f"lead:{leading_digest(body.messages)}", "leading messages"


def _service_error(exc: ServiceError) -> GatewayError:
    param = getattr(exc, "field", None)
    return bad_request(str(exc.detail), param=param)


def place(project: Project, body: ChatBody, header: str | None) -> Placement:
    """Find or start the session and store the request's new messages (nothing else is
    written; every write is under the gateway row's lock, so two requests of one session
    store their messages one after the other)."""
    identity, _source = identity_of(body, header)
    chains = extend_chain("", body.messages)
    candidates = list(GatewaySession.objects.filter(project=project, identity=identity).order_by("-id")[:CANDIDATES])
    for cand in sorted(candidates, key=lambda c: (c.stored_count, c.pk), reverse=True):
        k = cand.stored_count
        if 0 < k <= len(chains) and chains[k - 1] == cand.chain:
            placed = _continue(cand.pk, body.messages, chains)
            if placed is not None:
                return placed
    return _start(project, body, identity, chains, candidates[0].session_id if candidates else None)


def _continue(gateway_id: int, messages: list[dict[str, Any]], chains: list[str]) -> Placement | None:
    try:
        with transaction.atomic():
            gw = GatewaySession.objects.select_for_update().select_related("session").get(pk=gateway_id)
            k = gw.stored_count
            if not (0 < k <= len(chains) and chains[k - 1] == gw.chain):
                return None  # another request stored something else meanwhile
            new = messages[k:]
            if new:
                append_messages(gw.session, new, auto_compact=False)
                gw.stored_count = len(messages)
                gw.chain = chains[-1]
                gw.save(update_fields=["stored_count", "chain", "updated_at"])
                gw.session.refresh_from_db()
    except ServiceError as exc:
        raise _service_error(exc) from None
    return Placement(gw.session, gw, len(new), created=False)


def _start(project: Project, body: ChatBody, identity: str, chains: list[str], forked_from: int | None) -> Placement:
    label = identity.split(":", 1)[1][:80] if not identity.startswith("lead:") else identity[5:17]
    try:
        # the request's OpenAI metadata is kept on the session it starts, as an import keeps it
        imported = convert_payload(body.messages, tools=body.tools or None, format="openai", model=body.model,
                                   title=f"gateway {label}", source="messages",
                                   metadata={"metadata": body.metadata} if body.metadata else None)
        with transaction.atomic():
            result = import_session(project, imported, auto_compact=False)
            gw = GatewaySession.objects.create(session=result.session, project=project, identity=identity,
                                               stored_count=len(body.messages), chain=chains[-1],
                                               forked_from_id=forked_from)
    except ServiceError as exc:
        raise _service_error(exc) from None
    return Placement(result.session, gw, len(body.messages), created=True, forked_from=forked_from)


def store_reply(gateway_id: int, reply: dict[str, Any]) -> Session:
    """Append the upstream's reply (with its usage) to the session; a trigger that fires
    now queues a background run, so the next request finds its context ready."""
    with transaction.atomic():
        gw = GatewaySession.objects.select_for_update().select_related("session").get(pk=gateway_id)
        result = append_messages(gw.session, [reply], auto_compact=True)
        gw.stored_count += 1
        gw.chain = extend_chain(gw.chain, [reply])[-1]
        gw.save(update_fields=["stored_count", "chain", "updated_at"])
    return result.session
