"""Entry points: tell the format of a payload and convert it, whatever the format."""
from __future__ import annotations

from typing import Any

from ..errors import SessionValidationError
from ..messages import JSONObject
from ._base import (
    NO,
    Format,
    FormatName,
    ImportedSession,
    JsonLines,
    Options,
    Sample,
    err,
    too_many,
)
from ._registry import FORMATS, REGISTRY
from ._text import as_text, iter_jsonl, lines, parse_json, try_whole_json

#: How many records of a JSON-lines text detection reads.
_SAMPLE_RECORDS = 20


def _unknown(msg: str, source: str | None) -> SessionValidationError:
    return err("cannot tell the format: " + msg, "unknown_format", source)


def _best(sample: Sample) -> Format | None:
    best, best_score = None, NO
    for spec in REGISTRY.values():  # listing order: the first of equals wins
        score = spec.detect(sample)
        if score > best_score:
            best, best_score = spec, score
    return best


def _detect_parsed(data: Any, source: str | None = None) -> Format:
    spec = _best(Sample(data))
    if spec is not None:
        return spec
    if isinstance(data, dict):
        raise _unknown("an object that is no session, message, span, run or observation "
                       "(no 'messages' or 'role', and no trace export keys)", source)
    raise _unknown(f"a JSON {type(data).__name__} is no session", source)


def _detect_text(text: str, source: str | None = None) -> Format:
    if not text.strip():
        raise err("the input is empty", "empty", source)
    ok, data = try_whole_json(text, source)
    if ok:
        return _detect_parsed(data, source)
    first = next((line for _, line in lines(text) if line.strip()), "")
    if not try_whole_json(first, source)[0]:
        # Not JSON lines either: report the fault of the (multi-line) JSON document.
        parse_json(text, source)
    records = []
    for _, rec in iter_jsonl(text, source):
        records.append(rec)
        if len(records) >= _SAMPLE_RECORDS:
            break
    spec = _best(Sample(records, lines=True))
    if spec is None:
        raise _unknown("JSON lines that are none of: OpenAI messages, Claude Code records, "
                       "or trace export records (spans, runs, observations)", source)
    return spec


def detect_format(data_or_text: Any) -> FormatName:
    """Return the name of the format of a payload (one of ``FORMATS``).

    Text (or bytes) that parses as one JSON document is classified by its shape; text
    that does not is read as JSONL and classified by its first records. An object that
    is both valid OpenAI and valid Anthropic (plain string contents only) is "openai".
    Undecidable input raises SessionValidationError (fault ``unknown_format``).
    """
    if isinstance(data_or_text, (str, bytes)):
        return _detect_text(as_text(data_or_text, None)).name
    return _detect_parsed(data_or_text).name


def _parse_payload(payload: Any, fmt: str | None, source: str | None) -> tuple[Format, Any]:
    """(format, what its converter reads: parsed data, raw text, or JSON lines)."""
    if fmt is not None and fmt not in REGISTRY:
        raise err(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})", "unknown_format", source)
    if not isinstance(payload, (str, bytes)):
        if not isinstance(payload, (dict, list)):
            raise err(f"cannot import a {type(payload).__name__}", "bad_session", source)
        return (REGISTRY[fmt] if fmt is not None else _detect_parsed(payload, source)), payload
    text = as_text(payload, source)
    if fmt is not None and REGISTRY[fmt].reads_text:
        return REGISTRY[fmt], text
    ok, data = try_whole_json(text, source)
    if fmt is not None:
        spec = REGISTRY[fmt]
    else:
        spec = _detect_parsed(data, source) if ok else _detect_text(text, source)
    if spec.reads_text:
        return spec, text
    if ok:
        return spec, data
    if spec.reads_jsonl and text.strip():
        return spec, JsonLines(iter_jsonl(text, source))
    return spec, parse_json(text, source)


def convert_many(payload: str | bytes | JSONObject | list[Any], format: str | None = None,
                 source: str | None = None, *, stream: bool = False,
                 max_messages: int | None = None) -> list[ImportedSession]:
    """Convert a payload that may hold several sessions (an OpenAI list of session objects,
    a trace export of several conversations); ``source`` names the file in errors.
    ``stream``: OpenAI JSONL text gives a ``JsonlMessages`` (parsed when read) instead
    of a list. ``max_messages``: a session holding more messages is refused (fault
    ``too_many_messages``); OpenAI input is refused before its messages are checked, JSONL
    as soon as the line over the limit is reached."""
    spec, data = _parse_payload(payload, format, source)
    sessions = spec.convert(data, source, Options(stream=stream, max_messages=max_messages))
    if max_messages is not None and any(len(s.messages) > max_messages for s in sessions):
        raise too_many(max_messages, source)
    return sessions


def convert(payload: str | bytes | JSONObject | list[Any], format: str | None = None,
            source: str | None = None, *, stream: bool = False, max_messages: int | None = None) -> ImportedSession:
    """Convert one session to OpenAI messages. ``format`` None means :func:`detect_format`.
    A payload holding several sessions is rejected (use :func:`convert_many`);
    ``stream`` and ``max_messages`` as for :func:`convert_many`."""
    sessions = convert_many(payload, format, source, stream=stream, max_messages=max_messages)
    if len(sessions) != 1:
        raise err(f"the payload holds {len(sessions)} sessions; import it with convert_many", "many_sessions",
                  source)
    return sessions[0]


def convert_file(path: str, format: str | None = None) -> list[ImportedSession]:
    """Read and convert a file; errors name the file."""
    with open(path, "rb") as fh:
        data = fh.read()
    return convert_many(data, format, source=str(path))
