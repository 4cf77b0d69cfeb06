"""Retention score: how many identifiers of an evicted span survive in the new context.

Identifiers are the concrete handles an agent needs to continue work after a summary:

``path``, ``url`` file paths and URLs, as :mod:`compaction.identifiers` defines them (the
                  extractive summary's "Files and paths" section reads them the same way)
``uuid``          ``8-4-4-4-12`` hex UUIDs
``hex_id``        hex runs of 7+ characters holding both a digit and a letter (git shas, hashes)
``number_unit``   a number with a unit or counted noun: ``200 ms``, ``3.5GB``, ``95%``, ``404 errors``,
                  ``$20``; stored as ``"<number> <unit>"`` (``"95%"``, ``"$20"`` for symbols) and found
                  with or without the space
``error``         error class names ``\\w+(Error|Exception|Warning)``
``code``          code identifiers of 4+ characters with an ``_``, a ``.`` or an inner capital:
                  ``load_settings``, ``camelCase``, ``HTTPServer``, ``os.path.join``
``quoted``        quoted strings in *user* messages (``"..."``, ``'...'``, `````...`````, ``“...”``,
                  ``「...」``), 3-80 characters

Within a whitespace-separated token, each stretch of text is claimed by the first kind
that matches it, in the order url, path, uuid, error, hex_id, code (a URL is not also a
path, a UUID inside a path stays part of the path, ``src/models.py`` is not also the code
identifier ``models.py``). Numbers with units and quoted strings may span a space and
are read from the running text independently. Long base64 runs (embedded files) are
ignored. ASCII word boundaries are used, so identifiers glued to CJK text (``修改config_file文件``) are still found.

*Referenced* identifiers are those the user or the agent wrote: user and assistant text
and tool-call arguments (JSON string values). *All* identifiers add tool results (and
system text). An identifier is *kept* when it occurs, case-insensitively, anywhere in the
new context's text (message contents, tool-call names and arguments).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from . import jsontext
from .identifiers import PATH_RE, URL_RE, clean_path, clean_url
from .messages import iter_text

Kind = Literal["path", "url", "uuid", "hex_id", "number_unit", "error", "code", "quoted"]
KINDS: tuple[Kind, ...] = ("path", "url", "uuid", "hex_id", "number_unit", "error", "code", "quoted")
Origin = Literal["user", "assistant", "arguments", "tool", "system"]
Found = dict[Kind, set[str]]   # identifiers found so far, per kind
MISSING_LIMIT = 50
MAX_IDENTIFIER_LEN = 300

_A = re.ASCII

# Embedded files (images, archives) in text: never identifiers, and slow to scan.
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]{200,}={0,2}")

_UUID_RE = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", _A)

_HEX_RE = re.compile(r"\b(?:0x)?(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}\b", _A)

_UNITS = frozenset((
    "ns us µs μs ms s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks "
    "month months year years b byte bytes kb mb gb tb pb kib mib gib tib k bit bits kbps mbps gbps "
    "hz khz mhz ghz rpm qps rps tps fps px pt em rem dpi ppi cm mm km kg mg ml "
    "token tokens char chars character characters word words line lines file files test tests error errors "
    "failure failures warning warnings request requests retry retries attempt attempts message messages "
    "row rows record records item items user users call calls step steps iteration iterations epoch epochs "
    "core cores thread threads worker workers node nodes page pages commit commits issue issues "
    "passed failed skipped usd eur gbp x"
).split())
# A number, then a word (kept when it is a unit, see _UNITS), a glued %/x, or a $ amount.
_NUMBER_UNIT_RE = re.compile(
    r"(\d)(?<![A-Za-z0-9_.,$/\\-]\d)(\d*(?:,\d{3})*(?:\.\d+)?)"
    r"(?: ?([A-Za-z\u00b5\u03bc]+)|(%|\u00d7))(?![A-Za-z0-9_])"
    r"|\$ ?(\d+(?:,\d{3})*(?:\.\d+)?)(?![A-Za-z0-9_])"
)

_ERROR_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*?(?:Error|Exception|Warning)\b", _A)

_CODE_RE = re.compile(
    r"(?<![A-Za-z0-9_.])(?:"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"                  # dotted.names
    r"|(?=[A-Za-z0-9_]*(?:_|[a-z][A-Z]|[A-Z][A-Z][a-z]))[A-Za-z_][A-Za-z0-9_]*"  # snake_case, camelCase
    r")(?![A-Za-z0-9_])",
    _A,
)
_PLURAL_ACRONYM = re.compile(r"[A-Z]+s", _A)

_QUOTED_RE = re.compile(
    r'"([^"\n]{3,80})"'
    r"|(?<![A-Za-z0-9])'([^'\n]{3,80})'(?![A-Za-z0-9])"
    r"|`([^`\n]{3,80})`"
    r"|\u201c([^\u201d\n]{3,80})\u201d"
    r"|\u300c([^\u300d\n]{3,80})\u300d"
)
_HAS_ALNUM = re.compile(r"\w")



@dataclass
class Identifiers:
    """Identifiers of a span. ``by_kind`` holds every identifier (referenced or not) per kind."""
    referenced: set[str] = field(default_factory=set)
    all: set[str] = field(default_factory=set)
    by_kind: Found = field(default_factory=lambda: {k: set() for k in KINDS})


# -- text of messages ---------------------------------------------------------------------

def _raw(message: Any) -> dict[str, Any]:
    """The provider dict of a message given as a dict or as a :class:`~compaction.messages.Message`."""
    raw = getattr(message, "raw", message)
    return raw if isinstance(raw, dict) else {}


def _json_strings(value: Any) -> Iterator[str]:
    """Every string value in a parsed JSON document, in document order. A loop over an
    explicit stack, not recursion: an agent's arguments may nest as deep as the parser allows."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _argument_texts(arguments: Any) -> Iterator[str]:
    """String values of a tool call's JSON arguments (the raw string when it is not JSON)."""
    if not isinstance(arguments, str) or not arguments:
        return
    try:
        parsed = jsontext.loads(arguments)
    except ValueError:  # not JSON, or nested deeper than jsontext.MAX_DEPTH
        yield arguments
        return
    yield from _json_strings(parsed)


