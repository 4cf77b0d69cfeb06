"""Import formats: turn exported agent sessions into OpenAI chat messages.

Four input formats are understood:

``openai``
    One session object ``{"id"?, "messages", "tools"?, "title"?, "model"?}`` (the corpus
    format; ``meta.model`` is read when ``model`` is absent), a bare list of messages, or a
    list of session objects (use :func:`convert_many` for the latter).
``openai_jsonl``
    One OpenAI message per line; blank lines are ignored.
``anthropic``
    Anthropic Messages requests ``{"system"?, "messages", "tools"?, "model"?}`` (or a bare
    list of Anthropic messages):

    - ``text`` blocks become text; ``image`` blocks (base64 or url source) become
      ``image_url`` parts (base64 as a ``data:`` URL); ``document`` blocks become ``file``
      parts (base64 PDF) or text (text source);
    - ``tool_use`` blocks become assistant ``tool_calls`` (``arguments = json.dumps(input)``);
    - ``tool_result`` blocks of a user message become separate ``tool`` messages placed
      *before* the rest of that user message (OpenAI needs results right after the call);
      ``is_error: true`` results are prefixed with ``[tool error]``;
    - ``thinking`` and ``redacted_thinking`` blocks are **dropped**: they are the model's
      private reasoning, providers do not accept them back in another format, and their
      signatures are only valid for Anthropic;
    - server-side tool blocks (``server_tool_use``, ``web_search_tool_result`` and other
      ``*_tool_result`` blocks that the API executed itself) are kept as text in the
      assistant message, since no client tool call exists to pair them with;
    - tools ``{"name", "description", "input_schema"}`` become OpenAI function schemas;
      server tools (a ``type`` and no ``input_schema``) are skipped.
``claude_code_jsonl``
    Claude Code session files (``~/.claude/projects/*/*.jsonl``). Kept: ``user`` and
    ``assistant`` records of the main chain. Skipped: records with ``isSidechain: true``
    (sub-agent transcripts), ``isMeta: true`` (harness caveats injected as user turns),
    and every record whose ``type`` is not ``user``/``assistant`` (``summary``,
    ``system``, ``file-history-snapshot``, ``progress``, ...). Abandoned branches (after a
    rewind) are skipped when the ``parentUuid`` chain from the last record can be followed
    to its root; otherwise file order is used. Consecutive assistant records with the same
    ``message.id`` (Claude Code writes one content block per line) are merged into one
    assistant message, also when the tool results of the earlier blocks came in between.
    Blocks are converted as for ``anthropic``. ``sessionId`` becomes ``external_id``.

Every result gets ``title`` (explicit title, else the first line of the first user text,
at most 80 characters), ``external_id`` and ``model`` when the input has them, and is
finally checked with :func:`compaction.messages.validate_session`.

Every fault raises :class:`compaction.errors.SessionValidationError` whose text names the
source file (``source=``), the line (JSONL: ``err.line``) or the input message index
(``err.index``), and the fault (``err.fault``).
"""
from __future__ import annotations

import json
import re
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard, get_args, overload

from . import jsontext
from .errors import Fault, SessionValidationError
from .messages import (
    CallTracker,
    JSONObject,
    RawMessage,
    text_of,
    validate_message,
    validate_session,
    validate_tools,
)

FormatName = Literal["openai", "openai_jsonl", "anthropic", "claude_code_jsonl"]
FORMATS: tuple[FormatName, ...] = get_args(FormatName)

TITLE_MAX = 80
_ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "image", "thinking", "redacted_thinking",
                                    "document", "server_tool_use"})
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_CC_MESSAGE_TYPES = frozenset({"user", "assistant"})
_CC_RECORD_HINTS = ("sessionId", "uuid", "parentUuid", "isSidechain")


