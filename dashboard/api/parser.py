"""The API's JSON body parser: a body Python's parser refuses is a 400 that says why
(bad syntax with its line and column, nesting too deep, a number with too many digits,
bytes that are not text, NaN or Infinity with the field that holds it), where django-ninja
would only say "Cannot parse request body"."""
from __future__ import annotations

import json
import sys
from typing import Any, cast

from ninja.parser import Parser

from compaction import jsontext


class BodyNotJson(ValueError):
    """The request body is not a JSON document; ``str(exc)`` says what is wrong and
    ``field`` names where, when one value is at fault (``messages[3].content``)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def describe_json_fault(exc: BaseException) -> str:
    """A sentence for what json.loads or jsontext.loads raised (JSONDecodeError, TooDeep,
    NonFiniteNumber, RecursionError or ValueError)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, (RecursionError, jsontext.TooDeep)):
        return "arrays or objects are nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start})"
    if "digits" in str(exc):  # the interpreter's limit on integer length
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


class JsonBodyParser(Parser):
    def parse_body(self, request) -> dict[str, Any]:
        if not request.body.strip():
            # No body is an empty object: a route whose fields all have defaults (a force)
            # works with a bare POST; one that needs fields names them as missing (422).
            return {}
        try:
            return cast(dict[str, Any], jsontext.loads(request.body, max_depth=None))
        except jsontext.NonFiniteNumber as exc:
            raise BodyNotJson(f"request body is not valid JSON: {exc}", field=exc.path or None) from None
        except ValueError as exc:
            raise BodyNotJson(f"request body is not valid JSON: {describe_json_fault(exc)}") from None
