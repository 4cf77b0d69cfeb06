"""What every import format shares: the interface a format module fills in (:class:`Format`),
the converted session (:class:`ImportedSession`), errors that name where the fault is, and the
final check of a converted session (:func:`finish`)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import Fault, SessionValidationError
from ..messages import JSONObject, RawMessage, text_of, validate_session, validate_tools

#: A format's name, as given to ``format=`` and stored as a session's ``source_format``.
FormatName = str

TITLE_MAX = 80


@dataclass
class ImportedSession:
    """A converted session: OpenAI messages ready for the engine. ``messages`` is a list,
    or for OpenAI JSONL converted with ``stream=True`` a ``JsonlMessages`` that parses
    each line when it is read."""
    messages: Sequence[RawMessage]
    tools: list[JSONObject] = field(default_factory=list)
    title: str | None = None
    external_id: str | None = None
    model: str | None = None
    format: FormatName = "openai"
    #: What the file said about the session besides its messages: a corpus file's ``id``,
    #: ``source``, ``license`` and ``meta``, OpenAI's ``metadata``, a trace export's ids and
    #: the provider's token usage (kept as given, never sent to a model).
    metadata: JSONObject = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        """The corpus/openai shape (feed it back to ``convert`` to get the same session)."""
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


# -- the interface of a format module ------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """What detection looks at: one parsed JSON document (``lines`` False), or the first
    records of a JSON-lines text (``lines`` True, ``value`` a list of them)."""
    value: Any
    lines: bool = False


@dataclass(frozen=True)
class Options:
    """``stream``: JSONL messages may stay text until read. ``max_messages``: a session
    holding more is refused (fault ``too_many_messages``)."""
    stream: bool = False
    max_messages: int | None = None


#: How sure a format is that a sample is its own: NO, MAYBE (a plain shape other formats may
#: also claim), SURE, DISTINCT (keys no other format has). The highest wins; ties go to the
#: format listed first.
NO, MAYBE, SURE, DISTINCT = 0, 1, 2, 3


@dataclass(frozen=True)
class Format:
    """One import format. A module of this package that defines ``FORMAT = Format(...)`` is
    an import format; nothing else needs to know about it.

    ``detect(sample)`` says how sure the format is (``NO`` .. ``DISTINCT``) and never raises.
    ``convert(data, source, options)`` returns the sessions the data holds; every fault
    raises :class:`SessionValidationError` naming ``source`` and the place in the input.
    ``data`` is the parsed JSON document, or for text that is not one document: the text
    itself when ``reads_text`` (a line-by-line reader), else a :class:`JsonLines` when
    ``reads_jsonl``; otherwise such text is refused as bad JSON.
    """
    name: FormatName
    label: str
    order: int
    detect: Callable[[Sample], int]
    convert: Callable[[Any, str | None, Options], list[ImportedSession]]
    reads_text: bool = False
    reads_jsonl: bool = False


class JsonLines(list[tuple[int, Any]]):
    """The records of a JSON-lines text: (line number, parsed value) for each non-blank line."""


# -- errors --------------------------------------------------------------------------------

def err(msg: str, fault: Fault, source: str | None, *, line: int | None = None,
        index: int | None = None) -> SessionValidationError:
    """A SessionValidationError naming the line (JSONL) or the input message index."""
    text = f"line {line}: {msg}" if line is not None else msg
    exc = SessionValidationError(text, index=index, fault=fault, source=source)
    exc.line = line
    return exc


class Where:
    """Location of the input item being converted (for error messages)."""

    __slots__ = ("source", "line", "index")

    def __init__(self, source: str | None, line: int | None = None, index: int | None = None) -> None:
        self.source = source
        self.line = line
        self.index = index

    def fail(self, msg: str, fault: Fault) -> SessionValidationError:
        return err(msg, fault, self.source, line=self.line, index=self.index)

    def label(self) -> str:
        if self.line is not None:
            return f"line {self.line}"
        if self.index is not None:
            return f"input message {self.index}"
        return "input"


def too_many(limit: int, source: str | None) -> SessionValidationError:
    return err(f"the session holds more than {limit:,} messages, the most one import may hold",
               "too_many_messages", source)


# -- the converted session -------------------------------------------------------------------

def first_user_title(messages: Sequence[RawMessage]) -> str | None:
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


def finish(messages: list[RawMessage], origins: list[str] | None, tools: list[JSONObject], *, title: Any,
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
        title=str(title) if title not in (None, "") else first_user_title(messages),
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
