"""OpenAI chat-format messages: validation, stable ids, provenance, canonical bytes.

The engine never mutates a caller's dict. An original message keeps the exact dict it
arrived as (``raw``); everything the engine learns about it (id, provenance, reduction
marks) lives beside it on :class:`Message`, so the dict we send to a provider is the
dict we were given, and the archive can reproduce it byte for byte.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from enum import Enum
from typing import Any, Literal, TypeAlias, get_args

from .errors import Fault, SessionValidationError

JSONObject: TypeAlias = dict[str, Any]
"""A decoded JSON object: what crosses the engine's boundaries (sessions, stored records, events)."""

RawMessage: TypeAlias = JSONObject
"""One OpenAI chat message exactly as the caller sent it (its shape is checked, not typed)."""

Role = Literal["system", "developer", "user", "assistant", "tool"]
PartType = Literal["text", "image_url", "input_audio", "file", "refusal"]

ROLES: frozenset[Role] = frozenset(get_args(Role))
PART_TYPES: frozenset[PartType] = frozenset(get_args(PartType))


class Provenance(str, Enum):
    ORIGINAL = "original"            # as the agent sent it (possibly reduced, see Message.reduction)
    SUMMARY = "summary"              # written by a compaction
    ACKNOWLEDGEMENT = "acknowledgement"  # synthetic assistant turn after a summary
    PRESERVED = "preserved"          # copy of an evicted user message, re-inserted
    PINNED = "pinned"                # original that a compaction lifted out of the evicted span


def canonical_json(value: Any) -> str:
    """The one serialisation used for hashing, archiving and byte-exact replay checks."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def content_hash(raw: RawMessage) -> str:
    # surrogatepass: a lone surrogate in tool output must not make a message unhashable
    return hashlib.sha256(canonical_json(raw).encode("utf-8", "surrogatepass")).hexdigest()


class Message:
    """One message of a live context.

    ``raw`` is the OpenAI dict to send. For an original that a reduction step edited,
    ``raw`` is the edited dict and the untouched one is in the archive under
    ``reduction["archive_ref"]``. ``ordinal`` is the position in the original sequence
    (None for messages the engine wrote).
    """

    __slots__ = ("raw", "id", "provenance", "ordinal", "meta", "_hash")

    def __init__(self, raw: RawMessage, id: str, provenance: Provenance = Provenance.ORIGINAL,
                 ordinal: int | None = None, meta: JSONObject | None = None) -> None:
        self.raw = raw
        self.id = id
        self.provenance = provenance
        self.ordinal = ordinal
        self.meta = meta if meta is not None else {}
        self._hash: str | None = None

    # -- convenience accessors -------------------------------------------------
    @property
    def role(self) -> Role:
        role: Role = self.raw["role"]  # checked by validate_message, or written by the engine
        return role

    @property
    def tool_calls(self) -> list[JSONObject]:
        calls: list[JSONObject] = self.raw.get("tool_calls") or []
        return calls

    @property
    def tool_call_id(self) -> str | None:
        cid: str | None = self.raw.get("tool_call_id")
        return cid

    @property
    def hash(self) -> str:
        if self._hash is None:
            self._hash = content_hash(self.raw)
        return self._hash

    @property
    def is_original(self) -> bool:
        """True for messages that belong to the original sequence (replayed from archive)."""
        return self.ordinal is not None and self.provenance in (Provenance.ORIGINAL, Provenance.PINNED)

    @property
    def is_engine_written(self) -> bool:
        return self.provenance in (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT)

    @property
    def reduction(self) -> JSONObject | None:
        """Set by tool-output reduction: {"kind": "cleared"|"truncated", "archive_ref": ..., ...}."""
        mark: JSONObject | None = self.meta.get("reduction")
        return mark

    @property
    def pinned(self) -> bool:
        return self.provenance is Provenance.PINNED or bool(self.meta.get("pinned"))

    def with_raw(self, raw: RawMessage, **meta: Any) -> Message:
        """A copy carrying an edited dict; identity (id, ordinal, provenance) is kept."""
        new_meta = dict(self.meta)
        new_meta.update(meta)
        return Message(raw, self.id, self.provenance, self.ordinal, new_meta)

    def to_dict(self) -> JSONObject:
        """Serialisable form with the engine's annotations (for storage, not for providers)."""
        return {"id": self.id, "provenance": self.provenance.value, "ordinal": self.ordinal,
                "meta": self.meta, "message": self.raw}

    @classmethod
    def from_dict(cls, data: JSONObject) -> Message:
        return cls(data["message"], data["id"], Provenance(data["provenance"]), data.get("ordinal"),
                   dict(data.get("meta") or {}))

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<Message {self.id} {self.role} {self.provenance.value}>"