_ORIGINS: dict[object, Origin] = {"user": "user", "assistant": "assistant", "tool": "tool"}


def _pieces(raw: dict[str, Any]) -> Iterator[tuple[Origin, str]]:
    """(origin, text) for one message: its content, and the argument values of its tool calls."""
    origin = _ORIGINS.get(raw.get("role"), "system")
    for text in iter_text(raw.get("content")):
        if text:
            yield origin, text
    for call in raw.get("tool_calls") or []:
        fn = (call.get("function") or {}) if isinstance(call, dict) else {}
        for text in _argument_texts(fn.get("arguments")):
            if text:
                yield "arguments", text


def render_text(messages: Iterable[Any]) -> str:
    """All text of a message list, tool-call names and argument values included."""
    out: list[str] = []
    for m in messages:
        raw = _raw(m)
        out.extend(iter_text(raw.get("content")))
        for call in raw.get("tool_calls") or []:
            fn = (call.get("function") or {}) if isinstance(call, dict) else {}
            if fn.get("name"):
                out.append(fn["name"])
            out.extend(_argument_texts(fn.get("arguments")))
    return "\n".join(out)


# -- extraction -------------------------------------------------------------------------------

def _clean_number(m: re.Match[str]) -> str:
    if m.group(5) is not None:
        return "$" + m.group(5)
    number = m.group(1) + m.group(2)
    if m.group(4) is not None:
        return number + m.group(4)
    unit = m.group(3)
    return number + unit if unit in ("x", "X") else f"{number} {unit}"


def _clean_code(s: str) -> str | None:
    if len(s) < 4 or _PLURAL_ACRONYM.fullmatch(s) or s.strip("_") == "":
        return None
    return s


