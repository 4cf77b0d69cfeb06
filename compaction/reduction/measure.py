"""Sizes of messages for reduction decisions: characters of content and tokens.

Ordinary messages are counted with the caller's :class:`MessageCounter` (cached by content
hash, shared with the live context). Two kinds of text are counted piecewise instead:

- very large texts: tiktoken returns a Python list of every token id (tens of bytes per
  token, so a 10 MB output would need hundreds of MB) and its regex overflows its stack
  on about a million characters without whitespace;
- texts with long runs (one character repeated, or a long stretch without whitespace):
  BPE time grows with the square of a run's length (64k repeated characters take about
  7 seconds), which a single ``=====`` banner or progress bar in a log can trigger.

Pieces are cut at whitespace where possible; long runs are cut every 1,024 characters, and
a piece that is one character repeated is counted once per character and reused. The result differs from a whole-text count by a
token or so per cut, which no reduction decision is sensitive to.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any

from ..messages import Message, canonical_json, text_of
from ..tokens import MessageCounter

BIG_TEXT_CHARS = 262_144      # texts longer than this are counted slice by slice
SLICE_CHARS = 65_536
RUN_CHECK_CHARS = 16_384      # shorter texts are cheap even in the worst case
LONG_RUN_CHARS = 4096
_RUN_PIECE = 1024
_WS_RUNS = (" " * 2048, "\n" * 2048, "\t" * 2048, "\r\n" * 1024)
_LONG_RUN = re.compile(r"\S{%d,}|\s{2048,}" % LONG_RUN_CHARS)
_BIG_MEMO: "OrderedDict[tuple[str, str], int]" = OrderedDict()
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


def _is_big(raw: dict) -> bool:
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


def slices(text: str, size: int = SLICE_CHARS) -> list[str]:
    out = []
    i, n = 0, len(text)
    while i < n:
        j = min(n, i + size)
        if j < n:
            # Cut after whitespace near the end of the slice so no word is split in two.
            k = max(text.rfind(" ", j - 2048, j), text.rfind("\n", j - 2048, j))
            if k > i:
                j = k + 1
        out.append(text[i:j])
        i = j
    return out


def _has_long_run(piece: str) -> bool:
    # str.split and substring search run in C; a regex over megabytes would take seconds.
    return max(map(len, piece.split()), default=0) >= LONG_RUN_CHARS or any(w in piece for w in _WS_RUNS)


def needs_care(text: str) -> bool:
    if len(text) > BIG_TEXT_CHARS:
        return True
    if len(text) <= RUN_CHECK_CHARS:
        return False
    return _has_long_run(text)


@lru_cache(maxsize=4096)
def _repeated_tokens(count_text, piece: str) -> int:
    return count_text(piece)


def _count_piece(counter: MessageCounter, text: str) -> int:
    if not _has_long_run(text):
        return counter.count_text(text)
    total = 0
    pos = 0
    for m in _LONG_RUN.finditer(text):
        if m.start() > pos:
            total += counter.count_text(text[pos:m.start()])
        run = m.group()
        for i in range(0, len(run), _RUN_PIECE):
            piece = run[i:i + _RUN_PIECE]
            if piece.count(piece[0]) == len(piece):
                total += _repeated_tokens(counter.count_text, piece)
            else:
                total += counter.count_text(piece)
        pos = m.end()
    if pos < len(text):
        total += counter.count_text(text[pos:])
    return total


def count_text(counter: MessageCounter, text: str) -> int:
    """Tokens of one text; large or run-heavy texts are counted piece by piece."""
    if not needs_care(text):
        return counter.count_text(text)
    return sum(_count_piece(counter, s) for s in slices(text))


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
