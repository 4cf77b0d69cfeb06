"""Reading import text: UTF-8 decoding, the one JSON parser's faults turned into import
errors, and JSON lines read one line at a time (a 300,000-line import is never split into a
list of lines)."""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

from .. import jsontext
from ._base import err


def as_text(payload: str | bytes, source: str | None) -> str:
    if isinstance(payload, bytes):
        try:
            return payload.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise err(f"not UTF-8 text (byte {exc.start})", "bad_encoding", source) from None
    return payload[1:] if payload.startswith("\ufeff") else payload


def loads(text: str, source: str | None, line: int | None = None) -> Any:
    """json.loads, with the faults it raises besides JSONDecodeError turned into import errors.

    Python's parser gives up on arrays or objects nested a few thousand levels deep
    (RecursionError) and on integers longer than the interpreter's digit limit (ValueError);
    both are faults of the input, not of the engine. So are NaN, Infinity and numbers out of
    the float range (``jsontext`` refuses them: strict JSON has none), named by their path.
    """
    try:
        return jsontext.loads(text, max_depth=None)
    except json.JSONDecodeError:
        raise
    except jsontext.TooDeep:
        raise err("bad JSON: arrays or objects are nested too deeply", "bad_json", source, line=line) from None
    except jsontext.NonFiniteNumber as exc:
        fault = err(f"bad JSON: {exc}", "bad_json", source, line=line)
        fault.field = exc.path or None
        raise fault from None
    except ValueError as exc:
        # The integer digit limit is the one other ValueError the parser raises.
        why = (f"a number has more than {sys.get_int_max_str_digits()} digits" if "digits" in str(exc)
               else str(exc))
        raise err(f"bad JSON: {why}", "bad_json", source, line=line) from None


def parse_json(text: str, source: str | None) -> Any:
    try:
        return loads(text, source)
    except json.JSONDecodeError as exc:
        raise err(f"bad JSON: {exc.msg} (column {exc.colno})", "bad_json", source, line=exc.lineno) from None


# The line boundaries of str.splitlines(), so that line numbers stay what they always were.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def line_spans(text: str) -> Iterator[tuple[int, int, int]]:
    """(line number, start, end) of each line, as ``text.splitlines()`` cuts them, without
    making the list of every line at once (a 300,000-line import is read line by line)."""
    start = n = 0
    for n, brk in enumerate(_LINE_BREAK.finditer(text), start=1):
        yield n, start, brk.start()
        start = brk.end()
    if start < len(text):
        yield n + 1, start, len(text)


def lines(text: str) -> Iterator[tuple[int, str]]:
    for n, start, end in line_spans(text):
        yield n, text[start:end]


def iter_jsonl(text: str, source: str | None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line."""
    for n, line in lines(text):
        if not line.strip():
            continue
        try:
            yield n, loads(line, source, n)
        except json.JSONDecodeError as exc:
            raise err(f"bad JSON: {exc.msg} (column {exc.colno})", "bad_json", source, line=n) from None


def try_whole_json(text: str, source: str | None) -> tuple[bool, Any]:
    """(True, value) when the text is one JSON document, (False, None) when it is not JSON;
    input the parser refuses outright (too deep, too many digits) raises."""
    try:
        return True, loads(text, source)
    except json.JSONDecodeError:
        return False, None