Cleaner = Callable[[str], str | None]
# Passes over whitespace-free tokens: (kind, pattern, cleaner returning the identifier or None).
_TOKEN_PASSES: tuple[tuple[Kind, re.Pattern[str], Cleaner], ...] = (
    ("url", URL_RE, clean_url),
    ("path", PATH_RE, clean_path),
    ("uuid", _UUID_RE, str.lower),
    ("error", _ERROR_RE, str),
    ("hex_id", _HEX_RE, str),
    ("code", _CODE_RE, _clean_code),
)
# Tokens that cannot hold an identifier: plain lower-case words and bare numbers.
_BORING = re.compile(r"[a-z]*[.,;:!?)]*|[0-9.,:%]*")


def _scan_full_text(text: str, found: Found, quoted: bool, tokens: set[str]) -> None:
    """Kinds that may span whitespace (numbers with units, quoted strings) are read from the
    text itself; everything else is read later from the span's distinct tokens."""
    if quoted:
        for m in _QUOTED_RE.finditer(text):
            inner = next(g for g in m.groups() if g is not None).strip()
            if len(inner) >= 3 and _HAS_ALNUM.search(inner):
                found["quoted"].add(inner)
    bucket = found["number_unit"]
    for m in _NUMBER_UNIT_RE.finditer(text):
        unit = m.group(3)
        if unit is None or (unit.lower() in _UNITS and not (unit in ("x", "X") and " " in m.group(0))):
            bucket.add(_clean_number(m))
    tokens.update(text.split())


def _scan_tokens(tokens: Iterable[str], found: Found) -> None:
    interesting = []
    for tok in tokens:
        if _BORING.fullmatch(tok):
            continue
        if len(tok) >= 200:
            tok = _BASE64_RE.sub(" ", tok)
        interesting.append(tok)
    text = "\n".join(interesting)
    for kind, pattern, clean in _TOKEN_PASSES:
        bucket = found[kind]

        def take(m: re.Match[str], bucket: set[str] = bucket, clean: Cleaner = clean) -> str:
            value = clean(m.group(0))
            if not value:
                return m.group(0)  # not this kind: leave the text to the next passes
            if len(value) <= MAX_IDENTIFIER_LEN:
                bucket.add(value)
            return " "

        text = pattern.sub(take, text)


def _extract_text(text: str, found: Found, quoted: bool) -> None:
    """Identifiers of one text (used by tests and tools; the span extractor batches tokens)."""
    tokens: set[str] = set()
    _scan_full_text(text, found, quoted, tokens)
    _scan_tokens(tokens, found)


def text_identifiers(text: str, *, quoted: bool = False) -> Found:
    """Identifiers of one text, per kind (``quoted``: read quoted strings too, as for a user's
    message). The extractive summary uses it to list the names a span used."""
    found: Found = {k: set() for k in KINDS}
    _extract_text(text, found, quoted)
    return found


def argument_texts(arguments: str) -> list[str]:
    """The string values of a tool call's JSON arguments (the raw text when it is not JSON):
    what the score reads from a call."""
    return list(_argument_texts(arguments))


def extract_identifiers(messages: Iterable[Any]) -> Identifiers:
    """Identifiers of a message list (dicts or :class:`~compaction.messages.Message`).

    Each distinct whitespace-separated token of the span is examined once, so repeated
    text (the norm in agent transcripts) costs almost nothing.
    """
    referenced: Found = {k: set() for k in KINDS}
    others: Found = {k: set() for k in KINDS}
    ref_tokens: set[str] = set()
    other_tokens: set[str] = set()
    seen: set[tuple[bool, int, str]] = set()  # repeated texts (re-read files, retried commands) once
    for m in messages:
        for origin, text in _pieces(_raw(m)):
            is_ref = origin not in ("tool", "system")
            key = (is_ref and origin == "user", len(text), text)
            if key in seen:
                continue
            seen.add(key)
            if is_ref:
                _scan_full_text(text, referenced, origin == "user", ref_tokens)
            else:
                _scan_full_text(text, others, False, other_tokens)
    _scan_tokens(ref_tokens, referenced)
    _scan_tokens(other_tokens - ref_tokens, others)
    ref_all = set().union(*referenced.values())
    by_kind = {k: referenced[k] | others[k] for k in KINDS}
    return Identifiers(referenced=ref_all, all=set().union(*by_kind.values()), by_kind=by_kind)