@dataclass
class ImportedSession:
    """A converted session: OpenAI messages ready for the engine. ``messages`` is a list,
    or for OpenAI JSONL converted with ``stream=True`` a :class:`JsonlMessages` that parses
    each line when it is read."""
    messages: Sequence[RawMessage]
    tools: list[JSONObject] = field(default_factory=list)
    title: str | None = None
    external_id: str | None = None
    model: str | None = None
    format: FormatName = "openai"
    #: What the file said about the session besides its messages: a corpus file's ``id``,
    #: ``source``, ``license`` and ``meta``, OpenAI's ``metadata`` (kept as given, never sent
    #: to a model).
    metadata: JSONObject = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        """The corpus/openai shape (feed it back to :func:`convert` to get the same session)."""
        out: JSONObject = {"messages": list(self.messages)}
        if self.external_id is not None:
            out["id"] = self.external_id
        if self.tools:
            out["tools"] = self.tools
        if self.title is not None:
            out["title"] = self.title
        if self.model is not None:
            out["model"] = self.model
        for key, value in self.metadata.items():
            if key != "id":
                out.setdefault(key, value)
        return out


# -- errors --------------------------------------------------------------------------

def _is_format(name: object) -> TypeGuard[FormatName]:
    return name in FORMATS


def _err(msg: str, fault: Fault, source: str | None, *, line: int | None = None,
         index: int | None = None) -> SessionValidationError:
    """A SessionValidationError naming the line (JSONL) or the input message index."""
    text = f"line {line}: {msg}" if line is not None else msg
    exc = SessionValidationError(text, index=index, fault=fault, source=source)
    exc.line = line
    return exc


class _Where:
    """Location of the input item being converted (for error messages)."""

    __slots__ = ("source", "line", "index")

    def __init__(self, source: str | None, line: int | None = None, index: int | None = None) -> None:
        self.source = source
        self.line = line
        self.index = index

    def fail(self, msg: str, fault: Fault) -> SessionValidationError:
        return _err(msg, fault, self.source, line=self.line, index=self.index)

    def label(self) -> str:
        if self.line is not None:
            return f"line {self.line}"
        if self.index is not None:
            return f"input message {self.index}"
        return "input"


# -- decoding -------------------------------------------------------------------------

def _as_text(payload: str | bytes, source: str | None) -> str:
    if isinstance(payload, bytes):
        try:
            return payload.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _err(f"not UTF-8 text (byte {exc.start})", "bad_encoding", source) from None
    return payload[1:] if payload.startswith("\ufeff") else payload


def _loads(text: str, source: str | None, line: int | None = None) -> Any:
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
        raise _err("bad JSON: arrays or objects are nested too deeply", "bad_json", source, line=line) from None
    except jsontext.NonFiniteNumber as exc:
        err = _err(f"bad JSON: {exc}", "bad_json", source, line=line)
        err.field = exc.path or None
        raise err from None
    except ValueError as exc:
        # The integer digit limit is the one other ValueError the parser raises.
        why = (f"a number has more than {sys.get_int_max_str_digits()} digits" if "digits" in str(exc)
               else str(exc))
        raise _err(f"bad JSON: {why}", "bad_json", source, line=line) from None


def _parse_json(text: str, source: str | None) -> Any:
    try:
        return _loads(text, source)
    except json.JSONDecodeError as exc:
        raise _err(f"bad JSON: {exc.msg} (column {exc.colno})", "bad_json", source, line=exc.lineno) from None


# The line boundaries of str.splitlines(), so that line numbers stay what they always were.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _line_spans(text: str) -> Iterator[tuple[int, int, int]]:
    """(line number, start, end) of each line, as ``text.splitlines()`` cuts them, without
    making the list of every line at once (a 300,000-line import is read line by line)."""
    start = n = 0
    for n, brk in enumerate(_LINE_BREAK.finditer(text), start=1):
        yield n, start, brk.start()
        start = brk.end()
    if start < len(text):
        yield n + 1, start, len(text)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for n, start, end in _line_spans(text):
        yield n, text[start:end]


