"""A ``POST /v1/responses`` input that resends the last one of its identity, read without
decoding what it resends.

An agent on the Responses API sends its whole input again each turn, with a few new items
at the end. This process keeps, per identity named by ``X-Session-Id``, what it made of the
last such input: the input array's text through its last item (a ``body.Hint``), and
the chat messages those items became, as their JSON text. A next input whose text starts
with exactly that text (character for character, compared in place: no digest of the
input is needed anywhere, so none is taken) is parsed without decoding those
items (``responses_body.parse`` with the hint), and only the items after them are converted
(``items.convert``, with every check of that path); the chat request is then the kept text
followed by the new messages, the same text and the same messages the whole conversion
makes. What the messages continue is still decided by the identity against the stored rows
(``identity``): this is only a shortcut to the same request.

Only inputs that stand alone take it: no ``previous_response_id``, and no compaction item of
this gateway in the input (those read stored history: ``responses_history``). The last
converted message is kept apart from the others, because a ``function_call`` item after it
may still join it (parallel calls share one assistant turn)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .body import Hint, RawMessages, Skipped
from .items import convert, last_reference
from .responses_body import ResponsesRequest


@dataclass(frozen=True)
class Seen:
    """What the last input of an identity became."""

    hint: Hint  # the input array's text through its last item (``Hint.text``)
    instructions: str | None
    head: str  # JSON text of the converted messages but the last: "[m0, ..., m(k-1)"
    head_count: int
    last: str  # JSON text of the last converted message
    head_hash: Any  # SHA-256 of ``head`` (the identity digests the chat text: not hashed again)

    @property
    def chars(self) -> int:
        """Characters of text kept (the input's and the head's)."""
        return self.hint.length + len(self.head)


@dataclass(frozen=True)
class Converted:
    """The chat messages of a request's input: ``text`` is their JSON array (as
    ``json.dumps`` writes it); ``skipped`` the first of them left undecoded in it, and
    ``messages`` those after them (all of them when nothing is skipped)."""

    text: str
    messages: list[dict[str, Any]]
    skipped: Skipped | None
    last: str  # JSON text of the last message, as converted (before any check changed it)
    # (n, SHA-256 of text[:n]) when the text starts with a head this process hashed already
    seed: tuple[int, Any] | None = None


_SEEN: dict[tuple[int, str], Seen] = {}
# Characters of kept text this process holds at most (then it forgets them all and starts again).
_SEEN_MAX_CHARS = 64_000_000
_seen_chars = 0


def _forget(key: tuple[int, str]) -> None:
    global _seen_chars
    dropped = _SEEN.pop(key, None)
    if dropped is not None:
        _seen_chars -= dropped.chars


def _key(project_id: int, header: str | None) -> tuple[int, str] | None:
    value = header.strip() if header else ""
    return (project_id, f"id:{value}") if value else None


def hint(project_id: int, header: str | None) -> Hint | None:
    """The input text this process last saw for the identity ``header`` names, if any."""
    key = _key(project_id, header)
    seen = _SEEN.get(key) if key is not None else None
    return seen.hint if seen is not None else None


def stands_alone(req: ResponsesRequest) -> bool:
    """Whether the request's input is its whole history (nothing stored completes it)."""
    return req.previous_response_id is None and isinstance(req.input, list) and last_reference(req.input) is None


def resume(project_id: int, header: str | None, req: ResponsesRequest) -> Converted | None:
    """The request's messages converted from its new items only, when it was parsed with the
    identity's hint and still stands alone; None otherwise (then its input is whole again)."""
    key = _key(project_id, header)
    seen = _SEEN.get(key) if key is not None else None
    skipped = req.skipped
    if (skipped is None or seen is None or skipped.count != seen.hint.count or skipped.length != seen.hint.length
            or req.instructions != seen.instructions or not stands_alone(req)):
        req.whole_input()
        return None
    out: list[dict[str, Any]] = [json.loads(seen.last)]
    convert(req.input, 0, out, base=skipped.count)
    parts = [json.dumps(m) for m in out]
    text = f"{seen.head}, {', '.join(parts)}]"
    return Converted(text, out, Skipped(text, 0, len(seen.head), seen.head_count), parts[-1],
                     seed=(len(seen.head), seen.head_hash))


def whole(messages: list[dict[str, Any]]) -> Converted:
    """The messages of an input converted whole."""
    return Converted(json.dumps(messages), messages, None, json.dumps(messages[-1]) if messages else "")


def remember(project_id: int, header: str | None, req: ResponsesRequest, converted: Converted) -> None:
    """Keep what the request's input became, once the request was placed under the identity
    ``header`` names (a request placed otherwise, or one not standing alone, keeps nothing).
    Only the identity's next request reads it: ``responses_create`` calls this once a plain
    answer is out (or an error, which the client's retry follows)."""
    global _seen_chars
    key, raw = _key(project_id, header), req.raw
    if key is None:
        return
    _forget(key)
    if raw is None or not stands_alone(req):
        return
    text, last = converted.text, converted.last
    head_end = len(text) - 1 - len(last) - 2
    count = converted.skipped.count + len(converted.messages) if converted.skipped else len(converted.messages)
    if count < 2 or raw.length < 2 or text[head_end:] != f", {last}]":
        return
    tail = req.input[-1] if isinstance(req.input, list) and req.input else None
    if isinstance(tail, dict) and tail.get("type") == "reasoning":
        return  # it waits for the assistant turn of the next input, which only the whole conversion joins it to
    items = (req.skipped.count if req.skipped is not None else 0) + len(req.input)
    if _seen_chars + head_end + raw.length > _SEEN_MAX_CHARS:
        _SEEN.clear()
        _seen_chars = 0
    # the head's hash from the one this text started with, when it did: only what follows
    # it is hashed (the text is ASCII: json.dumps escapes the rest)
    seed = converted.seed
    if seed is not None and seed[0] <= head_end:
        head_hash = seed[1].copy()
        head_hash.update(text[seed[0]:head_end].encode("ascii"))
    else:
        head_hash = hashlib.sha256(text[:head_end].encode("ascii"))
    seen_input = raw.text[raw.start:raw.start + raw.length]
    _SEEN[key] = Seen(Hint(items, raw.length, "", text=seen_input), req.instructions, text[:head_end], count - 1,
                      last, head_hash)
    _seen_chars += head_end + raw.length


def chat_raw(converted: Converted) -> RawMessages:
    """Where the messages lie in their JSON text (all of it: the array and nothing else).
    A text resumed from a kept head starts hashed (``Converted.seed``): only what follows the
    head is encoded and hashed when the identity digests it."""
    text = converted.text
    if converted.seed is not None:
        return RawMessages(text, 0, len(text) - 1, None, seed=converted.seed)
    return RawMessages(text, 0, len(text) - 1, text.encode("ascii"))
