"""The body of ``POST /v1/chat/completions``, checked before anything is stored.

Only fields of OpenAI's chat completion request are accepted; an unknown field is refused
(as OpenAI does) rather than silently dropped or, worse, handed to litellm, where a field
such as ``api_base`` would choose the server's network peer. Fields that shape the model's
answer are forwarded upstream (:data:`FORWARDED`); ``metadata`` and ``stream_options`` are
the gateway's to read."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C string scanner json.loads uses
from typing import Any

from compaction import jsontext
from compaction.errors import SessionValidationError
from compaction.messages import validate_message, validate_tools

from ..services.common import text_problem
from .errors import bad_request

# Sent upstream as given (litellm passes them on to an OpenAI-compatible server).
FORWARDED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "presence_penalty",
    "frequency_penalty", "logit_bias", "seed", "tool_choice", "parallel_tool_calls", "response_format",
    "user", "reasoning_effort", "logprobs", "top_logprobs",
})
READ_HERE = frozenset({"model", "messages", "stream", "stream_options", "tools", "n", "metadata", "store"})
KNOWN = FORWARDED | READ_HERE


class RawMessages:
    """Where the body's ``messages`` array lies in the body's text: ``text[start]`` is its
    ``[`` and its last element ends just before ``text[end]``. Digests of the array's text
    from the ``[`` are SHA-256 of its UTF-8 bytes, taken in one pass however many are asked.
    ``seed``: (n, a SHA-256 object holding the first n characters from the ``[``), when the
    caller has it already (``responses_input``: the text it resends as it made it last time),
    so those characters are not hashed again."""

    def __init__(self, text: str, start: int, end: int, ascii_bytes: bytes | None,
                 seed: tuple[int, Any] | None = None):
        self.text, self.start, self.end = text, start, end
        self._bytes = memoryview(ascii_bytes) if ascii_bytes is not None else None
        self._hasher = seed[1].copy() if seed is not None else hashlib.sha256()
        self._hashed = start + (seed[0] if seed is not None else 0)  # text[start:_hashed] is in the hasher
        self._seeded = seed is not None

    @property
    def length(self) -> int:
        """Characters from the ``[`` through the end of the last element."""
        return self.end - self.start

    def digest(self, length: int) -> str | None:
        """Digest of the first ``length`` characters from the ``[`` (None past the last element
        or before a digest already taken). Equal to a digest taken at an element boundary of
        an earlier request, it is that boundary here too: the elements are JSON objects,
        whose text ends where they end, whatever follows."""
        stop = self.start + length
        if not self.start < stop <= self.end:
            return None
        if stop < self._hashed:
            if not self._seeded:
                return None
            # before the seed: no digest was taken there, so it is taken whole (rare)
            return hashlib.sha256(self.text[self.start:stop].encode("utf-8", "surrogatepass")).hexdigest()
        if stop > self._hashed:
            chunk = (self._bytes[self._hashed:stop] if self._bytes is not None
                     else self.text[self._hashed:stop].encode("utf-8", "surrogatepass"))
            self._hasher.update(chunk)
            self._hashed = stop
        return self._hasher.copy().hexdigest()


@dataclass(frozen=True)
class Hint:
    """What this process saw of an identity's last request: its message array's first
    ``count`` messages were the first ``length`` characters from the ``[``, with SHA-256
    ``digest`` (see ``identity.hint``). A body that starts with that text again need not
    decode those messages to be placed: the stored history vouches for them. ``text``: that
    text itself, when the caller keeps it (``responses_input``, which needs no digest of
    it): a body is then compared with it in place, and nothing is hashed."""

    count: int
    length: int
    digest: str
    text: str | None = None


@dataclass(frozen=True)
class Skipped:
    """The first ``count`` messages of a body, left undecoded: the ``length`` characters of
    ``text`` from ``start`` (the array's ``[``) through the end of the last of them."""

    text: str
    start: int
    length: int
    count: int

    def decode(self) -> list[Any]:
        messages = jsontext.loads(self.text[self.start:self.start + self.length] + "]", max_depth=None)
        assert isinstance(messages, list) and len(messages) == self.count
        return messages


@dataclass
class ChatBody:
    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    tools: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    user: str | None = None
    raw: RawMessages | None = None
    # messages[:checked] are validated (nulls dropped); a lazily parsed body checks the rest
    # only once it knows which of them a stored history already vouches for (check_messages).
    checked: int = -1
    # A body parsed with a hint it matched: ``messages`` is given as the messages after the
    # skipped ones, and the whole list is decoded only when ``messages`` is first read.
    skipped: Skipped | None = None

    def __post_init__(self) -> None:
        if self.skipped is not None:
            self._after_skipped = self.__dict__.pop("messages")
        if self.checked < 0:
            self.checked = self.count

    def __getattr__(self, name: str) -> Any:
        # only reached while ``messages`` is not decoded yet (normal lookup found nothing)
        skipped = self.__dict__.get("skipped")
        if name != "messages" or skipped is None:
            raise AttributeError(name)
        self.__dict__["messages"] = skipped.decode() + self._after_skipped
        self.skipped = None
        return self.__dict__["messages"]

    @property
    def count(self) -> int:
        """How many messages the body has (decoding none)."""
        skipped = self.skipped
        return skipped.count + len(self._after_skipped) if skipped is not None else len(self.messages)

    def window(self, first: int) -> tuple[list[dict[str, Any]], int]:
        """A list holding message ``first`` onwards and the index of its first element: the
        messages after the skipped ones when ``first`` is among them (nothing decoded),
        else all of them."""
        skipped = self.skipped
        if skipped is not None and first >= skipped.count:
            return self._after_skipped, skipped.count
        return self.messages, 0

    def after(self, first: int) -> list[dict[str, Any]]:
        """``messages[first:]``, decoding nothing when ``first`` is past the skipped ones."""
        messages, offset = self.window(first)
        return messages[first - offset:]


def _drop_nulls(raw: dict[str, Any]) -> dict[str, Any]:
    """A message as the OpenAI SDK dumps it carries null fields (refusal, audio, function_call,
    tool_calls...); they say nothing and are not stored."""
    out = {k: v for k, v in raw.items() if v is not None}
    if out.get("tool_calls") == []:
        del out["tool_calls"]
    return out


def json_object(data: bytes) -> dict[str, Any]:
    """The body as a JSON object; a 400 saying why not (naming the field that holds NaN,
    Infinity or a number out of the float range: strict JSON has none of them)."""
    try:
        body = jsontext.loads(data, max_depth=None)
    except jsontext.NonFiniteNumber as exc:
        raise bad_request(f"the body is not valid JSON: {exc}", param=exc.path or None) from None
    except ValueError as exc:
        raise bad_request(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


_WS = re.compile(r"[ \t\n\r]*")


def _expect(text: str, i: int, what: str) -> None:
    if text[i:i + 1] != what:
        raise json.JSONDecodeError(f"Expecting {what!r}", text, i)


def _resume(text: str, data: bytes, start: int, hint: Hint) -> tuple[RawMessages, Skipped, list[Any], int] | None:
    """The message array at ``text[start]`` read from where ``hint`` says the text seen before
    ends: where it lies, the skipped part, the messages after it, and the position after
    the array; None when the array does not start with that text."""
    if not 1 < hint.length < len(text) - start:
        return None
    raw = RawMessages(text, start, len(text), data if len(data) == len(text) else None)
    if hint.text is not None:
        if len(hint.text) != hint.length or not text.startswith(hint.text, start):
            return None
    elif raw.digest(hint.length) != hint.digest:
        return None
    after: list[Any] = []
    end = i = start + hint.length  # just after the last skipped message
    while True:
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        if text[i:i + 1] == "]":
            break
        _expect(text, i, ",")
        value, end = jsontext.raw_decode(text, _WS.match(text, i + 1).end())  # type: ignore[union-attr]
        after.append(value)
        i = end
    raw.end = end
    return raw, Skipped(text, start, hint.length, hint.count), after, i + 1


def _walk(data: bytes, hint: Hint | None = None, array: str = "messages"
          ) -> tuple[dict[str, Any], RawMessages | None, Skipped | None]:
    """``json.loads(data)`` for a body that is an object, plus where its ``array`` (``messages``,
    or a Responses body's ``input``) lies. Every value is decoded by the C scanner json.loads uses (through jsontext, which
    refuses NaN and infinities); only the top level is stepped through here. With a ``hint``
    the array matches, the elements it covers are skipped (``obj[array]`` holds those after
    them)."""
    text = data.decode("utf-8")
    skipped: Skipped | None = None
    i = _WS.match(text, 0).end()  # type: ignore[union-attr]
    _expect(text, i, "{")
    obj: dict[str, Any] = {}
    raw: RawMessages | None = None
    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if text[i:i + 1] == "}":
        return obj, None, None
    while True:
        _expect(text, i, '"')
        key, i = scanstring(text, i + 1)
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        _expect(text, i, ":")
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        start = i
        resumed = _resume(text, data, i, hint) if key == array and hint is not None else None
        if resumed is not None:
            raw, skipped, obj[key], i = resumed
        else:
            obj[key], i = jsontext.raw_decode(text, i)
        if key == array and resumed is None:
            skipped = None
            raw = None
            if isinstance(obj[key], list) and obj[key]:
                last = i - 1  # the array's "]"; its last element ends before the whitespace ahead of it
                while text[last - 1] in " \t\n\r":
                    last -= 1
                raw = RawMessages(text, start, last, data if len(data) == len(text) else None)
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        if text[i:i + 1] == "}":
            break
        _expect(text, i, ",")
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if _WS.match(text, i + 1).end() != len(text):  # type: ignore[union-attr]
        raise json.JSONDecodeError("Extra data", text, i + 1)
    return obj, raw, skipped


def json_object_with_spans(data: bytes, hint: Hint | None = None, array: str = "messages"
                           ) -> tuple[dict[str, Any], RawMessages | None, Skipped | None]:
    """The body as a JSON object and, when it is plain UTF-8 JSON, where its ``array`` lies
    (and what of it ``hint`` let it skip); anything the walk does not take goes through
    ``json_object`` (the same errors as before)."""
    try:
        return _walk(data, hint, array)
    except (ValueError, RecursionError, IndexError):
        return json_object(data), None, None


def model_name(body: dict[str, Any]) -> str:
    """The body's ``model``, checked (a 400 naming it otherwise) and stripped."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("model: give the model name as a non-empty string", param="model")
    if len(model) > 200 or text_problem(model):
        raise bad_request("model: at most 200 characters of valid text", param="model")
    return model.strip()


def check_messages(body: ChatBody, first: int = 0, stop: int | None = None) -> None:
    """Validate ``body.messages[first:stop]`` in place (nulls dropped); a 400 naming the first
    bad message and field. Messages outside the range are the caller's to vouch for."""
    first = max(first, 0)
    stop = body.count if stop is None else min(stop, body.count)
    messages, offset = body.window(first)
    for i in range(first, stop):
        raw = messages[i - offset]
        if isinstance(raw, dict):
            raw = _drop_nulls(raw)
        try:
            validate_message(raw, i)
        except SessionValidationError as exc:
            where = f"messages[{i}]" + (f".{exc.field}" if exc.field else "")
            raise bad_request(f"{where}: {str(exc).split(': ', 1)[-1]}", param=where) from None
        messages[i - offset] = raw
    if first <= body.checked:
        body.checked = max(body.checked, stop)


def parse(data: bytes, *, lazy: bool = False, hint: Hint | None = None) -> ChatBody:
    """The checked body; a GatewayError (400) naming the field otherwise. ``lazy``: every field
    but the messages themselves is checked now, the messages by ``check_messages`` later (the
    gateway first looks for a stored history that already vouches for most of them); then a
    ``hint`` the message array matches leaves the messages it covers undecoded until read."""
    body, raw, skipped = json_object_with_spans(data, hint if lazy else None)
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise bad_request(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    model = model_name(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not (messages or skipped):
        raise bad_request("messages: give a non-empty list of messages", param="messages")
    n = body.get("n", 1)
    if n is not None and n != 1:
        raise bad_request("n: only n=1 is served", param="n")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("stream: give true or false", param="stream")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise bad_request("stream_options: an object, only with stream: true", param="stream_options")
    tools = body.get("tools") or []
    try:
        tools = validate_tools(tools) if tools else []
    except SessionValidationError as exc:
        raise bad_request(f"tools: {exc}", param="tools") from None
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad_request("metadata: an object of string values", param="metadata")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise bad_request("user: give a string", param="user")
    params = {k: v for k, v in body.items() if k in FORWARDED and v is not None}
    out = ChatBody(model=model, messages=list(messages), stream=bool(stream),
                   include_usage=bool((options or {}).get("include_usage")), tools=tools,
                   metadata=metadata, params=params, user=user, raw=raw, checked=0, skipped=skipped)
    if not lazy:
        check_messages(out)
    return out
