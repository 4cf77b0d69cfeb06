"""In-process compaction for callers that resend the whole history on every model call.

A proxy-style hook (the litellm callback) sees each request's full ``messages`` and must
send a compacted list instead, call after call, without recounting the conversation. Each
conversation keeps a :class:`~compaction.session.CompactionSession` with running totals;
a request is matched to it by a conversation id (given) or a digest of its leading
messages, and only the messages past the ones already seen are appended. Checking that the
request continues the conversation reads one message (the last one seen), so a call costs
O(new messages) plus the engine's O(1) trigger check, however long the history grows.

A request that does not continue what was seen starts the conversation over from its full
list: one shorter than what was seen, or whose message at the last seen position differs
(the caller cut its history or rewrote its newest turn). An edit further back, with the
newest seen message unchanged, is not looked for: finding it would mean rehashing the
whole history on every call; a caller that rewrites old turns names a new conversation id. The caller's lists and dicts are never
modified: the compacted list is a new list.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..archive import ArchiveBackend, MemoryArchive
from ..compactor import Hooks
from ..messages import Message, RawMessage, canonical_json, content_hash
from ..policy import Policy
from ..session import CompactionSession
from ._common import IntegrationError, check_new_messages

# How many leading messages identify a conversation that names no id: the system prompt
# and the first user turn, which an agent loop never rewrites.
LEADING_MESSAGES = 2


def leading_digest(messages: Sequence[RawMessage]) -> str:
    """A conversation key from its first messages (stable while the history only grows)."""
    h = hashlib.sha256()
    for raw in messages[:LEADING_MESSAGES]:
        h.update(canonical_json(raw).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return "digest:" + h.hexdigest()[:32]


class _Conversation:
    __slots__ = ("session", "seen", "last_hash", "_rendered", "_rendered_of", "_rendered_len")

    def __init__(self, session: CompactionSession) -> None:
        self.session = session
        self.seen = 0            # how many of the caller's messages are in the session
        self.last_hash = ""      # content hash of the last of them
        # The last rendered context, the live message list it was rendered from and that
        # list's length then: a context that only grew since is extended, not re-rendered.
        self._rendered: list[RawMessage] = []
        self._rendered_of: list[Message] | None = None
        self._rendered_len = 0

    def context(self) -> list[RawMessage]:
        """The messages to send (a new list). Rendering walks the whole context; when the
        live list is the one rendered last time (no compaction replaced it) and only grew,
        the new originals are added as they are, which is what a full render gives them,
        unless one is a system or developer message (a summary injected into the system
        prompt may move into it): then it renders in full."""
        live = self.session.live
        grown = live.messages[self._rendered_len:] if live.messages is self._rendered_of else None
        if grown is not None and all(m.role not in ("system", "developer") for m in grown):
            self._rendered.extend(m.raw for m in grown)
        else:
            self._rendered = live.render()
        self._rendered_of, self._rendered_len = live.messages, len(live.messages)
        return list(self._rendered)

    def continues(self, messages: Sequence[RawMessage]) -> bool:
        if self.seen == 0:
            return True
        return len(messages) >= self.seen and content_hash(messages[self.seen - 1]) == self.last_hash


class ConversationCompactor:
    """Keeps one compaction session per conversation and returns, for each request, the
    messages to send. ``max_conversations`` bounds memory: the least recently used
    conversation is forgotten first (its next request starts it over)."""

    def __init__(self, policy: Policy | str | dict[str, Any] = "default", *, integration: str = "compaction",
                 archive: ArchiveBackend | None = None, hooks: Hooks | None = None,
                 max_conversations: int = 256, clock: Callable[[], float] = time.time) -> None:
        if max_conversations < 1:
            raise ValueError("max_conversations must be at least 1")
        self.policy = policy
        self.integration = integration
        self.archive = archive if archive is not None else MemoryArchive()
        self.hooks = hooks
        self.max_conversations = max_conversations
        self.clock = clock
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        # One request at a time per conversation (its session is not safe to share between
        # threads), while other conversations go on: a summary's model call takes seconds.
        # ``_lock`` guards only the two tables.
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def _new(self, key: str, tools: list[dict[str, Any]] | None) -> _Conversation:
        session = CompactionSession(self.policy, archive=self.archive, session_id=key, tools=tools,
                                    hooks=self.hooks, clock=self.clock)
        return _Conversation(session)

    def compact(self, messages: Sequence[RawMessage], *, conversation_id: str | None = None,
                tools: list[dict[str, Any]] | None = None) -> list[RawMessage]:
        """The messages to send instead of ``messages`` (the caller's full history).

        Raises :class:`IntegrationError` naming the integration, the message index and the
        fault when a message is not one the engine accepts; the conversation's state is then
        exactly as before the call."""
        if not isinstance(messages, (list, tuple)) or not messages:
            raise IntegrationError(self.integration, "messages must be a non-empty list", index=None,
                                   fault="not_a_list")
        key = conversation_id or leading_digest(messages)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        try:
            with lock:
                return self._compact(key, lock, messages, tools)
        except BaseException:
            with self._lock:
                if key not in self._conversations:   # refused at its first request: no trace left
                    self._locks.pop(key, None)
            raise

    def _compact(self, key: str, lock: threading.Lock, messages: Sequence[RawMessage],
                 tools: list[dict[str, Any]] | None) -> list[RawMessage]:
        with self._lock:
            conv = self._conversations.get(key)
        if conv is None or not conv.continues(messages):
            conv = self._new(key, tools)
        new = messages[conv.seen:]
        # Everything is checked before anything is appended: a refused message leaves
        # the conversation (or its absence) untouched.
        check_new_messages(self.integration, conv.session.live.tracker, new, conv.seen)
        for raw in new:
            conv.session.append(raw)
        if new:
            conv.seen = len(messages)
            conv.last_hash = content_hash(messages[-1])
        self._remember(key, conv, lock)
        conv.session.before_model_call()
        return conv.context()

    def _remember(self, key: str, conv: _Conversation, lock: threading.Lock) -> None:
        with self._lock:
            self._conversations[key] = conv
            self._conversations.move_to_end(key)
            self._locks[key] = lock
            while len(self._conversations) > self.max_conversations:
                gone, _ = self._conversations.popitem(last=False)
                self._locks.pop(gone, None)

    def session(self, conversation_id: str) -> CompactionSession | None:
        """The engine session of a conversation (its outcomes, totals, archive), if known."""
        conv = self._conversations.get(conversation_id)
        return conv.session if conv is not None else None

    def forget(self, conversation_id: str) -> None:
        with self._lock:
            self._conversations.pop(conversation_id, None)
            self._locks.pop(conversation_id, None)
