"""Model calls recorded by a tracer, folded into conversations: what every trace export
(Langfuse, Phoenix, LangSmith; the OTLP receiver) shares once its records are read.

A tracer records one span (run, observation) per model call, holding the messages the call
sent (the whole history so far, resent each turn) and the messages it got back. A format
module turns each call into a :class:`Call`; :func:`fold` then builds the sessions:

- **grouping**: by the conversation id the tracer recorded (a session, thread or
  conversation id), else by trace id;
- **order**: by start time (then end time, then id), whatever the order of the file; a
  group where a call has no start time keeps the file's order;
- **duplicates**: a call delivered twice (same id, same content) counts once; the same id
  with different content is refused (fault ``duplicate_span``);
- **folding**: a call whose input begins with a conversation's messages continues it (only
  the new messages are added, then the answer). When the input restates the conversation's
  last answer differently (a tracer's own rendering of it), the input's version is kept. A
  call whose input and answer are already part of a conversation (a retry) adds nothing. A
  call that continues no conversation (a sub-task with its own prompt, a regenerated turn)
  starts another session of the group, whose ``external_id`` is the group's id with ``#2``,
  ``#3``...;
- **usage**: the provider's token counts of the calls are summed into
  ``metadata["trace"]["usage"]`` beside the session's own estimate.

Messages are read by :func:`chat_messages` from the shapes tracers record: OpenAI chat
messages, LangChain messages (serialized ``{"lc": 1, "type": "constructor", ...}``,
``{"type": "human", "data": {...}}`` or ``{"type": "ai", "content": ...}``), and a plain
string. Nothing is returned until every call of the export converted and every session
passed :func:`compaction.messages.validate_session`: a bad record never leaves a half-built
session.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import jsontext
from ..errors import Fault, SessionValidationError
from ..messages import JSONObject, RawMessage, text_of
from ._base import DISTINCT, NO, FormatName, ImportedSession, JsonLines, Sample, err, finish

_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant",
          "system": "system", "developer": "system", "tool": "tool"}
_LANGCHAIN_CLASSES = {"HumanMessage": "user", "HumanMessageChunk": "user", "AIMessage": "assistant",
                      "AIMessageChunk": "assistant", "SystemMessage": "system", "SystemMessageChunk": "system",
                      "ToolMessage": "tool", "ToolMessageChunk": "tool", "ChatMessage": None,
                      "ChatMessageChunk": None}
# Content parts another field already carries (tool_use: the tool calls) or that providers
# do not take back (reasoning): left out of the text.
_SKIPPED_PARTS = frozenset({"tool_use", "tool_call", "thinking", "redacted_thinking", "reasoning"})
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


class CallError(Exception):
    """A fault in one record; :func:`fail` turns it into the import error naming the record."""

    def __init__(self, msg: str, fault: Fault = "bad_span") -> None:
        super().__init__(msg)
        self.fault: Fault = fault


@dataclass
class Call:
    """One model call as a tracer recorded it, its messages already in OpenAI form."""
    id: str
    #: Where the record is, for errors: "span 3f2a... (line 4)".
    where: str
    trace_id: str | None
    #: The conversation id the tracer recorded (session, thread, conversation), if any.
    conversation: str | None
    start: float | None
    end: float | None
    input: list[RawMessage]
    output: list[RawMessage]
    tools: list[JSONObject] = field(default_factory=list)
    model: str | None = None
    #: The provider's own counts: ``input_tokens``, ``output_tokens``.
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return self.conversation or self.trace_id or self.id

    def digest(self) -> str:
        return json.dumps([self.trace_id, self.conversation, self.start, self.end, self.input, self.output,
                           self.tools, self.model, self.usage], sort_keys=True, default=str)


# -- reading records --------------------------------------------------------------------------

def unwrapped(data: Any, key: str) -> Any:
    """The list an export may wrap in ``{key: [...]}`` (Langfuse's ``data``, LangSmith's
    ``runs``), else the data itself."""
    if isinstance(data, dict) and isinstance(data.get(key), list):
        return data[key]
    return data


def detect_records(sample: Sample, looks_like: Callable[[Any], bool], wrapper: str) -> int:
    """A trace export's detection: the sample (one record, a list of them, or a list wrapped
    in ``{wrapper: [...]}``) is this format's when a record among its first 20 looks like one."""
    data = sample.value if sample.lines else unwrapped(sample.value, wrapper)
    if isinstance(data, dict):
        return DISTINCT if looks_like(data) else NO
    if isinstance(data, list) and data:
        return DISTINCT if any(looks_like(x) for x in data[:20]) else NO
    return NO


