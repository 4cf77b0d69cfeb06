"""Which stored session a request belongs to, and storing what it adds: the whole decision,
in one place (``place``). One conversation is one session, whatever the client does.

The story of one request:

1. **Who is speaking.** The request names its conversation (``X-Session-Id``, else
   ``metadata.session_id``, else ``user``) or not; then the digest of its leading messages
   (system prompt and first user message) stands for it (``identity_of``).
2. **One request of an identity at a time.** The identity's row is locked (made by its first
   request; ``candidates.lock_identity``), then its sessions are read, locked, with what
   their policies need (``candidates.locked``). Whatever else happens at the same moment
   (an agent's retry after a timeout, parallel copies of one call, a stream cancelled and
   sent again) is placed after this request, against what this request stored.
3. **How the request reads against each stored history** (by running digest of the
   messages' wire forms, ``wire``; the text a client resends unchanged is vouched for by the
   stored digest of the last request's message array, so it is neither decoded nor
   validated again: ``Chains``, ``body.Hint``):
   - it *extends* one (that history, then new messages): those are stored in that session;
   - it *resends* one without its last reply (a retry or "regenerate" after the reply was
     stored, a twin of a call already answered): the same session, nothing stored, and the
     upstream is sent the live context as it was at the request's end;
   - neither: the request is compared message by message with the identity's latest
     session. A request that is a shorter copy of it resends it too; otherwise stored history
     really changed, and the request starts a new session from its whole history, forked
     from that one, with what changed where: "message #12 was edited", "message #12 (the
     assistant's reply) was regenerated", "messages #12 to #14 were removed". A stored
     session is never rewritten.
4. **A new identity** starts its first session.

Sessions are titled by their first user message, as imports are; the identity and where it
came from are kept beside it (``GatewaySession.identity_source``, ``client_user``)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from compaction import Policy

from ..models import GatewaySession, Project, Session, StoredMessage
from ..services import ServiceError
from ..services.common import batched_writes, text_problem, update_row
from ..services.durability import relax_commit
from ..services.policies import effective_policy
from ..services.sessions import append_messages, convert_payload, import_session
from .body import ChatBody, Hint, check_messages
from .candidates import lock_identity, locked
from .errors import GatewayError, bad_request, project_gone
from .live import Forwarded, cut_at
from .wire import digest, extend_chain, lead_length, leading_digest

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
    at: int  # where the request leaves the history: its reply belongs at this position
    forked_from: int | None = None
    fork_reason: str = ""
    # a resend of an earlier point of the history: the live context cut there, to forward
    # instead of the whole live context (which holds the reply stored after that point)
    resent: Forwarded | None = None


@dataclass(frozen=True)
class Identity:
    key: str      # GatewaySession.identity: "id:<name>", "user:<name>" or "lead:<digest>"
    source: str   # what it came from: X-Session-Id, metadata.session_id, user, leading messages

    @property
    def label(self) -> str:
        return self.key.split(":", 1)[1][:80] if self.source != "leading messages" else self.key[5:17]


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
        """The running digest after the first ``k`` messages (0 <= k <= len(messages))."""
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
    text_digest = raw.digest(raw.length) if raw is not None else None
    if raw is None or text_digest is None:
        gw.raw_count, gw.raw_length, gw.raw_digest, gw.raw_chain = 0, 0, "", ""
    else:
        gw.raw_count, gw.raw_length, gw.raw_digest = body.count, raw.length, text_digest
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


def _keep_hint(project_id: int, identity: Identity, gw: GatewaySession) -> None:
    if not (gw.raw_digest and identity.source == "X-Session-Id"):
        return
    if len(_HINTS) >= _HINTS_MAX:
        _HINTS.clear()
    _HINTS[(project_id, identity.key)] = Hint(gw.raw_count, gw.raw_length, gw.raw_digest)


def identity_of(body: ChatBody, header: str | None) -> Identity:
    """Who is speaking (step 1); a 400 for a name that is too long or not valid text."""
    for value, source, param in ((header, "X-Session-Id", None),
                                 (body.metadata.get("session_id"), "metadata.session_id", "metadata.session_id"),
                                 (body.user, "user", "user")):
        if value is None or not value.strip():
            continue
        value = value.strip()
        if len(value) > 500 or text_problem(value):
            raise bad_request(f"{source}: at most 500 characters of valid text", param=param)
        return Identity((f"id:{value}" if source != "user" else f"user:{value}"), source)
    check_messages(body, body.checked, lead_length(body.messages))
    return Identity(f"lead:{leading_digest(body.messages)}", "leading messages")


# -- step 3: how the request reads against the stored histories ---------------------------

@dataclass(frozen=True)
class _Extends:
    gw: GatewaySession


@dataclass(frozen=True)
class _Resends:
    gw: GatewaySession


@dataclass(frozen=True)
class _Forks:
    parent: GatewaySession
    at: int
    reason: str


def _read(body: ChatBody, chains: Chains, candidates: list[GatewaySession]) -> _Extends | _Resends | _Forks | None:
    """What the request does with the identity's stored histories (None: there are none)."""
    n = body.count
    ordered = sorted(candidates, key=lambda c: (c.stored_count, c.pk), reverse=True)
    for cand in ordered:  # the longest stored history the request extends
        if chains.base == 0 and _trusted(body, cand):
            chains.trust(cand.raw_count, cand.raw_chain)
        if 0 < cand.stored_count <= n and chains.at(cand.stored_count) == cand.chain:
            return _Extends(cand)
    for cand in ordered:  # one it resends without the reply stored last (no history read)
        if cand.stored_count == n + 1 and cand.prev_chain and chains.at(n) == cand.prev_chain:
            return _Resends(cand)
    if not candidates:
        return None
    return _diverging(body, candidates)


