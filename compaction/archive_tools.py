"""Archive tools for agents: getting archived originals back as exact slices by handle,
and ranked search over them.

Handles (all printed by the notices reduction writes):
- an archive entry id (``ar_...``); an entry holding several messages (an ``evicted`` run)
  is addressed as ``ar_...#k`` for its k-th item;
- a tool_call_id: the tool result answering that call (or, with ``field="arguments"``, the
  call's arguments);
- a message id (``m000123``).
When one message is archived more than once (truncated, then cleared, then summarized away),
the first ``offloaded`` copy is the untouched original and is the one returned.

Offsets and limits count characters (Python code points) of the chosen document:
``content`` (the string content, or the text parts of a list joined by newlines; single
parts by ``part``), ``arguments`` (one call's arguments string) or ``raw`` (the whole
message as canonical JSON).

The same two functions are offered to agents as the ``session_load`` and ``session_search``
tools (:data:`SESSION_LOAD_TOOL`, :data:`SESSION_SEARCH_TOOL`, :func:`handle_tool_call`).
"""
from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from . import jsontext
from .archive import ArchiveBackend, ArchivedItem, ArchiveEntry
from .errors import ArchiveError
from .messages import canonical_json
from .reduction import notices as N
from .reduction.measure import document_text

#: Which document of an archived message a load reads.
ArchiveField = Literal["content", "arguments", "raw"]
FIELDS: tuple[ArchiveField, ...] = ("content", "arguments", "raw")
DEFAULT_TOOL_LIMIT = 20_000
MAX_TOOL_LIMIT = 200_000
SNIPPET_CHARS = 160


# -- resolving handles ---------------------------------------------------------------------------

def _calls(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in raw.get("tool_calls") or [] if isinstance(c, dict)]


def resolve(entries: list[ArchiveEntry], handle: str, field: ArchiveField = "content",
            tool_call_id: str | None = None) -> tuple[ArchiveEntry, int, ArchivedItem]:
    """Find the archived item a handle names; raises ArchiveError when none does."""
    if not isinstance(handle, str) or not handle:
        raise ArchiveError("handle must be a non-empty string")
    by_id = {e.id: e for e in entries}
    base, _, index = handle.partition("#")
    if base in by_id:
        entry = by_id[base]
        if index:
            try:
                k = int(index)
                return entry, k, entry.items[k]
            except (ValueError, IndexError):
                raise ArchiveError(f"entry {base} has items #0 to #{len(entry.items) - 1}; {handle!r} is not one") from None
        if len(entry.items) == 1:
            return entry, 0, entry.items[0]
        wanted = tool_call_id
        for k, item in enumerate(entry.items):
            if wanted and (item.tool_call_id == wanted or any(c.get("id") == wanted for c in _calls(item.raw))):
                return entry, k, item
        raise ArchiveError(f"entry {base} holds {len(entry.items)} messages; name one as '{base}#k' "
                           f"(k from 0) or by its message id")
    # message id or tool_call_id: the first offloaded copy is the untouched original
    found: list[tuple[int, ArchiveEntry, int, ArchivedItem]] = []
    for e in entries:
        for k, item in enumerate(e.items):
            hit = item.message_id == handle
            if not hit:
                if field == "arguments":
                    hit = any(c.get("id") == handle for c in _calls(item.raw))
                else:
                    hit = item.raw.get("role") == "tool" and item.raw.get("tool_call_id") == handle
            if hit:
                found.append((0 if e.kind == "offloaded" else 1, e, k, item))
    if not found:
        raise ArchiveError(f"nothing archived under {handle!r}")
    found.sort(key=lambda t: t[0])  # stable: write order within each kind
    _, e, k, item = found[0]
    return e, k, item


def _document(item: ArchivedItem, field: ArchiveField, part: int | None,
              call_id: str | None) -> tuple[str, dict[str, Any]]:
    raw = item.raw
    info: dict[str, Any] = {}
    if field == "raw":
        return canonical_json(raw), info
    if field == "arguments":
        calls = _calls(raw)
        if not calls:
            raise ArchiveError(f"message {item.message_id} has no tool calls, so no arguments")
        if call_id:
            call = next((c for c in calls if c.get("id") == call_id), None)
            if call is None:
                raise ArchiveError(f"message {item.message_id} has no call {call_id!r}")
        elif len(calls) == 1:
            call = calls[0]
        else:
            raise ArchiveError(f"message {item.message_id} has {len(calls)} calls; pass tool_call_id "
                               f"(one of {', '.join(str(c.get('id')) for c in calls)})")
        fn = call.get("function") or {}
        info.update(tool_call_id=call.get("id"), tool_name=fn.get("name"))
        args = fn.get("arguments")
        return (args if isinstance(args, str) else canonical_json(args)), info
    content = raw.get("content")
    if isinstance(content, list):
        info["parts"] = [_part_info(k, p) for k, p in enumerate(content)]
        if part is not None:
            if not 0 <= part < len(content):
                raise ArchiveError(f"message {item.message_id} has parts 0 to {len(content) - 1}; part {part} is not one")
            p = content[part]
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                return p["text"], info
            if isinstance(p, dict) and p.get("type") == "image_url":
                spec = p.get("image_url")
                url = spec.get("url") if isinstance(spec, dict) else spec
                return (url if isinstance(url, str) else canonical_json(p)), info
            return canonical_json(p), info
    elif part is not None and part != 0:
        raise ArchiveError(f"message {item.message_id} has a single text content; part must be 0 or omitted")
    return document_text(content), info