def calls_from(found: Iterable[tuple[str, Any]], call_of: Callable[[str, Any], Call | None], source: str | None,
               item: str | None = None) -> list[Call]:
    """The model calls ``call_of`` reads from records given as (where, record), in their order
    (None: a record that is no model call). The first fault raises, naming its record. With
    ``item`` ("span"), a record that is not an object is refused as not being an ``item``."""
    calls = []
    for where, obj in found:
        if item is not None and not isinstance(obj, dict):
            raise err(f"{where}: expected a {item} object, got {type(obj).__name__}", "not_an_object", source)
        try:
            call = call_of(where, obj)
        except CallError as exc:
            raise fail(exc, where, source) from None
        if call is not None:
            calls.append(call)
    return calls


def records(data: Any, item: str = "item") -> list[tuple[str, Any]]:
    """(where, record) of a list or JSON lines; a single object is one record."""
    if isinstance(data, JsonLines):
        return [(f"line {n}", rec) for n, rec in data]
    if isinstance(data, list):
        return [(f"{item} {i}", rec) for i, rec in enumerate(data)]
    return [("input", data)]


def pick(obj: Any, *keys: str) -> Any:
    """The first of ``keys`` present (not None) in a dict: exports spell one field in
    camelCase or snake_case."""
    if not isinstance(obj, dict):
        return None
    for k in keys:
        value = obj.get(k)
        if value is not None:
            return value
    return None