def _diverging(body: ChatBody, candidates: list[GatewaySession]) -> _Resends | _Forks:
    """Where the request leaves the identity's latest session, or the session that one was
    forked from when the request leaves both at the same message or earlier (so a second
    change at a message already changed once forks from the session that had it first)."""
    by_session = {c.session_id: c for c in candidates}
    gw = max(candidates, key=lambda c: c.pk)
    found = _compared(body, gw)
    while (isinstance(found, _Forks) and gw.forked_at is not None and found.at <= gw.forked_at
           and gw.forked_from_id in by_session):
        parent = by_session[gw.forked_from_id]  # type: ignore[index]
        earlier = _compared(body, parent)
        if isinstance(earlier, _Forks) and earlier.at < found.at:
            break
        gw, found = parent, earlier
    return found


def _compared(body: ChatBody, gw: GatewaySession) -> _Resends | _Forks:
    """The request against ``gw``'s stored history, message by message (the history is read:
    this happens only when the digests showed the request neither extends nor resends it)."""
    check_messages(body, body.checked)
    rows = list(StoredMessage.objects.filter(session_id=gw.session_id).order_by("position")
                .values_list("role", "raw"))
    stored = [digest(raw) for _role, raw in rows]
    sent = body.messages
    n, k = len(sent), len(stored)
    m = 0
    while m < min(n, k) and digest(sent[m]) == stored[m]:
        m += 1
    if m == n:  # a shorter copy of the stored history: the client resends an earlier point
        return _Resends(gw)
    # m < k here: a request holding the whole stored history extends it. Removed messages:
    # the request goes on from m as the stored history goes on from a later position.
    rest = [digest(raw) for raw in sent[m:]]
    back = next((j for j in range(m + 1, k) if stored[j:j + len(rest)] == rest[:k - j]), None)
    if back is not None:
        what = f"message #{m} was removed" if back == m + 1 else f"messages #{m} to #{back - 1} were removed"
    elif sent[m].get("role") == "assistant" and rows[m][0] == "assistant":
        what = f"message #{m} (the assistant's reply) was regenerated"
    else:
        what = f"message #{m} was edited"
    return _Forks(gw, m, what)


# -- the decision -------------------------------------------------------------------------

def _service_error(exc: ServiceError) -> GatewayError:
    """The store's refusal as a 400, as OpenAI answers a malformed request (the store says 422
    for some), except a 413 (over IMPORT_MAX_MESSAGES), which stays a 413 as the REST API
    answers it, so a client can tell "too much" from "malformed"."""
    param = getattr(exc, "field", None)
    if exc.status == 413:
        return GatewayError(exc.status, str(exc.detail), param=param)
    return bad_request(str(exc.detail), param=param)