def original_id(ordinal: int) -> str:
    """Stable id of the n-th original message of a session."""
    return f"m{ordinal:06d}"


# -- text helpers ----------------------------------------------------------------

def iter_text(content: Any) -> Iterator[str]:
    """Text pieces of a content value (string or list of parts); images yield nothing."""
    if content is None:
        return
    if isinstance(content, str):
        yield content
        return
    for part in content:
        if isinstance(part, dict):
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                yield part["text"]
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                yield part["refusal"]


def text_of(content: Any) -> str:
    return "\n".join(iter_text(content))


def image_parts(content: Any) -> list[JSONObject]:
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]


def tool_name_index(messages: Iterable[Message]) -> dict[str, str]:
    """tool_call_id -> tool name, for labelling tool results."""
    names: dict[str, str] = {}
    for m in messages:
        for call in m.tool_calls:
            fn = call.get("function") or {}
            names[call.get("id", "")] = fn.get("name", "")
    return names


# -- validation ------------------------------------------------------------------

def _fail(msg: str, index: int | None, fault: Fault, source: str | None,
          field: str | None = None) -> SessionValidationError:
    return SessionValidationError(msg, index=index, fault=fault, source=source, field=field)


def _lone_surrogate(raw: JSONObject) -> tuple[str, str, int] | None:
    """(field path, the surrogate, its character offset) of the first string anywhere in the
    message (keys included) that cannot be written as UTF-8, or None.

    Such text is accepted by JSON and by Python but not by the archive, the database or a
    provider, so a message carrying it would break every later compaction of its session.
    The walk uses a stack, not recursion: a message may be nested as deeply as its parser allowed.
    """
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if value.isascii():
                continue
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return path, value[exc.start], exc.start
        elif isinstance(value, dict):
            items = list(value.items())
            for key, item in reversed(items):
                # A key that is itself at fault is named with escapes, so the error stays storable.
                name = key.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(key, str) else str(key)
                where = f"{path}.{name}" if path else name
                stack.append((where, item))
                if isinstance(key, str):
                    stack.append((f"{where} (a key)", key))
        elif isinstance(value, list):
            stack.extend((f"{path}[{k}]", item) for k, item in reversed(list(enumerate(value))))
    return None


def validate_message(raw: Any, index: int, source: str | None = None) -> None:
    """Check one message's shape (not its links to other messages)."""
    if not isinstance(raw, dict):
        raise _fail(f"expected an object, got {type(raw).__name__}", index, "not_an_object", source)
    bad = _lone_surrogate(raw)
    if bad is not None:
        where, char, offset = bad
        raise _fail(f"{where}: contains a lone surrogate (U+{ord(char):04X}) at character {offset}; "
                    "text must be valid UTF-8", index, "unencodable_text", source, field=where)
    role = raw.get("role")
    if role not in ROLES:
        raise _fail(f"unknown role {role!r} (expected one of {', '.join(sorted(ROLES))})", index, "unknown_role", source)
    content = raw.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise _fail(f"content must be a string, a list of parts or null, got {type(content).__name__}",
                    index, "bad_content", source)
    if isinstance(content, list):
        for p, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in PART_TYPES:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise _fail(f"content part {p} has unsupported type {kind!r}", index, "bad_content_part", source)
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise _fail(f"content part {p} is a text part without a string 'text'", index, "bad_content_part", source)
            if part["type"] == "image_url":
                url = part.get("image_url")
                url = url.get("url") if isinstance(url, dict) else url
                if not isinstance(url, str):
                    raise _fail(f"content part {p} is an image_url part without a url", index, "bad_content_part", source)
    if role != "assistant" and "tool_calls" in raw and raw["tool_calls"]:
        raise _fail(f"only assistant messages may carry tool_calls (role is {role!r})", index, "misplaced_tool_calls", source)
    if role == "assistant" and raw.get("tool_calls") is not None:
        calls = raw["tool_calls"]
        if not isinstance(calls, list):
            raise _fail("tool_calls must be a list", index, "bad_tool_calls", source)
        for c, call in enumerate(calls):
            if not isinstance(call, dict):
                raise _fail(f"tool_calls[{c}] must be an object", index, "bad_tool_call", source)
            if not isinstance(call.get("id"), str) or not call["id"]:
                raise _fail(f"tool_calls[{c}] has no id", index, "missing_call_id", source)
            if call.get("type", "function") != "function":
                raise _fail(f"tool_calls[{c}] has unsupported type {call.get('type')!r}", index, "bad_tool_call", source)
            fn = call.get("function")
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise _fail(f"tool_calls[{c}] needs function.name", index, "bad_tool_call", source)
            if not isinstance(fn.get("arguments", ""), str):
                raise _fail(f"tool_calls[{c}].function.arguments must be a JSON string, got "
                            f"{type(fn.get('arguments')).__name__}", index, "malformed_arguments", source)
    if role == "tool":
        if not isinstance(raw.get("tool_call_id"), str) or not raw["tool_call_id"]:
            raise _fail("tool message without tool_call_id", index, "missing_tool_call_id", source)