def text_id(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def maybe_json(value: Any, what: str) -> Any:
    """A JSON document held in a string (exports store inputs and outputs that way) parsed;
    other strings as they are. A string that opens like JSON but does not parse was cut off
    by a size limit somewhere: refused, naming the field."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{":
        return value
    try:
        return jsontext.loads(text, max_depth=None)
    except (ValueError, jsontext.TooDeep):
        raise CallError(f"{what} holds JSON that does not parse ({len(value):,} characters): "
                        "it was cut off (a tracer's attribute or field size limit?)") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "\u2026"


def timestamp(value: Any, what: str) -> float | None:
    """Seconds since the epoch from an ISO 8601 string ("2024-05-29 13:46:19.963000",
    "...T...Z", an offset) or a number (seconds, milliseconds, microseconds or nanoseconds,
    told apart by size)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            raise CallError(f"{what} {_shown(value)} is not a time") from None
        if not math.isfinite(number) or number < 0:
            raise CallError(f"{what} {_shown(value)} is not a time")
        # Nanoseconds, microseconds and milliseconds since 1970 are this large for any time
        # after 1973; seconds stay below 1e11 until the year 5138.
        for floor, per_second in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
            if number >= floor:
                return number / per_second
        return number
    if isinstance(value, str):
        text = value.strip().replace(" ", "T", 1)
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        head, dot, rest = text.partition(".")
        if dot:  # fromisoformat takes at most 6 fractional digits
            digits = len(rest) - len(rest.lstrip("0123456789"))
            rest = rest[:min(digits, 6)] + rest[digits:]
            text = head + "." + rest
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise CallError(f"{what} {_shown(value)} is not a time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    raise CallError(f"{what} {_shown(value)} is not a time")


# -- messages ------------------------------------------------------------------------------------

def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps({} if value is None else value, ensure_ascii=False)


def _tool_call(raw: Any, k: int, what: str) -> JSONObject:
    """An OpenAI tool call from OpenAI's form or LangChain's ``{"name", "args", "id"}``."""
    if not isinstance(raw, dict):
        raise CallError(f"{what}: tool call {k} is not an object")
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else None
    name = (fn or {}).get("name") if fn else raw.get("name")
    args = fn.get("arguments") if fn else raw.get("args", raw.get("arguments"))
    cid = raw.get("id")
    if not isinstance(name, str) or not name:
        raise CallError(f"{what}: tool call {k} has no function name")
    if not isinstance(cid, str) or not cid:
        raise CallError(f"{what}: tool call {k} ({name}) has no id")
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": _arguments(args)}}


def _content(value: Any, what: str) -> str | list[JSONObject] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise CallError(f"{what}: content must be text or a list of parts, got {type(value).__name__}")
    parts: list[JSONObject] = []
    for j, part in enumerate(value):
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url" and isinstance(part.get("image_url"), (dict, str)):
            url = part["image_url"]
            parts.append({"type": "image_url", "image_url": url if isinstance(url, dict) else {"url": url}})
        elif kind in _SKIPPED_PARTS:
            continue
        else:
            raise CallError(f"{what}: content part {j} of type {kind!r} cannot be imported")
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def chat_message(obj: Any, what: str, default_role: str = "user") -> RawMessage:
    """One message in OpenAI form from an OpenAI or LangChain message, or a string."""
    if isinstance(obj, str):
        return {"role": default_role, "content": obj}
    if not isinstance(obj, dict):
        raise CallError(f"{what}: a message must be an object, got {type(obj).__name__}")
    fields: JSONObject = obj
    role: Any = obj.get("role")
    if obj.get("lc") == 1 and obj.get("type") == "constructor":  # LangChain's dumpd()
        ident = obj.get("id")
        cls = ident[-1] if isinstance(ident, list) and ident else None
        kwargs = obj.get("kwargs")
        fields = kwargs if isinstance(kwargs, dict) else {}
        if cls not in _LANGCHAIN_CLASSES:
            raise CallError(f"{what}: LangChain message class {cls!r} cannot be imported")
        role = _LANGCHAIN_CLASSES[cls] or fields.get("role")
    elif role is None and isinstance(obj.get("type"), str):  # messages_to_dict / model_dump
        if isinstance(obj.get("data"), dict):
            fields = obj["data"]
        kind = obj["type"].lower().removesuffix("messagechunk").removesuffix("message")
        role = "user" if kind == "human" else "assistant" if kind == "ai" else kind
        if kind == "chat":
            role = fields.get("role")
    mapped = _ROLES.get(role) if isinstance(role, str) else None
    if mapped is None:
        raise CallError(f"{what}: unknown role {role!r}" if role is not None else f"{what}: a message without a role")
    message: RawMessage = {"role": mapped, "content": _content(fields.get("content"), what)}
    raw_calls = fields.get("tool_calls")
    if not raw_calls and isinstance(fields.get("additional_kwargs"), dict):
        raw_calls = fields["additional_kwargs"].get("tool_calls")
    if raw_calls and mapped == "assistant":
        if not isinstance(raw_calls, list):
            raise CallError(f"{what}: tool_calls must be a list")
        message["tool_calls"] = [_tool_call(c, k, what) for k, c in enumerate(raw_calls)]
        if message["content"] == "":
            message["content"] = None  # OpenAI's form of a message that only calls tools
    if mapped == "tool":
        cid = fields.get("tool_call_id")
        if not isinstance(cid, str) or not cid:
            raise CallError(f"{what}: a tool message without tool_call_id")
        message["tool_call_id"] = cid
        if message["content"] is None:
            message["content"] = ""
    if message["content"] is None and not message.get("tool_calls"):
        message["content"] = ""
    return message


def chat_messages(value: Any, what: str, default_role: str = "user") -> list[RawMessage]:
    """A list of messages (a list, a ``{"messages": [...]}`` request, one message, a
    string); an empty list when there is nothing."""
    value = maybe_json(value, what)
    if value is None:
        return []
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # LangChain's batch of one: [[messages]]
    if not isinstance(value, list):
        value = [value]
    return [chat_message(m, f"{what} message {i}", default_role) for i, m in enumerate(value)]


def tools_of(value: Any) -> list[JSONObject]:
    """OpenAI tool schemas from OpenAI's form or a bare ``{"name", "parameters"}``."""
    out: list[JSONObject] = []
    for tool in value if isinstance(value, list) else []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):
            out.append({"type": "function", "function": tool["function"]})
        elif isinstance(tool.get("name"), str):
            fn: JSONObject = {"name": tool["name"]}
            if tool.get("description"):
                fn["description"] = tool["description"]
            fn["parameters"] = tool.get("parameters") or tool.get("input_schema") or {"type": "object",
                                                                                    "properties": {}}
            out.append({"type": "function", "function": fn})
    return out


def count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def usage(input_tokens: Any, output_tokens: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    if (n := count(input_tokens)) is not None:
        out["input_tokens"] = n
    if (n := count(output_tokens)) is not None:
        out["output_tokens"] = n
    return out


# -- folding ---------------------------------------------------------------------------------------

def fail(exc: CallError, where: str, source: str | None) -> SessionValidationError:
    return err(f"{where}: {exc}", exc.fault, source)


def _key(m: RawMessage) -> tuple[Any, ...]:
    """What makes two renderings of one message the same message."""
    calls = []
    for c in m.get("tool_calls") or []:
        fn = c.get("function") or {}
        args = fn.get("arguments")
        try:  # the same arguments written with other spacing or key order are the same call
            args = json.dumps(jsontext.loads(args), sort_keys=True) if isinstance(args, str) else args
        except ValueError:
            pass
        calls.append((c.get("id"), fn.get("name"), args))
    return (m.get("role"), text_of(m.get("content")).strip(), tuple(calls), m.get("tool_call_id"))


class _Thread:
    def __init__(self, group: str) -> None:
        self.group = group
        self.messages: list[RawMessage] = []
        self.keys: list[tuple[Any, ...]] = []
        self.settled = 0  # messages before the last call's answer
        self.calls: list[Call] = []

    def add(self, call: Call, new_input: list[RawMessage]) -> None:
        for m in new_input:
            self.messages.append(m)
            self.keys.append(_key(m))
        self.settled = len(self.messages)
        for m in call.output:
            self.messages.append(m)
            self.keys.append(_key(m))
        self.calls.append(call)

    def truncate(self, n: int) -> None:
        del self.messages[n:]
        del self.keys[n:]


def _place(call: Call, threads: list[_Thread]) -> None:
    keys_in = [_key(m) for m in call.input]
    whole = keys_in + [_key(m) for m in call.output]
    for t in threads:
        if len(whole) <= len(t.keys) and t.keys[:len(whole)] == whole:
            t.calls.append(call)  # a retry of a turn already folded in
            return
    best: _Thread | None = None
    for t in threads:  # the longest conversation the input continues
        if len(t.keys) <= len(keys_in) and keys_in[:len(t.keys)] == t.keys:
            if best is None or len(t.keys) > len(best.keys):
                best = t
    if best is not None:
        best.add(call, call.input[len(best.keys):])
        return
    for t in threads:  # the input restates the last answer its own way: keep the input's
        n = t.settled
        if n < len(keys_in) and keys_in[:n] == t.keys[:n] and keys_in[n][0] == "assistant" \
                and len(t.keys) > n and t.keys[n][0] == "assistant":
            t.truncate(n)
            t.add(call, call.input[n:])
            return
    fresh = _Thread(call.group)
    fresh.add(call, call.input)
    threads.append(fresh)


def _ordered(calls: list[Call]) -> list[Call]:
    if all(c.start is not None for c in calls):
        return sorted(calls, key=lambda c: (c.start, c.end if c.end is not None else c.start, c.id))
    return calls


def _unique(calls: Iterable[Call], source: str | None) -> list[Call]:
    seen: dict[str, tuple[Call, str]] = {}
    out = []
    for call in calls:
        digest = call.digest()
        if call.id in seen:
            first, first_digest = seen[call.id]
            if first_digest != digest:
                raise err(f"{call.where}: {call.id!r} was already read at {first.where} with different content "
                          "(the same id twice)", "duplicate_span", source)
            continue
        seen[call.id] = (call, digest)
        out.append(call)
    return out


def fold(calls: list[Call], fmt: FormatName, source: str | None, what: str = "model calls") -> list[ImportedSession]:
    """The sessions a trace export's model calls make (see the module docstring)."""
    calls = _unique(calls, source)
    if not calls:
        raise err(f"no {what} with messages in this export", "no_messages", source)
    groups: dict[str, list[Call]] = {}
    for call in calls:
        groups.setdefault(call.group, []).append(call)
    threads: list[_Thread] = []
    for group_calls in groups.values():
        mine: list[_Thread] = []
        for call in _ordered(group_calls):
            _place(call, mine)
        threads.extend(mine)
    # Sessions in the order their conversations started (file order when times are missing).
    first_seen = {c.id: i for i, c in enumerate(calls)}
    threads.sort(key=lambda t: (t.calls[0].start is None, t.calls[0].start or 0.0, first_seen[t.calls[0].id]))
    numbered: dict[str, int] = {}
    out = []
    for t in threads:
        numbered[t.group] = numbered.get(t.group, 0) + 1
        n = numbered[t.group]
        external_id = t.group if n == 1 else f"{t.group}#{n}"
        out.append(_session(t, external_id, fmt, source))
    return out


def _session(t: _Thread, external_id: str, fmt: FormatName, source: str | None) -> ImportedSession:
    tools: dict[str, JSONObject] = {}
    for call in t.calls:
        for tool in call.tools:
            tools.setdefault(str(tool["function"].get("name")), tool)
    where = f"{source}: conversation {external_id}" if source else f"conversation {external_id}"
    imported = finish(t.messages, None, list(tools.values()), title=None, external_id=external_id,
                      model=next((c.model for c in t.calls if c.model), None), fmt=fmt, source=where)
    totals: dict[str, int] = {}
    for call in t.calls:
        for k, v in call.usage.items():
            totals[k] = totals.get(k, 0) + v
    trace: JSONObject = {"format": fmt, "calls": len(t.calls),
                         "trace_ids": sorted({c.trace_id for c in t.calls if c.trace_id})}
    if totals:
        trace["usage"] = totals
    imported.metadata = {"trace": trace}
    return imported


@dataclass
class Continued:
    """What new calls add to stored conversations (the OTLP receiver's incremental fold):
    ``appended[key]`` the messages to append to stored conversation ``key``, ``sessions``
    the new conversations (their ``external_id`` numbered after the stored ones)."""
    appended: dict[str, list[RawMessage]]
    sessions: list[ImportedSession]
    #: For each stored conversation and new session (by external id): its calls.
    calls: dict[str, list[Call]]


def fold_onto(stored: dict[str, list[RawMessage]], calls: list[Call], fmt: FormatName,
              source: str | None) -> Continued:
    """Fold ``calls`` (already free of ones seen before) onto stored conversations, keyed by
    external id (a group's id, ``id#2``, ...). A call continuing a stored conversation adds
    only its new messages; other calls start new conversations, as :func:`fold` would."""
    calls = _unique(calls, source)
    groups: dict[str, list[Call]] = {}
    for call in calls:
        groups.setdefault(call.group, []).append(call)
    appended: dict[str, list[RawMessage]] = {}
    by_id: dict[str, list[Call]] = {}
    sessions: list[ImportedSession] = []
    for group, group_calls in groups.items():
        mine: list[_Thread] = []
        seeded: dict[int, tuple[str, int]] = {}  # id(thread) -> (stored key, stored length)
        for key, messages in stored.items():
            if key == group or key.startswith(group + "#"):
                t = _Thread(group)
                for m in messages:
                    t.messages.append(m)
                    t.keys.append(_key(m))
                t.settled = len(t.messages)  # stored messages are never rewritten
                mine.append(t)
                seeded[id(t)] = (key, len(messages))
        taken = len(mine)
        for call in _ordered(group_calls):
            _place(call, mine)
        for t in mine:
            if id(t) in seeded:
                key, n = seeded[id(t)]
                if len(t.messages) > n:
                    appended[key] = t.messages[n:]
                if t.calls:
                    by_id[key] = t.calls
        number = max([1] + [int(k.rpartition("#")[2]) for k in stored
                            if k.startswith(group + "#") and k.rpartition("#")[2].isdigit()]) if taken else 0
        for t in mine[taken:]:
            number += 1
            external_id = group if number == 1 else f"{group}#{number}"
            sessions.append(_session(t, external_id, fmt, source))
            by_id[external_id] = t.calls
    return Continued(appended=appended, sessions=sessions, calls=by_id)
