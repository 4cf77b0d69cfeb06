"""Sizes of messages for reduction decisions: characters of content and tokens.

Ordinary messages are counted with the caller's :class:`MessageCounter` (cached by content
hash, shared with the live context). Very large texts and texts with long runs are counted
piece by piece through :mod:`compaction.textsize` (see there for why); whole messages that
hold such texts are memoized here by content hash, since reduction re-measures them often.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..messages import Message, canonical_json, text_of
from ..textsize import needs_care, safe_count, slices  # noqa: F401  (slices re-exported for callers)
from ..tokens import MESSAGE_OVERHEAD, NAME_OVERHEAD, MessageCounter

_BIG_MEMO: OrderedDict[tuple[str, str], int] = OrderedDict()
_BIG_MEMO_SIZE = 256
_MEMO_LOCK = threading.Lock()


def document_text(content: Any) -> str:
    """The text a reader sees in a content value: the string itself, or the text parts of a
    list joined by newlines (images and other attachments are reachable by part index)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return text_of(content)
    return canonical_json(content)


def text_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return len(document_text(content))
    return 0


def _is_big(raw: dict[str, Any]) -> bool:
    content = raw.get("content")
    if isinstance(content, str):
        if needs_care(content):
            return True
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and needs_care(part["text"]):
                return True
    for call in raw.get("tool_calls") or []:
        args = (call.get("function") or {}).get("arguments")
        if isinstance(args, str) and needs_care(args):
            return True
    return False


def count_text(counter: MessageCounter, text: str) -> int:
    """Tokens of one text; large or run-heavy texts are counted piece by piece."""
    return safe_count(counter.count_text, text)


def _big_tokens(counter: MessageCounter, msg: Message) -> int:
    key = (counter.name, msg.hash)
    with _MEMO_LOCK:
        hit = _BIG_MEMO.get(key)
        if hit is not None:
            _BIG_MEMO.move_to_end(key)
            return hit
    raw = msg.raw
    skeleton = dict(raw)
    big: list[str] = []
    content = raw.get("content")
    if isinstance(content, str) and needs_care(content):
        big.append(content)
        skeleton["content"] = ""
    elif isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and needs_care(part["text"]):
                big.append(part["text"])
                part = dict(part, text="")
            parts.append(part)
        skeleton["content"] = parts
    if raw.get("tool_calls"):
        calls = []
        for call in raw["tool_calls"]:
            fn = call.get("function") or {}
            args = fn.get("arguments")
            if isinstance(args, str) and needs_care(args):
                big.append(args)
                call = dict(call, function=dict(fn, arguments=""))
            calls.append(call)
        skeleton["tool_calls"] = calls
    total = counter.count_raw(skeleton).total + sum(count_text(counter, t) for t in big)
    with _MEMO_LOCK:
        _BIG_MEMO[key] = total
        if len(_BIG_MEMO) > _BIG_MEMO_SIZE:
            _BIG_MEMO.popitem(last=False)
    return total


def tokens_of(counter: MessageCounter, msg: Message) -> int:
    if _is_big(msg.raw):
        return _big_tokens(counter, msg)
    return counter.count(msg).total


def text_tokens_at_most(raw: dict[str, Any]) -> int | None:
    """An upper bound of a message's tokens read without tokenizing: every token stands for
    at least one byte of text, so a message whose content is one string costs at most its
    UTF-8 bytes plus the framing. None for any other shape (parts, tool calls)."""
    content = raw.get("content")
    if not isinstance(content, str) or raw.get("tool_calls"):
        return None
    return len(content.encode("utf-8", "surrogatepass")) + MESSAGE_OVERHEAD + (NAME_OVERHEAD if raw.get("name") else 0)


def tokens_many(counter: MessageCounter, msgs: list[Message]) -> list[int]:
    """Token totals of many messages: one tokenizer batch for the small ones."""
    small = [(i, m) for i, m in enumerate(msgs) if not _is_big(m.raw)]
    out = [0] * len(msgs)
    if small:
        for (i, _), t in zip(small, counter.count_many([m for _, m in small])):
            out[i] = t.total
    for i, m in enumerate(msgs):
        if _is_big(m.raw):
            out[i] = _big_tokens(counter, m)
    return out