class CallTracker:
    """Follows tool-call ids across a session to reject orphans and duplicates incrementally."""

    __slots__ = ("seen", "open", "open_owner")

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.open: dict[str, int] = {}  # call id -> index of the assistant message that made it
        self.open_owner: int | None = None

    def feed(self, raw: RawMessage, index: int, source: str | None = None) -> None:
        role = raw["role"]
        if role == "tool":
            cid = raw["tool_call_id"]
            if cid not in self.open:
                why = "was already answered" if cid in self.seen else "matches no earlier tool call"
                raise _fail(f"orphan tool result: tool_call_id {cid!r} {why}", index, "orphan_tool_result", source)
            del self.open[cid]
            return
        if self.open and role != "tool":
            # A new turn starts while calls of an earlier assistant message are unanswered:
            # providers reject such histories, so we do too.
            cid, owner = next(iter(self.open.items()))
            raise _fail(f"tool call {cid!r} of message {owner} has no result before the next "
                        f"{role} message", index, "unanswered_tool_call", source)
        for call in raw.get("tool_calls") or []:
            cid = call["id"]
            if cid in self.seen:
                raise _fail(f"duplicate tool call id {cid!r}", index, "duplicate_call_id", source)
            self.seen.add(cid)
            self.open[cid] = index


def validate_session(messages: Any, source: str | None = None) -> list[RawMessage]:
    """Validate a whole session; returns the list. Trailing unanswered calls are legal."""
    if not isinstance(messages, list):
        raise _fail(f"messages must be a list, got {type(messages).__name__}", None, "not_a_list", source)
    tracker = CallTracker()
    for i, raw in enumerate(messages):
        validate_message(raw, i, source)
        tracker.feed(raw, i, source)
    return messages


def validate_tools(tools: Any, source: str | None = None) -> list[JSONObject]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _fail("tools must be a list of tool schemas", None, "bad_tools", source)
    for t, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _fail(f"tools[{t}] must be an object", None, "bad_tools", source)
        fn = tool.get("function", tool)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _fail(f"tools[{t}] needs a function name", None, "bad_tools", source)
    return tools


def load_session_file(data: Any, source: str | None = None) -> tuple[str | None, list[RawMessage], list[JSONObject]]:
    """Accept the corpus format ``{"id", "messages", "tools"?}`` or a bare message list."""
    if isinstance(data, list):
        return None, validate_session(data, source), []
    if isinstance(data, dict) and "messages" in data:
        return (data.get("id"), validate_session(data["messages"], source),
                validate_tools(data.get("tools"), source))
    raise _fail("expected a list of messages or an object with a 'messages' list", None, "bad_session", source)


def wrap_originals(raws: Iterable[RawMessage], start: int = 0) -> list[Message]:
    return [Message(raw, original_id(start + i), Provenance.ORIGINAL, start + i) for i, raw in enumerate(raws)]