def _part_info(k: int, p: Any) -> dict[str, Any]:
    if not isinstance(p, dict):
        return {"index": k, "type": type(p).__name__}
    kind = p.get("type")
    if kind == "text":
        return {"index": k, "type": "text", "chars": len(p.get("text") or "")}
    if kind == "image_url":
        spec = p.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        return {"index": k, "type": "image_url", "chars": len(url or "")}
    return {"index": k, "type": kind, "chars": len(canonical_json(p))}


def load(archive: ArchiveBackend, session_id: str, handle: str, offset: int = 0, limit: int | None = None, *,
         field: ArchiveField = "content", part: int | None = None,
         tool_call_id: str | None = None) -> dict[str, Any]:
    """An exact slice of an archived original: ``content[offset:offset+limit]`` plus where
    it came from, ``total_chars`` and ``next_offset`` (None at the end)."""
    if field not in FIELDS:
        raise ValueError(f"field must be one of {', '.join(FIELDS)}, not {field!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError("offset must be a non-negative integer")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0):
        raise ValueError("limit must be a positive integer")
    entries = archive.entries(session_id)
    entry, k, item = resolve(entries, handle, field, tool_call_id)
    if field == "arguments" and tool_call_id is None and handle not in (entry.id, item.message_id) \
            and "#" not in handle:
        tool_call_id = handle
    text, info = _document(item, field, part, tool_call_id)
    total = len(text)
    end = total if limit is None else min(total, offset + limit)
    chunk = text[offset:end] if offset < total else ""
    raw = item.raw
    out = {"handle": handle, "entry_id": entry.id, "entry_kind": entry.kind,
           "item": k, "message_id": item.message_id, "role": raw.get("role"),
           "tool_call_id": info.get("tool_call_id", item.tool_call_id), "tool_name": info.get("tool_name", item.tool_name),
           "field": field, "part": part, "total_chars": total, "offset": offset,
           "returned_chars": len(chunk), "next_offset": end if end < total and offset < total else None,
           "content": chunk}
    if "parts" in info:
        out["parts"] = info["parts"]
    return out


# -- search --------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def terms(text: str) -> Iterator[str]:
    """Lower-cased search terms: words (and the pieces of snake_case words); runs of CJK
    characters become overlapping character pairs, since those scripts do not space words."""
    for word in _raw_terms(text):
        yield word
        if "_" in word.strip("_"):
            for piece in word.split("_"):
                if piece:
                    yield piece


def _raw_terms(text: str) -> Iterator[str]:
    for m in _WORD.finditer(text.lower()):
        word = m.group()
        if not _CJK.search(word):
            yield word
            continue
        pos = 0
        for run in _CJK.finditer(word):
            if run.start() > pos:
                yield word[pos:run.start()]
            chars = run.group()
            if len(chars) == 1:
                yield chars
            else:
                for i in range(len(chars) - 1):
                    yield chars[i:i + 2]
            pos = run.end()
        if pos < len(word):
            yield word[pos:]


# (entry id, item index, entry content hash) -> (term counts, number of terms)
_INDEX: OrderedDict[tuple[str, int, str], tuple[Counter[str], int]] = OrderedDict()
_INDEX_SIZE = 1024
_INDEX_LOCK = threading.Lock()


def _term_counts(text: str) -> Counter[str]:
    """Counter of :func:`terms` over a text, computed slice by slice: plain slices take a
    C-speed path (findall + Counter.update), and snake_case pieces are added once per
    distinct word, so megabytes of tool output index in about a second."""
    counts: Counter[str] = Counter()
    step = 262_144
    i = 0
    while i < len(text):
        j = min(len(text), i + step)
        if j < len(text):
            k = max(text.rfind(" ", i, j), text.rfind("\n", i, j))
            if k > i:
                j = k + 1
        piece = text[i:j].lower()
        if _CJK.search(piece):
            counts.update(_raw_terms(piece))
        else:
            counts.update(_WORD.findall(piece))
        i = j
    for word, n in list(counts.items()):
        if "_" in word.strip("_"):
            for part in word.split("_"):
                if part:
                    counts[part] += n
    return counts


def _indexed(key: tuple[str, int, str], text: str) -> tuple[Counter[str], int]:
    with _INDEX_LOCK:
        hit = _INDEX.get(key)
        if hit is not None:
            _INDEX.move_to_end(key)
            return hit
    counts = _term_counts(text)
    value = (counts, sum(counts.values()))
    with _INDEX_LOCK:
        _INDEX[key] = value
        if len(_INDEX) > _INDEX_SIZE:
            _INDEX.popitem(last=False)
    return value


def _searchable(entries: list[ArchiveEntry]) -> Iterator[tuple[str, ArchiveEntry, int, ArchivedItem, str]]:
    """(handle, entry, item, text) for every archived original, each message once: a
    reduced copy inside a later entry is skipped when its original was offloaded."""
    offloaded = {item.ordinal for e in entries if e.kind == "offloaded" for item in e.items if item.ordinal is not None}
    seen: set[int] = set()
    for e in entries:
        for k, item in enumerate(e.items):
            if item.ordinal is not None:
                if e.kind != "offloaded" and item.ordinal in offloaded:
                    continue
                if item.ordinal in seen:
                    continue
                seen.add(item.ordinal)
            text = document_text(item.raw.get("content"))
            args = [(c.get("function") or {}).get("arguments") for c in _calls(item.raw)]
            extra = "\n".join(a for a in args if isinstance(a, str))
            if extra:
                text = f"{text}\n{extra}" if text else extra
            handle = e.id if len(e.items) == 1 else f"{e.id}#{k}"
            yield handle, e, k, item, text


def _snippet(text: str, query_terms: list[str], phrase: str) -> str:
    low = text.lower()
    pos = low.find(phrase) if phrase else -1
    if pos < 0:
        hits = [p for p in (low.find(t) for t in query_terms) if p >= 0]
        pos = min(hits) if hits else 0
    start = max(0, pos - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


#: Which sessions a search reads: the calling session only (the default), the project's
#: other sessions, or both together ranked as one collection.
SearchScope = Literal["current_session", "other_sessions", "all_sessions"]
SCOPES: tuple[SearchScope, ...] = ("current_session", "other_sessions", "all_sessions")


def scoped_sessions(session_id: str, scope: str, others: Sequence[str]) -> list[str]:
    """The session ids a scope covers, the current one first; ``others`` are the sibling
    sessions the caller may read (the engine has no notion of projects)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    siblings = [s for s in dict.fromkeys(others) if s != session_id]
    if scope == "current_session":
        return [session_id]
    if scope == "other_sessions":
        return siblings
    return [session_id, *siblings]


def search(archive: ArchiveBackend, session_id: str, query: str, limit: int = 10, *,
           scope: str = "current_session", other_sessions: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Archived content ranked by BM25 against ``query`` (case-insensitive; CJK text matched
    by character pairs; an exact phrase match ranks higher). ``scope`` widens the search to
    ``other_sessions`` (ids the caller is allowed to read); the documents of every session in
    scope are ranked together, and each hit names its ``session_id``."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise ValueError("limit must be a positive integer")
    sessions = scoped_sessions(session_id, scope, other_sessions)
    q_terms = list(dict.fromkeys(terms(query)))
    if not q_terms:
        return []
    phrase = " ".join(query.lower().split())
    docs: list[tuple[str, str, ArchiveEntry, int, ArchivedItem, str, Counter[str], int]] = []
    for sid in sessions:
        for handle, e, k, item, text in _searchable(archive.entries(sid)):
            counts, length = _indexed((e.id, k, e.content_hash), text)
            docs.append((sid, handle, e, k, item, text, counts, length))
    if not docs:
        return []
    n = len(docs)
    avg = sum(d[7] for d in docs) / n or 1.0
    df = {t: sum(1 for d in docs if d[6].get(t)) for t in q_terms}
    k1, b = 1.2, 0.75
    scored: list[tuple[float, int, str, str, ArchiveEntry, ArchivedItem, str]] = []
    for order, (sid, handle, e, _k, item, text, counts, length) in enumerate(docs):
        score = 0.0
        for t in q_terms:
            tf = counts.get(t, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        if score <= 0:
            continue
        if len(q_terms) > 1 and phrase in text.lower():
            score *= 1.5
        scored.append((score, order, sid, handle, e, item, text))
    scored.sort(key=lambda s: (-s[0], s[1]))
    out: list[dict[str, Any]] = []
    for score, _, sid, handle, e, item, text in scored[:limit]:
        out.append({"session_id": sid, "handle": handle, "entry_id": e.id, "entry_kind": e.kind,
                    "message_id": item.message_id, "role": item.raw.get("role"),
                    "tool_call_id": item.tool_call_id, "tool_name": item.tool_name,
                    "total_chars": len(text), "score": round(score, 4), "snippet": _snippet(text, q_terms, phrase)})
    return out


# -- as agent tools --------------------------------------------------------------------------------

def tool_definitions(language: str = "en") -> tuple[dict[str, Any], dict[str, Any]]:
    """(session_load, session_search) as OpenAI tool schemas, described in ``language``."""
    def t(key: str) -> str:
        return N.render(key, language)

    load_tool = {"type": "function", "function": {
        "name": "session_load",
        "description": t("load_tool_description"),
        "parameters": {
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": t("load_handle")},
                "offset": {"type": "integer", "minimum": 0, "default": 0, "description": t("load_offset")},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_LIMIT, "default": DEFAULT_TOOL_LIMIT,
                          "description": t("load_limit")},
                "field": {"type": "string", "enum": list(FIELDS), "default": "content", "description": t("load_field")},
                "part": {"type": "integer", "minimum": 0, "description": t("load_part")},
                "tool_call_id": {"type": "string", "description": t("load_tool_call_id")},
            },
            "required": ["handle"],
            "additionalProperties": False,
        },
    }}
    search_tool = {"type": "function", "function": {
        "name": "session_search",
        "description": t("search_tool_description"),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": t("search_query")},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": t("search_limit")},
                "scope": {"type": "string", "enum": list(SCOPES), "default": "current_session",
                          "description": t("search_scope")},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }}
    return load_tool, search_tool


SESSION_LOAD_TOOL, SESSION_SEARCH_TOOL = tool_definitions("en")


def handle_tool_call(archive: ArchiveBackend, session_id: str, name: str, arguments_json: str | dict[str, Any],
                     language: str = "en", *, other_sessions: Callable[[], Sequence[str]] | None = None) -> str:
    """Run a ``session_load``/``session_search`` call from an agent; always returns JSON text
    (``{"error": ...}`` for bad calls, so the agent can correct itself). ``other_sessions``
    lists the sibling sessions a widened search may read; without it only the current
    session is searchable (asked lazily, so a current-session search costs no lookup)."""
    def reply(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    if name not in ("session_load", "session_search"):
        return reply({"error": N.render("tool_unknown", language, name=name)})
    try:
        parsed: Any = jsontext.loads(arguments_json) if isinstance(arguments_json, str) else arguments_json
        if parsed is None:
            parsed = {}
        if not isinstance(parsed, dict):
            raise ValueError(f"got {type(parsed).__name__}")
        args: dict[str, Any] = parsed
    except ValueError as exc:  # not JSON, nested deeper than jsontext.MAX_DEPTH, or NaN
        return reply({"error": N.render("tool_bad_arguments", language, detail=str(exc))})
    try:
        if name == "session_load":
            allowed = {"handle", "offset", "limit", "field", "part", "tool_call_id"}
            extra = set(args) - allowed
            if extra:
                raise ValueError(f"unknown argument(s): {', '.join(sorted(extra))}")
            limit = args.get("limit", DEFAULT_TOOL_LIMIT)
            if isinstance(limit, int) and not isinstance(limit, bool):
                limit = min(limit, MAX_TOOL_LIMIT)
            # The agent's values are checked by load() and search(), which answer bad ones
            # with an error the agent can read.
            handle: Any = args.get("handle")
            return reply(load(archive, session_id, handle, args.get("offset", 0), limit,
                              field=args.get("field", "content"), part=args.get("part"),
                              tool_call_id=args.get("tool_call_id")))
        extra = set(args) - {"query", "limit", "scope"}
        if extra:
            raise ValueError(f"unknown argument(s): {', '.join(sorted(extra))}")
        query: Any = args.get("query")
        scope: Any = args.get("scope", "current_session")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        if scope != "current_session" and other_sessions is None:
            return reply({"error": N.render("search_scope_unavailable", language, scope=scope)})
        others = list(other_sessions()) if scope != "current_session" and other_sessions else []
        hits = search(archive, session_id, query, min(int(args.get("limit", 10)), 50),
                      scope=scope, other_sessions=others)
        return reply({"query": args.get("query"), "scope": scope, "hits": hits})
    except ArchiveError as exc:
        return reply({"error": str(exc)})
    except (ValueError, TypeError) as exc:
        return reply({"error": N.render("tool_bad_arguments", language, detail=str(exc))})
