"""Which stored session a request continues, and storing what it adds.

A request names its session (``X-Session-Id``, else ``metadata.session_id``, else
``user``) or not (then the digest of its leading messages stands for it). Among the
sessions of that identity, the request continues the one whose stored history is a prefix
of the request's messages (compared by running digest of their wire forms, see ``wire``);
only the messages after that prefix are stored. A request that continues none of them (the
client edited or dropped an earlier message) starts a new session from its whole history,
``forked_from`` the latest one; the stored sessions are never rewritten."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from compaction import Policy

from ..models import GatewaySession, Project, Session
from ..services import ServiceError
from ..services.common import text_problem
from ..services.policies import effective_policy
from ..services.sessions import append_messages, convert_payload, import_session
from .body import ChatBody, check_messages
from .durability import relax_commit
from .errors import GatewayError, bad_request
from .wire import extend_chain, lead_length, leading_digest

# Sessions of one identity looked at per request (a client forking more often than this
# starts over from its latest sessions).
CANDIDATES = 50


@dataclass
class Placement:
    session: Session
    gateway: GatewaySession
    added: int
    created: bool
    policy: Policy  # the session's effective policy, read once for the request
    forked_from: int | None = None


class Chains:
    """The request's running digests, computed only where they are needed: after a trusted
    prefix (``trust``: its length and the digest at its end), the messages before it are
    neither validated nor digested again unless a position inside it is asked for."""

    def __init__(self, body: ChatBody):
        self.body = body
        self.base, self.base_chain = 0, ""
        self._after: list[str] | None = None

    def trust(self, count: int, chain: str) -> None:
        self.base, self.base_chain, self._after = count, chain, None

    def at(self, k: int) -> str:
        """The running digest after the first ``k`` messages (1 <= k <= len(messages))."""
        if k < self.base:
            self.trust(0, "")
        if k == self.base:
            return self.base_chain
        if self._after is None:
            # what the trusted prefix does not cover is validated before it is digested
            check_messages(self.body, max(self.body.checked, self.base))
            self._after = extend_chain(self.base_chain, self.body.messages[self.base:])
        return self._after[k - self.base - 1]

    def last(self) -> str:
        return self.at(len(self.body.messages))


def _trusted(body: ChatBody, cand: GatewaySession) -> bool:
    """Whether the request's message array starts with the very text the candidate's last
    request sent (so its first ``raw_count`` messages are the ones stored then)."""
    raw, count = body.raw, cand.raw_count
    return (raw is not None and 0 < count <= len(body.messages) and count <= cand.stored_count
            and bool(cand.raw_digest) and raw.digest(cand.raw_length) == cand.raw_digest)


def _remember_raw(gw: GatewaySession, body: ChatBody, chains: Chains) -> list[str]:
    """The raw_* fields for this request's array (all of it is stored by now)."""
    raw = body.raw
    digest = raw.digest(raw.length) if raw is not None else None
    if raw is None or digest is None:
        gw.raw_count, gw.raw_length, gw.raw_digest, gw.raw_chain = 0, 0, "", ""
    else:
        gw.raw_count, gw.raw_length, gw.raw_digest = len(body.messages), raw.length, digest
        gw.raw_chain = chains.last()
    return ["raw_count", "raw_length", "raw_digest", "raw_chain"]


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
    check_messages(body, body.checked, lead_length(body.messages))
    return f"lead:{leading_digest(body.messages)}", "leading messages"


def _service_error(exc: ServiceError) -> GatewayError:
    param = getattr(exc, "field", None)
    return bad_request(str(exc.detail), param=param)


def place(project: Project, body: ChatBody, header: str | None) -> Placement:
    """Find or start the session and store the request's new messages (nothing else is
    written). The identity's gateway rows are locked first, so two requests of one session
    store their messages one after the other, each checked against what the other stored."""
    identity, _source = identity_of(body, header)
    chains = Chains(body)
    n = len(body.messages)
    try:
        with transaction.atomic():
            relax_commit()  # the client resends whatever this stores (see durability)
            # with what each session's policy is read from, so the request reads it once, here
            candidates = list(GatewaySession.objects.select_for_update(of=("self",))
                              .select_related("session__policy", "session__project__active_policy")
                              .filter(project=project, identity=identity).order_by("-id")[:CANDIDATES])
            for cand in sorted(candidates, key=lambda c: (c.stored_count, c.pk), reverse=True):
                k = cand.stored_count
                if not 0 < k <= n:
                    continue
                if chains.base == 0 and _trusted(body, cand):
                    chains.trust(cand.raw_count, cand.raw_chain)
                if chains.at(k) == cand.chain:
                    return _continue(cand, body, chains)
    except ServiceError as exc:
        raise _service_error(exc) from None
    check_messages(body, body.checked)  # a new session stores them all
    return _start(project, body, identity, chains, candidates[0].session_id if candidates else None)


def _continue(gw: GatewaySession, body: ChatBody, chains: Chains) -> Placement:
    """Store what the request adds to ``gw``'s session (the caller holds ``gw``'s lock)."""
    messages = body.messages
    chains.last()  # validates what the trusted prefix does not cover, before anything is written
    policy, _row = effective_policy(gw.session)
    new = messages[gw.stored_count:]
    fields = _remember_raw(gw, body, chains)
    if new:
        gw.session = append_messages(gw.session, new, auto_compact=False, policy=policy).session
        gw.stored_count = len(messages)
        gw.chain = chains.last()
        fields += ["stored_count", "chain"]
    gw.save(update_fields=[*fields, "updated_at"])
    return Placement(gw.session, gw, len(new), created=False, policy=policy)


def _start(project: Project, body: ChatBody, identity: str, chains: Chains, forked_from: int | None) -> Placement:
    label = identity.split(":", 1)[1][:80] if not identity.startswith("lead:") else identity[5:17]
    try:
        # the request's OpenAI metadata is kept on the session it starts, as an import keeps it
        imported = convert_payload(body.messages, tools=body.tools or None, format="openai", model=body.model,
                                   title=f"gateway {label}", source="messages",
                                   metadata={"metadata": body.metadata} if body.metadata else None)
        with transaction.atomic():
            result = import_session(project, imported, auto_compact=False)
            gw = GatewaySession(session=result.session, project=project, identity=identity,
                                stored_count=len(body.messages), chain=chains.last(), forked_from_id=forked_from)
            _remember_raw(gw, body, chains)
            gw.save()
    except ServiceError as exc:
        raise _service_error(exc) from None
    policy, _row = effective_policy(result.session)
    return Placement(result.session, gw, len(body.messages), created=True, forked_from=forked_from, policy=policy)


def store_reply(gateway_id: int, reply: dict[str, Any], policy: Policy,
                then: Callable[[], None] | None = None) -> Session:
    """Append the upstream's reply (with its usage) to the session; a trigger that fires
    now queues a background run, so the next request finds its context ready. ``then``
    runs in the same transaction (the call's row: one commit for both)."""
    with transaction.atomic():
        relax_commit()  # the client resends the reply in its next call (see durability)
        gw = GatewaySession.objects.select_for_update().get(pk=gateway_id)
        # given the policy, the append reads nothing of the session but its id
        result = append_messages(Session(pk=gw.session_id), [reply], auto_compact=True, policy=policy)
        gw.stored_count += 1
        gw.chain = extend_chain(gw.chain, [reply])[-1]
        gw.save(update_fields=["stored_count", "chain", "updated_at"])
        if then is not None:
            then()
    return result.session
