"""Tokenizing hostile text safely: very large outputs, long runs, broken Unicode.

Three things go wrong when a raw tool output goes straight into tiktoken:
- a text of about a million characters without whitespace overflows the regex stage
  and raises a Rust panic (a BaseException that would kill a worker);
- BPE time grows with the square of a run's length (64k repeated characters take
  seconds), which one ``=====`` banner or progress bar in a log can trigger;
- a lone surrogate (``"\\ud800"``) cannot be passed to the tokenizer at all
  (``replace_lone_surrogates`` makes any JSON value encodable).

``safe_count`` counts such texts piece by piece: slices of 64k characters cut at
whitespace, long runs cut every 1,024 characters (a piece that is one character repeated
is counted once and reused). The result differs from a whole-text count by about a token
per cut, which no compaction decision is sensitive to; ordinary texts are counted whole.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from . import jsontext

BIG_TEXT_CHARS = 262_144      # texts longer than this are counted slice by slice
SLICE_CHARS = 65_536
RUN_CHECK_CHARS = 16_384      # shorter texts are cheap even in the worst case
LONG_RUN_CHARS = 4096
RUN_PIECE = 1024
_WS_RUNS = (" " * 2048, "\n" * 2048, "\t" * 2048, "\r\n" * 1024)
_LONG_RUN = re.compile(rf"\S{{{LONG_RUN_CHARS},}}|\s{{2048,}}")


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


def has_long_run(piece: str) -> bool:
    # str.split and substring search run in C; a regex over megabytes would take seconds.
    return max(map(len, piece.split()), default=0) >= LONG_RUN_CHARS or any(w in piece for w in _WS_RUNS)


def needs_care(text: str) -> bool:
    """True for texts that must not be tokenized in one call."""
    if len(text) > BIG_TEXT_CHARS:
        return True
    if len(text) <= RUN_CHECK_CHARS:
        return False
    return has_long_run(text)


def valid_unicode(text: str) -> str:
    """The text with lone surrogates replaced, so it can be encoded as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


REPLACEMENT_CHARACTER = "\ufffd"
# In a Python string a surrogate code point is always lone: the JSON parser joins an escaped
# pair into one character.
_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(value: Any) -> tuple[Any, int]:
    """A JSON value with every lone surrogate in its strings (object keys included) replaced
    by U+FFFD, and the number replaced. Values without one come back as the same objects.

    A tool call's ``arguments`` is JSON inside a string: an escaped surrogate there
    (``"\\ud800"`` as six characters) becomes one when the arguments are parsed, so such
    arguments are parsed, repaired and written again."""
    if isinstance(value, str):
        fixed, n = _SURROGATE.subn(REPLACEMENT_CHARACTER, value)
        return (fixed, n) if n else (value, 0)
    if isinstance(value, list):
        items = [replace_lone_surrogates(v) for v in value]
        total = sum(n for _, n in items)
        return ([v for v, _ in items], total) if total else (value, 0)
    if isinstance(value, dict):
        total = 0
        out = {}
        for k, v in value.items():
            k2, nk = replace_lone_surrogates(k)
            v2, nv = _repaired_arguments(v) if k == "arguments" else replace_lone_surrogates(v)
            out[k2] = v2
            total += nk + nv
        return (out, total) if total else (value, 0)
    return value, 0


def _repaired_arguments(value: Any) -> tuple[Any, int]:
    fixed, n = replace_lone_surrogates(value)
    if not isinstance(fixed, str) or ("\\ud" not in fixed and "\\uD" not in fixed):
        return fixed, n
    try:
        parsed = jsontext.loads(fixed)
    except ValueError:  # not JSON (or too deep for jsontext): the text is kept as it is
        return fixed, n
    parsed, inner = replace_lone_surrogates(parsed)
    return (json.dumps(parsed, ensure_ascii=False), n + inner) if inner else (fixed, n)


@lru_cache(maxsize=4096)
def _repeated(count: Callable[[str], int], piece: str) -> int:
    return count(piece)


def _count_piece(count: Callable[[str], int], text: str) -> int:
    if not has_long_run(text):
        return count(text)
    total = 0
    pos = 0
    for m in _LONG_RUN.finditer(text):
        if m.start() > pos:
            total += count(text[pos:m.start()])
        run = m.group()
        for i in range(0, len(run), RUN_PIECE):
            piece = run[i:i + RUN_PIECE]
            total += _repeated(count, piece) if piece.count(piece[0]) == len(piece) else count(piece)
        pos = m.end()
    if pos < len(text):
        total += count(text[pos:])
    return total


def safe_count(count: Callable[[str], int], text: str) -> int:
    """Tokens of ``text`` with ``count`` (a plain whole-text counter), hostile text included."""
    text = valid_unicode(text)
    if not needs_care(text):
        return count(text)
    return sum(_count_piece(count, s) for s in slices(text))
