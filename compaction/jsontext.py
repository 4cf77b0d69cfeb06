"""The one JSON reader for text: JSON held inside a string (a tool call's ``arguments``, a
JSON tool result, stored metadata) and JSON documents arriving from clients (request
bodies, imported files).

It closes two holes of Python's ``json.loads``:

* **Depth.** The parser raises RecursionError on arrays or objects nested a few hundred to
  a few thousand levels deep (how deep depends on the stack already in use), and a
  structure it did build can still break ``json.dumps`` (indented or not) or any recursive
  walk later, far from where the text came in. A model can put such text in a string
  field that the body's own parse never looks inside. ``loads`` measures the nesting first
  (brackets inside JSON strings do not count) and refuses text nested deeper than
  ``max_depth`` with :class:`TooDeep`; :data:`MAX_DEPTH` (100 levels) is the bound for JSON
  held in strings, where callers keep the raw string instead (real tool arguments nest a
  handful of levels). Documents from clients are read with ``max_depth=None``: their depth
  is the parser's to refuse, and a RecursionError becomes :class:`TooDeep` too.
* **Numbers JSON does not have.** ``NaN``, ``Infinity``, ``-Infinity`` and numbers beyond the
  float range (``1e999999`` reads as infinity) are accepted by default and written back as
  ``NaN``/``Infinity``, which strict JSON parsers refuse. ``loads`` refuses them with
  :class:`NonFiniteNumber`, whose ``path`` names where (``messages[3].content``).

Both are ValueErrors, as ``json.JSONDecodeError`` is: a caller that falls back to the raw
text on ``ValueError`` falls back on these too.
"""
from __future__ import annotations

import json
import math
import re
from itertools import accumulate, count
from operator import sub
from typing import Any

MAX_DEPTH = 100

# Bracket bytes weigh 2 (opening) or 0 (closing), every other byte is deleted: after k
# brackets the running sum less k is the depth, so the whole walk runs in C.
_WEIGHTS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[{]}"))
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TooDeep(ValueError):
    """The text nests arrays or objects deeper than the bound (or than the parser goes)."""

    def __init__(self, bound: int | None):
        self.bound = bound
        super().__init__("arrays or objects are nested too deeply"
                         + (f" (more than {bound} levels)" if bound is not None else ""))


class NonFiniteNumber(ValueError):
    """The text holds NaN, Infinity, -Infinity or a number out of the float range.
    ``path`` is where (``""`` for the whole document), ``token`` the number as written."""

    def __init__(self, token: str, path: str = ""):
        self.token, self.path = token, path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{token} is not a number JSON allows "
                         "(NaN, Infinity and numbers out of the float range are refused)")


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in ``text`` (JSON or not); brackets inside JSON
    strings do not count. Linear, and every pass runs in C."""
    if text.count("[") + text.count("{") == 0:
        return 0
    # Escaped backslashes, then escaped quotes, go first; then every other piece between
    # quotes is a string's inside (an unterminated last string runs to the end).
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(unescaped.split('"')[::2])
    weights = outside.encode("utf-8", "surrogatepass").translate(_WEIGHTS, _NOT_BRACKETS)
    return max(0, max(map(sub, accumulate(weights), count(1)), default=0))


def too_deep(text: str, bound: int = MAX_DEPTH) -> bool:
    """True when ``text`` nests arrays or objects deeper than ``bound``."""
    # Fewer opening brackets than the bound (strings included) cannot nest deeper: the usual
    # case costs two counts.
    if text.count("[") + text.count("{") <= bound:
        return False
    return nesting_depth(text) > bound


def _refuse_constant(token: str) -> Any:
    raise NonFiniteNumber(token)


def _finite_float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise NonFiniteNumber(token)
    return value


_STRICT = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def raw_decode(text: str, index: int = 0) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode`` refusing what :func:`loads` refuses (no depth bound:
    for callers stepping through a document they have already bounded)."""
    try:
        return _STRICT.raw_decode(text, index)
    except RecursionError:
        raise TooDeep(None) from None


def loads(text: str | bytes | bytearray, *, max_depth: int | None = MAX_DEPTH) -> Any:
    """``json.loads(text)`` that never raises RecursionError and never returns NaN or
    infinity: :class:`TooDeep` past ``max_depth`` (None: as deep as the parser goes),
    :class:`NonFiniteNumber` naming where, ``json.JSONDecodeError`` for bad syntax;
    all ValueErrors. Bytes are decoded as ``json.loads`` does (UTF-8/16/32)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    elif not isinstance(text, str):  # as json.loads: a TypeError, not a ValueError
        raise TypeError(f"the JSON object must be str, bytes or bytearray, not {type(text).__name__}")
    if max_depth is not None and too_deep(text, max_depth):
        raise TooDeep(max_depth)
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        return _STRICT.decode(text)
    except RecursionError:
        raise TooDeep(max_depth) from None
    except NonFiniteNumber as exc:
        raise NonFiniteNumber(exc.token, non_finite_path(text)) from None


class _Found:
    def __init__(self, token: str):
        self.token = token


def _mark_constant(token: str) -> Any:
    return _Found(token)


def _mark_float(token: str) -> Any:
    value = float(token)
    return _Found(token) if math.isinf(value) else value


def json_path(parent: str, key: str | int) -> str:
    """``parent`` extended by an array index or an object key: ``messages[3].content``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _IDENTIFIER.match(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key, ensure_ascii=False)}]"


def non_finite_path(text: str) -> str:
    """Where the first number JSON does not allow is in ``text`` (a document that holds
    one), as a path; ``""`` for the document itself or when it cannot be found."""
    try:
        value = json.loads(text, parse_constant=_mark_constant, parse_float=_mark_float)
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:  # an explicit stack in document order: the value may nest as deep as the parser goes
        item, path = stack.pop()
        if isinstance(item, _Found):
            return path
        if isinstance(item, dict):
            stack.extend(reversed([(v, json_path(path, k)) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(v, json_path(path, i)) for i, v in enumerate(item)]))
    return ""
