"""``openai_jsonl``: one OpenAI message per line; blank lines are ignored. One pass over the
lines checks each message (a fault names its line) and, with ``stream``, keeps where each
line is instead of the parsed message (:class:`JsonlMessages`)."""
from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from ..errors import SessionValidationError
from ..messages import CallTracker, RawMessage, validate_message
from ._base import (
    NO,
    SURE,
    Format,
    ImportedSession,
    Options,
    Sample,
    err,
    first_user_title,
    too_many,
)
from ._text import line_spans, loads


def _detect(sample: Sample) -> int:
    data = sample.value
    if sample.lines:
        return SURE if data and all(isinstance(r, dict) and "role" in r for r in data) else NO
    return SURE if isinstance(data, dict) and "role" in data else NO


class JsonlMessages(Sequence[RawMessage]):
    """The messages of OpenAI JSONL text that was read and validated once, each parsed again
    when it is read: what is kept is the text and where each message's line starts and ends
    (16 bytes a message), never every message at once. An import of 300,000 lines then holds
    one chunk of message dicts at a time. Every read gives new dicts."""

    __slots__ = ("_text", "_spans")

    def __init__(self, text: str, spans: array[int]) -> None:
        self._text = text
        self._spans = spans  # start, end of message k at 2k, 2k + 1

    def __len__(self) -> int:
        return len(self._spans) // 2

    @overload
    def __getitem__(self, index: int) -> RawMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[RawMessage]: ...

    def __getitem__(self, index: int | slice) -> RawMessage | list[RawMessage]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        n = len(self)
        k = index + n if index < 0 else index
        if not 0 <= k < n:
            raise IndexError("message index out of range")
        message: RawMessage = json.loads(self._text[self._spans[2 * k]:self._spans[2 * k + 1]])
        return message

    def __iter__(self) -> Iterator[RawMessage]:
        text, spans = self._text, self._spans
        for k in range(0, len(spans), 2):
            yield json.loads(text[spans[k]:spans[k + 1]])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by value, like a list


def _openai_jsonl(text: str, source: str | None, stream: bool = False,
                  max_messages: int | None = None) -> ImportedSession:
    """One pass over the lines: each is parsed and its shape checked (a fault names its line,
    the first one wins), tool-call pairing is followed (its first fault is reported once
    every line is known to parse, as a check of the whole converted session would), and the
    title is taken from the first user message that has one. ``stream``: keep where each
    message is instead of the message (see :class:`JsonlMessages`). ``max_messages``: the
    line past it is refused before it is parsed."""
    messages: list[RawMessage] = []
    spans = array("q")
    tracker = CallTracker()
    pairing: SessionValidationError | None = None
    title: str | None = None
    count = 0
    for n, start, end in line_spans(text):
        line = text[start:end]
        if not line.strip():
            continue
        if max_messages is not None and count >= max_messages:
            raise too_many(max_messages, source)
        try:
            rec = loads(line, source, n)
        except json.JSONDecodeError as exc:
            raise err(f"bad JSON: {exc.msg} (column {exc.colno})", "bad_json", source, line=n) from None
        if not isinstance(rec, dict):
            raise err(f"expected a message object, got {type(rec).__name__}", "not_an_object", source, line=n)
        try:
            validate_message(rec, count)
        except SessionValidationError as exc:
            msg = str(exc).split(": ", 1)[-1]
            raise err(msg, exc.fault, source, line=n) from None
        if pairing is None:
            try:
                tracker.feed(rec, count)
            except SessionValidationError as exc:
                msg = str(exc)
                if msg.startswith(f"message {count}: "):
                    msg = msg[len(f"message {count}: "):]
                # worded as _finish words a fault of the converted session
                pairing = SessionValidationError(f"converted message {count} (from line {n}): {msg}", index=count,
                                                 fault=exc.fault, source=source)
                pairing.line = n
        if title is None and rec.get("role") == "user":
            title = first_user_title([rec])
        if stream:
            spans.append(start)
            spans.append(end)
        else:
            messages.append(rec)
        count += 1
    if not count:
        raise err("the input holds no JSON lines", "empty", source)
    if pairing is not None:
        raise pairing
    return ImportedSession(messages=JsonlMessages(text, spans) if stream else messages, tools=[], title=title,
                           external_id=None, model=None, format="openai_jsonl")



def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    if isinstance(data, (dict, list)):
        data = "\n".join(json.dumps(x) for x in (data if isinstance(data, list) else [data]))
    return [_openai_jsonl(data, source, options.stream, options.max_messages)]


FORMAT = Format(name="openai_jsonl", order=20, detect=_detect, convert=_convert, reads_text=True,
                label="OpenAI JSONL (one message per line)")
