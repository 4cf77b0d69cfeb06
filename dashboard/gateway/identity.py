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
from ..services.common import batched_writes, text_problem, update_row
from ..services.durability import relax_commit
from ..services.policies import effective_policy
from ..services.sessions import append_messages, convert_payload, import_session
from .body import ChatBody, Hint, check_messages
from .candidates import locked
from .errors import GatewayError, bad_request, project_gone
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
            self._after = extend_chain(self.base_chain, self.body.after(self.base))
        return self._after[k - self.base - 1]

    def last(self) -> str:
        return self.at(self.body.count)


def _trusted(body: ChatBody, cand: GatewaySession) -> bool:
    """Whether the request's message array starts with the very text the candidate's last
    request sent (so its first ``raw_count`` messages are the ones stored then)."""
    raw, count = body.raw, cand.raw_count
    return (raw is not None and 0 < count <= body.count and count <= cand.stored_count
            and bool(cand.raw_digest) and raw.digest(cand.raw_length) == cand.raw_digest)


def _remember_raw(gw: GatewaySession, body: ChatBody, chains: Chains) -> list[str]:
    """The raw_* fields for this request's array (all of it is stored by now)."""
    raw = body.raw
    digest = raw.digest(raw.length) if raw is not None else None
    if raw is None or digest is None:
        gw.raw_count, gw.raw_length, gw.raw_digest, gw.raw_chain = 0, 0, "", ""
    else:
        gw.raw_count, gw.raw_length, gw.raw_digest = body.count, raw.length, digest
        gw.raw_chain = chains.last()
    return ["raw_count", "raw_length", "raw_digest", "raw_chain"]


# The last request of each identity named by header that this process placed: the next
# request of that identity can then be parsed without decoding what it resends (body.Hint).
# Only a hint: what a request continues is still decided against the stored rows.
_HINTS: dict[tuple[int, str], Hint] = {}
_HINTS_MAX = 10_000


def hint(project_id: int, header: str | None) -> Hint | None:
    """What this process last saw of the identity ``header`` names, if anything."""
    value = header.strip() if header else ""
    return _HINTS.get((project_id, f"id:{value}")) if value else None


def _keep_hint(project_id: int, identity: str, gw: GatewaySession) -> None:
    if not (gw.raw_digest and identity.startswith("id:")):
        return
    if len(_HINTS) >= _HINTS_MAX:
        _HINTS.clear()
    _HINTS[(project_id, identity)] = Hint(gw.raw_count, gw.raw_length, gw.raw_digest)


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
    n = body.count
    try:
        with transaction.atomic():
            relax_commit()  # the client resends whatever this stores (see durability)
            # with what each session's policy is read from, so the request reads it once, here;
            # the sessions are locked too (as an append locks its session), and read under
            # that lock, so storing what the request adds reads nothing again
            candidates = locked(project.pk, identity, CANDIDATES)
            for cand in sorted(candidates, key=lambda c: (c.stored_count, c.pk), reverse=True):
                k = cand.stored_count
                if not 0 < k <= n:
                    continue
                if chains.base == 0 and _trusted(body, cand):
                    chains.trust(cand.raw_count, cand.raw_chain)
                if chains.at(k) == cand.chain:
                    placed = _continue(cand, body, chains)
                    _keep_hint(project.pk, identity, cand)
                    return placed
    except ServiceError as exc:
        raise _service_error(exc) from None
    check_messages(body, body.checked)  # a new session stores them all
    placed = _start(project, body, identity, chains, candidates[0].session_id if candidates else None)
    _keep_hint(project.pk, identity, placed.gateway)
    return placed


def _continue(gw: GatewaySession, body: ChatBody, chains: Chains) -> Placement:
    """Store what the request adds to ``gw``'s session (the caller holds ``gw``'s lock)."""
    chains.last()  # validates what the trusted prefix does not cover, before anything is written
    policy, _row = effective_policy(gw.session)
    new = body.after(gw.stored_count)
    fields = _remember_raw(gw, body, chains)
    with batched_writes():  # the rows below go to the database together, as the block ends
        if new:
            gw.session = append_messages(gw.session, new, auto_compact=False, policy=policy, locked=True).session
            gw.stored_count = body.count
            gw.chain = chains.last()
            fields += ["stored_count", "chain"]
        update_row(gw, [*fields, "updated_at"])
    return Placement(gw.session, gw, len(new), created=False, policy=policy)


def _start(project: Project, body: ChatBody, identity: str, chains: Chains, forked_from: int | None) -> Placement:
    label = identity.split(":", 1)[1][:80] if not identity.startswith("lead:") else identity[5:17]
    # the caller may hold the project unread (its id only): a new session reads all of it
    project = Project.objects.select_related("active_policy").filter(pk=project.pk).first()  # type: ignore[assignment]
    if project is None:
        raise project_gone()
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


def store_reply(gateway_id: int, reply: dict[str, Any], policy: Policy, at: int,
                then: Callable[[], None] | None = None) -> Session | None:
    """Append the upstream's reply (with its usage) to the session at position ``at``, where
    the request that asked for it left the history; a trigger that fires now queues a
    background run, so the next request finds its context ready. ``then`` runs in the same
    transaction (the call's row: one commit for both).

    When the history has moved past ``at`` meanwhile, nothing is appended (None): either the
    client's next request came first and stored this reply as its own message, or a twin
    request (a client retrying after a timeout) stored its reply there; appending would put
    two answers in a row."""
    with transaction.atomic():
        relax_commit()  # the client resends the reply in its next call (see durability)
        gw = GatewaySession.objects.select_for_update().get(pk=gateway_id)
        session = None
        if gw.stored_count == at:
            # given the policy, the append reads nothing of the session but its id
            session = append_messages(Session(pk=gw.session_id), [reply], auto_compact=True, policy=policy).session
            gw.stored_count += 1
            gw.chain = extend_chain(gw.chain, [reply])[-1]
            gw.save(update_fields=["stored_count", "chain", "updated_at"])
        if then is not None:
            then()
    return session