def place(project: Project, body: ChatBody, header: str | None) -> Placement:
    """Find or start the request's session and store its new messages (nothing else is
    written): steps 1 to 4 of the module's story, in one transaction that holds the
    identity's lock from before it reads the identity's sessions until its writes commit."""
    identity = identity_of(body, header)
    chains = Chains(body)
    try:
        with transaction.atomic():
            relax_commit()  # the client resends whatever this stores (see durability)
            lock_identity(project.pk, identity.key)
            # the sessions come with what their policies are read from, so the request reads
            # them once, here; they are locked too (as an append locks its session), and read
            # under that lock, so storing what the request adds reads nothing again
            candidates = locked(project.pk, identity.key, CANDIDATES)
            found = _read(body, chains, candidates)
            if isinstance(found, _Extends):
                placed = _extend(found.gw, body, chains)
            elif isinstance(found, _Resends):
                resent = _resend(found.gw, body)
                # a compaction folded what follows the resent point into a summary: the live
                # context cannot be sent as it was there, so the request starts over, forked
                placed = resent or _start(project, body, identity, chains, _Forks(
                    found.gw, body.count, f"messages #{body.count} to #{found.gw.stored_count - 1} were removed"))
            else:
                placed = _start(project, body, identity, chains, found)
    except ServiceError as exc:
        raise _service_error(exc) from None
    _keep_hint(project.pk, identity, placed.gateway)
    return placed


def _extend(gw: GatewaySession, body: ChatBody, chains: Chains) -> Placement:
    """Store what the request adds to ``gw``'s session (the caller holds ``gw``'s lock)."""
    chains.last()  # validates what the trusted prefix does not cover, before anything is written
    policy, _row = effective_policy(gw.session)
    new = body.after(gw.stored_count)
    fields = _remember_raw(gw, body, chains)
    with batched_writes():  # the rows below go to the database together, as the block ends
        if new:
            gw.session = append_messages(gw.session, new, auto_compact=False, policy=policy, locked=True).session
            gw.stored_count = body.count
            gw.prev_chain, gw.chain = chains.at(body.count - 1), chains.last()
            fields += ["stored_count", "chain", "prev_chain"]
        update_row(gw, [*fields, "updated_at"])
    return Placement(gw.session, gw, len(new), created=False, policy=policy, at=body.count)


def _resend(gw: GatewaySession, body: ChatBody) -> Placement | None:
    """The request resends an earlier point of ``gw``'s history: nothing is stored, and the
    live context is forwarded as it was there (the reply is not stored: the history keeps
    the one stored first). None when the live context no longer has that point."""
    resent = cut_at(gw.session_id, body.count, gw.stored_count)
    if resent is None:
        return None
    policy, _row = effective_policy(gw.session)
    return Placement(gw.session, gw, 0, created=False, policy=policy, at=body.count, resent=resent)


def _start(project: Project, body: ChatBody, identity: Identity, chains: Chains,
           fork: _Forks | None) -> Placement:
    """A new session from the request's whole history: the identity's first, or a fork."""
    check_messages(body, body.checked)  # a new session stores them all
    # the caller may hold the project unread (its id only): a new session reads all of it
    full = Project.objects.select_related("active_policy").filter(pk=project.pk).first()
    if full is None:
        raise project_gone()
    # the request's OpenAI metadata is kept on the session it starts, as an import keeps it
    imported = convert_payload(body.messages, tools=body.tools or None, format="openai", model=body.model,
                               source="messages", metadata={"metadata": body.metadata} if body.metadata else None)
    if not imported.title:  # no user text to take a title from
        imported.title = f"gateway {identity.label}"
    result = import_session(full, imported, auto_compact=False)
    n = body.count
    gw = GatewaySession(session=result.session, project=full, identity=identity.key, stored_count=n,
                        chain=chains.last(), prev_chain=chains.at(n - 1), identity_source=identity.source,
                        client_user=(body.user or "")[:500])
    if fork is not None:
        parent = fork.parent
        gw.forked_from_id, gw.forked_at, gw.fork_reason = parent.session_id, fork.at, fork.reason[:300]
        gw.fork_root_id = parent.fork_root_id or parent.session_id
    _remember_raw(gw, body, chains)
    gw.save()
    policy, _row = effective_policy(result.session)
    return Placement(result.session, gw, n, created=True, policy=policy, at=n,
                     forked_from=gw.forked_from_id, fork_reason=gw.fork_reason)


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
            gw.prev_chain, gw.chain = gw.chain, extend_chain(gw.chain, [reply])[-1]
            gw.save(update_fields=["stored_count", "chain", "prev_chain", "updated_at"])
        if then is not None:
            then()
    return session