def _iter_jsonl(text: str, source: str | None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line."""
    for n, line in _lines(text):
        if not line.strip():
            continue
        try:
            yield n, _loads(line, source, n)
        except json.JSONDecodeError as exc:
            raise _err(f"bad JSON: {exc.msg} (column {exc.colno})", "bad_json", source, line=n) from None


def _try_whole_json(text: str, source: str | None) -> tuple[bool, Any]:
    """(True, value) when the text is one JSON document, (False, None) when it is not JSON;
    input the parser refuses outright (too deep, too many digits) raises."""
    try:
        return True, _loads(text, source)
    except json.JSONDecodeError:
        return False, None


# -- detection ------------------------------------------------------------------------

def _is_cc_record(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("type"), str) and "role" not in obj and (
        "message" in obj or any(k in obj for k in _CC_RECORD_HINTS))


def _has_anthropic_blocks(messages: Any) -> bool:
    if not isinstance(messages, list):
        return False
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") in _ANTHROPIC_ONLY_BLOCKS:
                    return True
    return False


def _unknown(msg: str, source: str | None) -> SessionValidationError:
    return _err("cannot tell the format: " + msg, "unknown_format", source)


def _detect_parsed(data: Any, source: str | None = None) -> FormatName:
    if isinstance(data, dict):
        if _is_cc_record(data):
            return "claude_code_jsonl"
        if "role" in data:
            return "openai_jsonl"
        if "messages" in data:
            tools = data.get("tools") or []
            if ("system" in data or _has_anthropic_blocks(data.get("messages"))
                    or any(isinstance(t, dict) and "input_schema" in t for t in tools)):
                return "anthropic"
            return "openai"
        raise _unknown("an object without 'messages' or 'role'", source)
    if isinstance(data, list):
        items = [x for x in data if isinstance(x, dict)]
        if not items:
            return "openai"  # an empty session
        if all("messages" in x for x in items):
            return "openai"
        if any(_is_cc_record(x) for x in items[:20]):
            return "claude_code_jsonl"
        return "anthropic" if _has_anthropic_blocks(items) else "openai"
    raise _unknown(f"a JSON {type(data).__name__} is no session", source)


def _detect_text(text: str, source: str | None = None) -> FormatName:
    if not text.strip():
        raise _err("the input is empty", "empty", source)
    ok, data = _try_whole_json(text, source)
    if ok:
        return _detect_parsed(data, source)
    first = next((line for _, line in _lines(text) if line.strip()), "")
    if not _try_whole_json(first, source)[0]:
        # Not JSON lines either: report the fault of the (multi-line) JSON document.
        _parse_json(text, source)
    records = []
    for _, rec in _iter_jsonl(text, source):
        records.append(rec)
        if len(records) >= 20:
            break
    if any(_is_cc_record(r) for r in records):
        return "claude_code_jsonl"
    if records and all(isinstance(r, dict) and "role" in r for r in records):
        return "openai_jsonl"
    raise _unknown("JSON lines that are neither OpenAI messages nor Claude Code records", source)


def detect_format(data_or_text: Any) -> FormatName:
    """Return "openai", "openai_jsonl", "anthropic" or "claude_code_jsonl".

    Text (or bytes) that parses as one JSON document is classified by its shape; text
    that does not is read as JSONL and classified by its first records. An object that
    is both valid OpenAI and valid Anthropic (plain string contents only) is "openai".
    Undecidable input raises SessionValidationError (fault ``unknown_format``).
    """
    if isinstance(data_or_text, (str, bytes)):
        return _detect_text(_as_text(data_or_text, None))
    return _detect_parsed(data_or_text)


# -- shared helpers ---------------------------------------------------------------------

def _first_user_title(messages: list[RawMessage]) -> str | None:
    """First line of the first user text, skipping harness wrapper lines such as
    ``<ide_opened_file>...</ide_opened_file>`` or ``<command-name>...``."""
    for m in messages:
        if m.get("role") != "user":
            continue
        for line in text_of(m.get("content")).splitlines():
            line = line.strip()
            if not line or (line.startswith("<") and line.endswith(">")):
                continue
            return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1].rstrip() + "\u2026"
    return None


def _finish(messages: list[RawMessage], origins: list[str] | None, tools: list[JSONObject], *, title: Any,
            external_id: Any, model: Any, fmt: FormatName, source: str | None) -> ImportedSession:
    """Validate the converted session; faults name the input location they came from.
    ``origins[i]`` says where converted message i came from (None: same index as input)."""
    if origins is None:
        validate_session(messages, source)
    else:
        try:
            validate_session(messages)
        except SessionValidationError as exc:
            i = exc.index
            msg = str(exc)
            if msg.startswith(f"message {i}: "):
                msg = msg[len(f"message {i}: "):]
            origin = origins[i] if i is not None and i < len(origins) else None
            where = f"converted message {i}" + (f" (from {origin})" if origin else "")
            line = int(origin[5:]) if origin and origin.startswith("line ") else None
            # err.index is the position in the input, like every other import error
            index = int(origin[14:]) if origin and origin.startswith("input message ") else i
            new = SessionValidationError(f"{where}: {msg}", index=index, fault=exc.fault, source=source)
            new.line = line
            raise new from None
    tools = validate_tools(tools, source)
    return ImportedSession(
        messages=messages,
        tools=tools,
        title=str(title) if title not in (None, "") else _first_user_title(messages),
        external_id=str(external_id) if external_id not in (None, "") else None,
        model=model_name(model),
        format=fmt,
    )


#: Keys of an OpenAI session object kept as the session's metadata (corpus files carry the
#: first four; ``metadata`` is OpenAI's own request field).
METADATA_KEYS = ("id", "source", "license", "meta", "metadata")


def session_metadata(obj: Any) -> JSONObject:
    """The metadata keys an OpenAI session object carries, as given."""
    if not isinstance(obj, dict):
        return {}
    return {k: obj[k] for k in METADATA_KEYS if obj.get(k) is not None}


def model_name(model: Any) -> str | None:
    """A model name from metadata: a string, or the first of a list (sessions that switched
    models record all of them)."""
    if isinstance(model, (list, tuple)):
        model = next((m for m in model if isinstance(m, str) and m), None)
    return str(model) if model not in (None, "") else None


# -- openai -----------------------------------------------------------------------------

def _openai_session(data: Any, source: str | None, max_messages: int | None = None) -> ImportedSession:
    if isinstance(data, list):
        messages, meta = data, {}
    elif isinstance(data, dict) and isinstance(data.get("messages"), list):
        messages, meta = data["messages"], data
    else:
        raise _err("expected a list of messages or an object with a 'messages' list", "bad_session", source)
    if max_messages is not None and len(messages) > max_messages:
        raise _too_many(max_messages, source)
    model = meta.get("model")
    if model is None and isinstance(meta.get("meta"), dict):
        model = meta["meta"].get("model")
    imported = _finish(list(messages), None, meta.get("tools") or [], title=meta.get("title"),
                       external_id=meta.get("id", meta.get("external_id")), model=model, fmt="openai",
                       source=source)
    imported.metadata = session_metadata(meta)
    return imported


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
    for n, start, end in _line_spans(text):
        line = text[start:end]
        if not line.strip():
            continue
        if max_messages is not None and count >= max_messages:
            raise _too_many(max_messages, source)
        try:
            rec = _loads(line, source, n)
        except json.JSONDecodeError as exc:
            raise _err(f"bad JSON: {exc.msg} (column {exc.colno})", "bad_json", source, line=n) from None
        if not isinstance(rec, dict):
            raise _err(f"expected a message object, got {type(rec).__name__}", "not_an_object", source, line=n)
        try:
            validate_message(rec, count)
        except SessionValidationError as exc:
            msg = str(exc).split(": ", 1)[-1]
            raise _err(msg, exc.fault, source, line=n) from None
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
            title = _first_user_title([rec])
        if stream:
            spans.append(start)
            spans.append(end)
        else:
            messages.append(rec)
        count += 1
    if not count:
        raise _err("the input holds no JSON lines", "empty", source)
    if pairing is not None:
        raise pairing
    return ImportedSession(messages=JsonlMessages(text, spans) if stream else messages, tools=[], title=title,
                           external_id=None, model=None, format="openai_jsonl")


# -- anthropic blocks ----------------------------------------------------------------------

def _image_part(block: JSONObject, where: _Where) -> JSONObject:
    src = block.get("source")
    if not isinstance(src, dict):
        raise where.fail("image block without a source", "bad_image")
    kind = src.get("type")
    if kind == "base64":
        data, media = src.get("data"), src.get("media_type") or "image/png"
        if not isinstance(data, str):
            raise where.fail("base64 image without data", "bad_image")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url" and isinstance(src.get("url"), str):
        return {"type": "image_url", "image_url": {"url": src["url"]}}
    raise where.fail(f"image source type {kind!r} cannot be converted (expected base64 or url)", "bad_image")


def _document_part(block: JSONObject, where: _Where) -> JSONObject:
    src = block.get("source") or {}
    kind = src.get("type")
    if kind == "base64" and isinstance(src.get("data"), str):
        part: JSONObject = {"type": "file", "file": {"file_data": f"data:{src.get('media_type') or 'application/pdf'};"
                                                         f"base64,{src['data']}"}}
        if block.get("title"):
            part["file"]["filename"] = str(block["title"])
        return part
    if kind == "text" and isinstance(src.get("data"), str):
        return {"type": "text", "text": src["data"]}
    if kind == "url" and isinstance(src.get("url"), str):
        return {"type": "text", "text": f"[document: {src['url']}]"}
    raise where.fail(f"document source type {kind!r} cannot be converted", "bad_document")


def _server_block_text(block: JSONObject) -> str:
    kind = block.get("type")
    if kind == "server_tool_use":
        return f"[server tool {block.get('name')} {json.dumps(block.get('input'), ensure_ascii=False)}]"
    return f"[{kind} {json.dumps(block.get('content'), ensure_ascii=False)}]"


def _is_server_block(kind: Any) -> bool:
    """Blocks the API produced and executed itself (web search, code execution, MCP...)."""
    if not isinstance(kind, str):
        return False
    return kind in ("server_tool_use", "mcp_tool_use") or (kind.endswith("_tool_result") and kind != "tool_result")


def _tool_result_content(block: JSONObject, where: _Where) -> str | list[JSONObject]:
    content = block.get("content")
    prefix = "[tool error] " if block.get("is_error") else ""
    if content is None:
        return prefix.strip()
    if isinstance(content, str):
        return prefix + content
    if not isinstance(content, list):
        raise where.fail(f"tool_result content must be a string or blocks, got {type(content).__name__}",
                         "bad_tool_result")
    parts: list[JSONObject] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": b.get("text") or ""})
        elif kind == "image":
            parts.append(_image_part(b, where))
        elif kind == "document":
            parts.append(_document_part(b, where))
        else:
            raise where.fail(f"unsupported block type {kind!r} inside a tool_result", "bad_block")
    if all(p["type"] == "text" for p in parts):
        return prefix + "\n".join(p["text"] for p in parts)
    if prefix:
        parts.insert(0, {"type": "text", "text": prefix.strip()})
    return parts


def _content_value(parts: list[JSONObject]) -> str | list[JSONObject]:
    """A single text part becomes a plain string; anything else stays a part list."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


class _Converter:
    """Turns Anthropic-style role/content-block messages into OpenAI messages."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.messages: list[RawMessage] = []
        self.origins: list[str] = []
        self.open_calls: dict[str, int] = {}   # tool_use id -> index of its assistant message
        self.seen_calls: set[str] = set()
        self.last_assistant: RawMessage | None = None
        self.last_assistant_key: Any = None

    def _emit(self, msg: RawMessage, where: _Where) -> None:
        self.messages.append(msg)
        self.origins.append(where.label())

    def system(self, system: Any, where: _Where) -> None:
        if isinstance(system, str):
            text = system
        elif isinstance(system, list):
            texts = []
            for b in system:
                if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
                    raise where.fail("system blocks must be text blocks", "bad_system")
                texts.append(b["text"])
            text = "\n\n".join(texts)
        else:
            raise where.fail(f"system must be a string or text blocks, got {type(system).__name__}", "bad_system")
        if text:
            self._emit({"role": "system", "content": text}, where)

    def message(self, role: Any, content: Any, where: _Where, merge_key: Any = None) -> None:
        if role == "assistant":
            self.assistant(content, where, merge_key)
        elif role == "user":
            self.user(content, where)
        else:
            raise where.fail(f"unknown role {role!r} (expected user or assistant)", "unknown_role")

    def user(self, content: Any, where: _Where) -> None:
        if isinstance(content, str):
            self._emit({"role": "user", "content": content}, where)
            self.last_assistant = None
            return
        if not isinstance(content, list):
            raise where.fail(f"content must be a string or a list of blocks, got {type(content).__name__}",
                             "bad_content")
        parts: list[JSONObject] = []
        for k, b in enumerate(content):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_result":
                cid = b.get("tool_use_id")
                if not isinstance(cid, str) or not cid:
                    raise where.fail(f"block {k}: tool_result without tool_use_id", "missing_tool_call_id")
                if cid not in self.open_calls:
                    why = "was already answered" if cid in self.seen_calls else "matches no earlier tool_use"
                    raise where.fail(f"block {k}: tool_result for {cid!r} {why}", "orphan_tool_result")
                del self.open_calls[cid]
                self._emit({"role": "tool", "tool_call_id": cid, "content": _tool_result_content(b, where)}, where)
            elif kind == "text":
                if not isinstance(b.get("text"), str):
                    raise where.fail(f"block {k}: text block without text", "bad_block")
                parts.append({"type": "text", "text": b["text"]})
            elif kind == "image":
                parts.append(_image_part(b, where))
            elif kind == "document":
                parts.append(_document_part(b, where))
            elif kind in _DROPPED_BLOCKS:
                continue
            else:
                raise where.fail(f"block {k}: unsupported block type {kind!r} in a user message", "bad_block")
        if parts:
            self._emit({"role": "user", "content": _content_value(parts)}, where)
            self.last_assistant = None
        elif not content:
            self._emit({"role": "user", "content": ""}, where)
            self.last_assistant = None

    def assistant(self, content: Any, where: _Where, merge_key: Any = None) -> None:
        texts: list[str] = []
        calls: list[JSONObject] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for k, b in enumerate(content):
                kind = b.get("type") if isinstance(b, dict) else None
                if kind == "text":
                    if not isinstance(b.get("text"), str):
                        raise where.fail(f"block {k}: text block without text", "bad_block")
                    texts.append(b["text"])
                elif kind == "tool_use":
                    calls.append(self._tool_use(b, k, where))
                elif kind in _DROPPED_BLOCKS:
                    continue
                elif _is_server_block(kind):
                    texts.append(_server_block_text(b))
                else:
                    raise where.fail(f"block {k}: unsupported block type {kind!r} in an assistant message",
                                     "bad_block")
        else:
            raise where.fail(f"content must be a string or a list of blocks, got {type(content).__name__}",
                             "bad_content")
        target = self.last_assistant
        if merge_key is not None and target is not None and merge_key == self.last_assistant_key \
                and self._only_results_since(target):
            # A Claude Code continuation line of the same API message.
            if texts:
                joined = "\n\n".join(texts)
                target["content"] = joined if not target.get("content") else target["content"] + "\n\n" + joined
            if calls:
                target.setdefault("tool_calls", []).extend(calls)
            owner = self._index_of(target)
            for c in calls:
                self.open_calls[c["id"]] = owner
            return
        if self.open_calls:
            cid = next(iter(self.open_calls))
            raise where.fail(f"tool_use {cid!r} has no tool_result before this assistant message",
                             "unanswered_tool_call")
        msg: RawMessage = {"role": "assistant", "content": "\n\n".join(texts) if texts else (None if calls else "")}
        if calls:
            msg["tool_calls"] = calls
        self._emit(msg, where)
        for c in calls:
            self.open_calls[c["id"]] = len(self.messages) - 1
        self.last_assistant = msg
        self.last_assistant_key = merge_key

    def _tool_use(self, b: JSONObject, k: int, where: _Where) -> JSONObject:
        cid, name, args = b.get("id"), b.get("name"), b.get("input", {})
        if not isinstance(cid, str) or not cid:
            raise where.fail(f"block {k}: tool_use without id", "missing_call_id")
        if not isinstance(name, str) or not name:
            raise where.fail(f"block {k}: tool_use without name", "bad_tool_call")
        if cid in self.seen_calls:
            raise where.fail(f"block {k}: duplicate tool_use id {cid!r}", "duplicate_call_id")
        self.seen_calls.add(cid)
        return {"id": cid, "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}

    def _index_of(self, target: RawMessage) -> int:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i] is target:
                return i
        raise AssertionError("assistant message vanished")  # pragma: no cover

    def _only_results_since(self, target: RawMessage) -> bool:
        for m in reversed(self.messages):
            if m is target:
                return True
            if m.get("role") != "tool":
                return False
        return False


def _anthropic_tools(tools: Any, source: str | None) -> list[JSONObject]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _err("tools must be a list", "bad_tools", source)
    out = []
    for t, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _err(f"tools[{t}] must be an object", "bad_tools", source)
        if "input_schema" not in tool and tool.get("type") not in (None, "custom"):
            continue  # a server tool (web_search_..., bash_..., text_editor_...): nothing to call
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise _err(f"tools[{t}] has no name", "bad_tools", source)
        schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        if not isinstance(schema, dict):
            raise _err(f"tools[{t}].input_schema must be an object", "bad_tools", source)
        fn: JSONObject = {"name": name}
        if tool.get("description"):
            fn["description"] = tool["description"]
        fn["parameters"] = schema
        out.append({"type": "function", "function": fn})
    return out


def _anthropic(data: Any, source: str | None) -> ImportedSession:
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise _err("expected an object with a 'messages' list (Anthropic Messages format)", "bad_session", source)
    conv = _Converter(source)
    if data.get("system") is not None:
        conv.system(data["system"], _Where(source))
    for j, m in enumerate(data["messages"]):
        where = _Where(source, index=j)
        if not isinstance(m, dict):
            raise where.fail(f"expected a message object, got {type(m).__name__}", "not_an_object")
        conv.message(m.get("role"), m.get("content"), where)
    return _finish(conv.messages, conv.origins, _anthropic_tools(data.get("tools"), source),
                   title=data.get("title"), external_id=data.get("id"), model=data.get("model"),
                   fmt="anthropic", source=source)


# -- claude code ---------------------------------------------------------------------------

def _main_chain(records: list[tuple[int, JSONObject]]) -> set[str] | None:
    """uuids on the path from the last main-chain record to the root, or None when the
    parentUuid links cannot be followed (then file order is used)."""
    by_uuid = {r["uuid"]: r for _, r in records if isinstance(r.get("uuid"), str)}
    leaf = None
    for _, r in reversed(records):
        if r.get("type") in _CC_MESSAGE_TYPES and not r.get("isSidechain") and isinstance(r.get("uuid"), str):
            leaf = r
            break
    if leaf is None:
        return None
    chain: set[str] = set()
    node: JSONObject | None = leaf
    while node is not None:
        uid = node["uuid"]
        if uid in chain:
            return None  # a cycle: do not trust the links
        chain.add(uid)
        parent = node.get("parentUuid") or node.get("logicalParentUuid")
        if parent is None:
            return chain
        node = by_uuid.get(parent)
    return None  # a dangling link


def _claude_code(text_or_records: Any, source: str | None) -> ImportedSession:
    if isinstance(text_or_records, str):
        records = list(_iter_jsonl(text_or_records, source))
    else:  # an already parsed list of records (line numbers are positions + 1)
        records = list(enumerate(text_or_records, start=1))
    for n, rec in records:
        if not isinstance(rec, dict):
            raise _err(f"expected a JSON object, got {type(rec).__name__}", "not_an_object", source, line=n)
    chain = _main_chain(records)
    # Off-chain records are skipped only when some message record is off the chain (a rewind).
    main_chain = chain if chain is not None and any(
        r.get("type") in _CC_MESSAGE_TYPES and not r.get("isSidechain") and r.get("uuid") not in chain
        for _, r in records) else None
    conv = _Converter(source)
    session_id = model = None
    for n, rec in records:
        kind = rec.get("type")
        if session_id is None and isinstance(rec.get("sessionId"), str):
            session_id = rec["sessionId"]
        if kind not in _CC_MESSAGE_TYPES or rec.get("isSidechain") or rec.get("isMeta"):
            continue
        if main_chain is not None and rec.get("uuid") not in main_chain:
            continue
        where = _Where(source, line=n)
        msg = rec.get("message")
        if not isinstance(msg, dict):
            raise where.fail(f"{kind} record without a message object", "bad_record")
        role = msg.get("role", kind)
        if role != kind:
            raise where.fail(f"unknown role {role!r} in a {kind!r} record", "unknown_role")
        merge_key = None
        if kind == "assistant":
            merge_key = msg.get("id") or None
            if model is None and isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
                model = msg["model"]
        conv.message(role, msg.get("content"), where, merge_key=merge_key)
    if not conv.messages:
        raise _err("no user or assistant records in this Claude Code file", "empty", source)
    return _finish(conv.messages, conv.origins, [], title=None, external_id=session_id, model=model,
                   fmt="claude_code_jsonl", source=source)


# -- entry points ----------------------------------------------------------------------------

def _parse_payload(payload: Any, fmt: str | None, source: str | None) -> tuple[FormatName, Any]:
    """(format, parsed data or raw text for JSONL formats)."""
    if fmt is not None and not _is_format(fmt):
        raise _err(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})", "unknown_format", source)
    if not isinstance(payload, (str, bytes)):
        if not isinstance(payload, (dict, list)):
            raise _err(f"cannot import a {type(payload).__name__}", "bad_session", source)
        return fmt or _detect_parsed(payload, source), payload
    text = _as_text(payload, source)
    if fmt in ("openai_jsonl", "claude_code_jsonl"):
        return fmt, text
    ok, data = _try_whole_json(text, source)
    if fmt is None:
        fmt = _detect_parsed(data, source) if ok else _detect_text(text, source)
    if fmt in ("openai_jsonl", "claude_code_jsonl"):
        return fmt, text
    if not ok:
        data = _parse_json(text, source)
    return fmt, data


def _too_many(limit: int, source: str | None) -> SessionValidationError:
    return _err(f"the session holds more than {limit:,} messages, the most one import may hold",
                "too_many_messages", source)


def _convert_parsed(fmt: FormatName, data: Any, source: str | None, stream: bool = False,
                    max_messages: int | None = None) -> list[ImportedSession]:
    if fmt == "openai":
        if isinstance(data, list) and data and all(isinstance(x, dict) and "messages" in x for x in data):
            out = []
            for s, item in enumerate(data):
                sub = f"{source}[{s}]" if source else f"session {s}"
                out.append(_openai_session(item, sub, max_messages))
            return out
        return [_openai_session(data, source, max_messages)]
    if fmt == "openai_jsonl":
        if isinstance(data, (dict, list)):
            data = "\n".join(json.dumps(x) for x in (data if isinstance(data, list) else [data]))
        return [_openai_jsonl(data, source, stream, max_messages)]
    if fmt == "anthropic":
        converted = _anthropic(data, source)
    else:
        converted = _claude_code([data] if isinstance(data, dict) else data, source)
    if max_messages is not None and len(converted.messages) > max_messages:
        raise _too_many(max_messages, source)
    return [converted]


def convert_many(payload: str | bytes | JSONObject | list[Any], format: str | None = None,
                 source: str | None = None, *, stream: bool = False,
                 max_messages: int | None = None) -> list[ImportedSession]:
    """Convert a payload that may hold several sessions (an OpenAI list of session objects);
    every other input gives a one-element list. ``source`` names the file in errors.
    ``stream``: OpenAI JSONL text gives a :class:`JsonlMessages` (parsed when read) instead
    of a list. ``max_messages``: a session holding more messages is refused (fault
    ``too_many_messages``); OpenAI input is refused before its messages are checked, JSONL
    as soon as the line over the limit is reached."""
    fmt, data = _parse_payload(payload, format, source)
    return _convert_parsed(fmt, data, source, stream, max_messages)


def convert(payload: str | bytes | JSONObject | list[Any], format: str | None = None,
            source: str | None = None, *, stream: bool = False, max_messages: int | None = None) -> ImportedSession:
    """Convert one session to OpenAI messages. ``format`` None means :func:`detect_format`.
    A payload holding several sessions is rejected (use :func:`convert_many`);
    ``stream`` and ``max_messages`` as for :func:`convert_many`."""
    sessions = convert_many(payload, format, source, stream=stream, max_messages=max_messages)
    if len(sessions) != 1:
        raise _err(f"the payload holds {len(sessions)} sessions; import it with convert_many", "many_sessions",
                   source)
    return sessions[0]


def convert_file(path: str, format: str | None = None) -> list[ImportedSession]:
    """Read and convert a file; errors name the file."""
    with open(path, "rb") as fh:
        data = fh.read()
    return convert_many(data, format, source=str(path))
