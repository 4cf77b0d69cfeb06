"""Archive of everything a compaction removed from a live context.

An entry holds whole original messages (``evicted``: summarized away; ``offloaded``: a tool
result a reduction step cleared or truncated) or a folded previous summary
(``previous_summary``). Each archived item keeps the message's ordinal, so
:func:`replay` rebuilds the original sequence exactly, whatever order runs happened in.

Backends implement :class:`ArchiveBackend` (three methods). Two ship here: in-memory
(tests, one-shot use) and filesystem (one JSONL file per session, append-only). The
service adds a database backend.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, Protocol, TypedDict, get_args

from .errors import ArchiveError, CompactionError
from .messages import JSONObject, Message, RawMessage, canonical_json

ArchiveKind = Literal["evicted", "offloaded", "previous_summary"]
KINDS: tuple[ArchiveKind, ...] = get_args(ArchiveKind)


class ArchivedItemRecord(TypedDict):
    """JSON form of an :class:`ArchivedItem` (one line of a file archive holds these)."""
    message_id: str
    ordinal: int | None
    raw: RawMessage
    tool_call_id: str | None
    tool_name: str | None


class ArchiveEntryRecord(TypedDict):
    """JSON form of an :class:`ArchiveEntry`: one line of a file archive."""
    id: str
    session_id: str
    kind: str
    run_id: str | None
    created_at: float
    note: str
    content_hash: str
    items: list[ArchivedItemRecord]


@dataclass
class ArchivedItem:
    message_id: str
    ordinal: int | None          # None for engine-written text (a previous summary)
    raw: RawMessage              # the message exactly as it was
    tool_call_id: str | None = None
    tool_name: str | None = None

    @cached_property
    def canonical(self) -> str:
        """The message as canonical JSON, built once: the entry's handle, its content hash and
        its size all read it."""
        return canonical_json(self.raw)

    def to_dict(self) -> ArchivedItemRecord:
        return {"message_id": self.message_id, "ordinal": self.ordinal, "raw": self.raw,
                "tool_call_id": self.tool_call_id, "tool_name": self.tool_name}

    @classmethod
    def from_dict(cls, d: JSONObject) -> ArchivedItem:
        return cls(d["message_id"], d.get("ordinal"), d["raw"], d.get("tool_call_id"), d.get("tool_name"))


@dataclass
class ArchiveEntry:
    id: str
    session_id: str
    kind: str   # an ArchiveKind; stored rows hand it back as plain text, so it is checked below
    items: list[ArchivedItem]
    run_id: str | None = None
    created_at: float = field(default_factory=time.time)
    note: str = ""
    content_hash: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise CompactionError(f"unknown archive kind {self.kind!r}")
        if not self.content_hash:
            self.content_hash = items_hash(self.items)

    @property
    def size_chars(self) -> int:
        return sum(len(i.canonical) for i in self.items)

    def to_dict(self) -> ArchiveEntryRecord:
        return {"id": self.id, "session_id": self.session_id, "kind": self.kind, "run_id": self.run_id,
                "created_at": self.created_at, "note": self.note, "content_hash": self.content_hash,
                "items": [i.to_dict() for i in self.items]}

    @classmethod
    def from_dict(cls, d: JSONObject) -> ArchiveEntry:
        entry = cls(d["id"], d["session_id"], d["kind"], [ArchivedItem.from_dict(i) for i in d["items"]],
                    d.get("run_id"), d.get("created_at", 0.0), d.get("note", ""), d.get("content_hash", ""))
        if entry.content_hash != items_hash(entry.items):
            raise ArchiveError(f"archive entry {entry.id} does not match its content hash")
        return entry


def items_hash(items: Iterable[ArchivedItem]) -> str:
    h = hashlib.sha256()
    for item in items:
        h.update(item.canonical.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def entry_id(session_id: str, kind: str, items: Sequence[ArchivedItem], *, salt: str = "") -> str:
    """The handle of an entry, derived from what it holds and where it sits.

    The digest covers the session, the kind, each item's message id, ordinal and content,
    and ``salt`` (what else places the entry, e.g. the ids of engine-written messages it
    drops). The same session through the same policy therefore gets the same handles on
    every run, so contexts that quote a handle are byte-identical and prompt caches hold.
    Two distinct entries of one session differ in at least one of these inputs; the
    allocator :class:`EntryIds` adds a counter for the rare case where they do not.
    """
    h = hashlib.sha256()
    for part in (session_id, kind, salt):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    for item in items:
        h.update(f"{item.message_id}\0{item.ordinal}\0".encode("utf-8", "surrogatepass"))
        h.update(item.canonical.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return "ar_" + h.hexdigest()[:16]


class EntryIds:
    """Hands out entry handles that no other entry of the archive uses.

    ``exists`` says whether the backend already holds a handle (probed only for handles
    this allocator has not handed out itself). When the content-derived handle is taken,
    a counter is appended (``ar_<digest>-2``, ``-3``, ...), which is itself deterministic.
    """

    def __init__(self, session_id: str, exists: Callable[[str], bool] | None = None) -> None:
        self.session_id = session_id
        self.exists = exists
        self.taken: set[str] = set()
        self._given: dict[str, str] = {}

    def new(self, kind: ArchiveKind, items: Sequence[ArchivedItem], *, salt: str = "") -> str:
        """The handle for this entry. Asking again for the same entry (a step that was
        rolled back and redone) gives the same handle, not a second one."""
        base = entry_id(self.session_id, kind, items, salt=salt)
        given = self._given.get(base)
        if given is not None:
            return given
        candidate, n = base, 1
        while candidate in self.taken or (self.exists is not None and self.exists(candidate)):
            n += 1
            candidate = f"{base}-{n}"
        self.taken.add(candidate)
        self._given[base] = candidate
        return candidate


def backend_has(archive: ArchiveBackend, session_id: str) -> Callable[[str], bool]:
    """``exists`` for :class:`EntryIds` on any backend. A backend that can list a session's
    handles (``entry_ids(session_id)``, as the in-memory and file archives do) is asked once,
    on the first probe; any other is asked through ``get``, one indexed lookup per probe."""
    listing = getattr(archive, "entry_ids", None)
    known: set[str] | None = None

    def exists(entry_id: str) -> bool:
        nonlocal known
        if callable(listing):
            if known is None:
                known = set(listing(session_id))
            return entry_id in known
        try:
            archive.get(session_id, entry_id)
        except ArchiveError:
            return False
        return True
    return exists


def item_for(message: Message, raw: RawMessage | None = None, tool_name: str | None = None) -> ArchivedItem:
    return ArchivedItem(message.id, message.ordinal if message.is_original else None,
                        raw if raw is not None else message.raw, message.tool_call_id, tool_name)


class ArchiveBackend(Protocol):
    """Where archive entries live.

    Contract: ``write`` is durable when it returns and never overwrites an entry;
    ``entries`` returns a session's entries in write order; ``get`` raises ArchiveError
    for an unknown id.
    """

    def write(self, entry: ArchiveEntry) -> str: ...

    def entries(self, session_id: str) -> list[ArchiveEntry]: ...

    def get(self, session_id: str, entry_id: str) -> ArchiveEntry: ...


def write_entries(archive: ArchiveBackend, entries: Sequence[ArchiveEntry]) -> None:
    """Write the entries of one compaction together: a backend with ``write_many`` makes
    them durable at once (one fsync, one transaction), any other gets them one by one."""
    if not entries:
        return
    write_many = getattr(archive, "write_many", None)
    if write_many is not None:
        write_many(list(entries))
        return
    for entry in entries:
        archive.write(entry)


class MemoryArchive:
    def __init__(self) -> None:
        self._data: dict[str, list[ArchiveEntry]] = {}
        self._lock = threading.Lock()

    def write(self, entry: ArchiveEntry) -> str:
        with self._lock:
            bucket = self._data.setdefault(entry.session_id, [])
            if any(e.id == entry.id for e in bucket):
                raise ArchiveError(f"archive entry {entry.id} already exists")
            bucket.append(entry)
        return entry.id

    def entries(self, session_id: str) -> list[ArchiveEntry]:
        with self._lock:
            return list(self._data.get(session_id, []))

    def entry_ids(self, session_id: str) -> set[str]:
        with self._lock:
            return {e.id for e in self._data.get(session_id, [])}

    def get(self, session_id: str, entry_id: str) -> ArchiveEntry:
        for e in self.entries(session_id):
            if e.id == entry_id:
                return e
        raise ArchiveError(f"no archive entry {entry_id!r} in session {session_id!r}")


class FileArchive:
    """One append-only JSONL file per session under ``root``; each line is an entry."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def path(self, session_id: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id) or "session"
        return self.root / f"{safe}.jsonl"

    def write(self, entry: ArchiveEntry) -> str:
        line = json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock, open(self.path(entry.session_id), "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        return entry.id

    def write_many(self, entries: Sequence[ArchiveEntry]) -> list[str]:
        """All entries of one compaction, each session's lines in one write and one fsync."""
        by_path: dict[Path, list[str]] = {}
        for entry in entries:
            line = json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
            by_path.setdefault(self.path(entry.session_id), []).append(line)
        with self._lock:
            for path, lines in by_path.items():
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write("".join(lines))
                    fh.flush()
                    os.fsync(fh.fileno())
        return [e.id for e in entries]

    def entries(self, session_id: str) -> list[ArchiveEntry]:
        p = self.path(session_id)
        if not p.exists():
            return []
        out: list[ArchiveEntry] = []
        with open(p, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    out.append(ArchiveEntry.from_dict(json.loads(line)))
                except (ValueError, KeyError, TypeError) as exc:  # TypeError: JSON that is not an entry object
                    raise ArchiveError(f"{p}:{n}: unreadable archive line ({exc})") from exc
        return out

    def get(self, session_id: str, entry_id: str) -> ArchiveEntry:
        for e in self.entries(session_id):
            if e.id == entry_id:
                return e
        raise ArchiveError(f"no archive entry {entry_id!r} in session {session_id!r}")

    def entry_ids(self, session_id: str) -> set[str]:
        """Handles of a session's entries (read without checking their content)."""
        p = self.path(session_id)
        if not p.exists():
            return set()
        out: set[str] = set()
        with open(p, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    out.add(json.loads(line)["id"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise ArchiveError(f"{p}:{n}: unreadable archive line ({exc})") from exc
        return out


def replay(entries: Iterable[ArchiveEntry], live: Iterable[Message]) -> list[RawMessage]:
    """Rebuild the original message sequence from archive entries plus the live context.

    A message a reduction step edited (truncated, cleared) appears edited in the live
    context or in a later ``evicted`` entry; its untouched original is the *first*
    ``offloaded`` item with its ordinal, and that wins. Raises ArchiveError when an
    ordinal is missing or two unedited copies of one message disagree.
    """
    seen: dict[int, RawMessage] = {}
    originals: dict[int, RawMessage] = {}
    for entry in entries:
        for item in entry.items:
            if item.ordinal is None:
                continue
            if entry.kind == "offloaded":
                originals.setdefault(item.ordinal, item.raw)
            else:
                _put(seen, item.ordinal, item.raw, originals)
    for m in live:
        if m.is_original and m.ordinal is not None:  # an original always has its ordinal
            if m.reduction is not None and m.ordinal not in originals:
                raise ArchiveError(f"message {m.id} was reduced but its original is not in the archive")
            _put(seen, m.ordinal, m.raw, originals)
    for ordinal in originals:
        seen.setdefault(ordinal, originals[ordinal])
    if not seen:
        return []
    n = max(seen) + 1
    missing = [i for i in range(n) if i not in seen]
    if missing:
        raise ArchiveError(f"replay is missing original message(s) at position(s) {missing[:10]}")
    return [originals.get(i, seen[i]) for i in range(n)]


def _put(seen: dict[int, RawMessage], ordinal: int, raw: RawMessage, originals: dict[int, RawMessage]) -> None:
    prev = seen.get(ordinal)
    if prev is not None and ordinal not in originals and canonical_json(prev) != canonical_json(raw):
        raise ArchiveError(f"two different versions of original message {ordinal} in archive and context")
    seen[ordinal] = raw