# -- presence -----------------------------------------------------------------------------------

def _variants(identifier: str, kind_of: dict[str, str]) -> tuple[str, ...]:
    low = identifier.lower()
    if kind_of.get(identifier) == "number_unit" and " " in low:
        return low, low.replace(" ", "")
    if "\\" in low:
        return low, low.replace("\\", "\\\\")
    return (low,)


class _Haystack:
    """Lower-cased text of the new context, searched for many identifiers.

    A plain substring test per identifier costs O(identifiers x context size): seconds
    for thousands of identifiers against a large context. Two exact shortcuts keep it
    near O(context + identifiers): an identifier that is a whole token of the context is
    present; one with any 4-character sequence absent from the context is not.
    """

    _TOKEN = re.compile(r"[^\s\"'`<>()\[\]{},;]+")
    GRAM = 4
    GRAMS_FROM = 20_000  # contexts shorter than this are simply scanned
    # Building the 4-gram set costs about as much as 800 plain scans of the same text (one
    # Python step per character against C's substring search), and most contexts are asked
    # about far fewer identifiers: the first ones are scanned, the set is built only after.
    SCANS_BEFORE_GRAMS = 256

    def __init__(self, text: str):
        self.text = text.lower()
        self.tokens = set(self._TOKEN.findall(self.text))
        self._grams: set[str] | None = None
        self._scans = 0

    def _gram_set(self) -> set[str]:
        if self._grams is None:
            t, g = self.text, self.GRAM
            self._grams = {t[i:i + g] for i in range(len(t) - g + 1)}
        return self._grams

    def __contains__(self, needle: str) -> bool:
        if needle in self.tokens:
            return True
        g = self.GRAM
        if len(self.text) >= self.GRAMS_FROM and len(needle) >= g:
            if self._grams is None and self._scans < self.SCANS_BEFORE_GRAMS:
                self._scans += 1
                return needle in self.text
            grams = self._gram_set()
            for i in range(len(needle) - g + 1):
                if needle[i:i + g] not in grams:
                    return False
        return needle in self.text


def _stats(total: set[str], kept: set[str]) -> dict[str, Any]:
    n, k = len(total), len(total & kept)
    return {"total": n, "kept": k, "score": round(k / n, 4) if n else None}


def retention(evicted: Iterable[Any], new_context: Iterable[Any] | str) -> dict[str, Any]:
    """Share of the evicted span's identifiers present in the new context.

    Returns ``{"referenced": {"total", "kept", "score"}, "all": {...}, "missing": [...],
    "by_kind": {kind: {"referenced": {...}, "all": {...}}}}``; ``score`` is None when the
    span holds no identifier of that class; ``missing`` lists up to 50 referenced
    identifiers absent from the new context, sorted. ``new_context`` may be a message
    list or already rendered text.
    """
    ids = extract_identifiers(evicted)
    haystack = _Haystack(new_context if isinstance(new_context, str) else render_text(new_context))
    kind_of: dict[str, str] = {}
    for kind in KINDS:
        for ident in ids.by_kind[kind]:
            kind_of.setdefault(ident, kind)
    kept = {i for i in ids.all if any(v in haystack for v in _variants(i, kind_of))}
    missing = sorted(ids.referenced - kept)
    return {
        "referenced": _stats(ids.referenced, kept),
        "all": _stats(ids.all, kept),
        "missing": missing[:MISSING_LIMIT],
        "by_kind": {k: {"referenced": _stats(ids.by_kind[k] & ids.referenced, kept),
                        "all": _stats(ids.by_kind[k], kept)} for k in KINDS},
    }


def compression(tokens_before_span: int, tokens_summary: int) -> float | None:
    """How many times smaller the summary is than the span it replaces
    (``tokens_before_span / tokens_summary``, e.g. 12.5); None when either side is empty."""
    if tokens_before_span < 0 or tokens_summary < 0:
        raise ValueError("token counts cannot be negative")
    if tokens_before_span == 0 or tokens_summary == 0:
        return None
    return round(tokens_before_span / tokens_summary, 2)
