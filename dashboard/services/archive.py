"""The engine's ArchiveBackend over the ArchiveEntry / ArchiveItem tables.

``DjangoArchive`` writes each entry when asked (durable when ``write`` returns, as the
protocol requires). ``BufferedArchive`` is what compaction runs use: the engine writes to
it during ``compact()``, and the run's commit flushes the entries in the same transaction
as the new live context, so a run that fails or loses its worker leaves no archive rows.
"""
from __future__ import annotations

import json

from django.db import connection, transaction
from django.utils import timezone

from compaction.archive import ArchivedItem, ArchiveEntry, items_hash
from compaction.errors import ArchiveError
from compaction.messages import text_of

from ..models import ArchiveItem, Session, StoredArchiveEntry
from .common import clean_text, insert_returning, insert_values


def search_text(raw: dict) -> str:
    """What archive search looks at: the message text and its tool calls' names and arguments."""
    parts = [text_of(raw.get("content"))]
    for call in raw.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    return clean_text("\n".join(p for p in parts if p))


def _session_pk(session_id: str) -> int:
    try:
        return int(session_id)
    except (TypeError, ValueError):
        raise ArchiveError(f"no session {session_id!r}") from None


def store_entry(entry: ArchiveEntry, *, session: Session | None = None, run_id: int | None = None) -> None:
    store_entries([entry], session=session, run_id=run_id)


# Columns written by store_entries, with the values their fields would prepare (ids are
# the database's; created_at is stamped as auto_now_add stamps it).
_ENTRY_COLUMNS = ["entry_id", "project_id", "session_id", "run_id", "kind", "note", "content_hash", "item_count",
                  "size_chars", "engine_created_at", "created_at"]
_ITEM_COLUMNS = ["entry_id", "index", "message_id", "ordinal", "raw", "text", "tool_call_id", "tool_name"]


def store_entries(entries: list[ArchiveEntry], *, session: Session | None = None,
                  run_id: int | None = None) -> None:
    """Write entries in a fixed number of statements however many there are: one check that
    no id exists yet, one insert of the entries returning their ids, one insert (COPY on
    PostgreSQL) of their items. The caller's transaction makes them durable together (one
    commit per compaction). The rows hold what ``bulk_create`` of the models stored (the
    tests compare them); the values are prepared here without building model instances,
    which cost more than the database took to store them."""
    if not entries:
        return
    if session is None:  # the entries of one session
        session = Session.objects.only("id", "project_id").get(pk=_session_pk(entries[0].session_id))
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise ArchiveError(f"archive entry {next(i for i in ids if ids.count(i) > 1)} written twice")
    # No ORDER BY (first() would add one by id): PostgreSQL then walked the primary key
    # over the whole archive table instead of probing the entry_id index.
    taken = min(StoredArchiveEntry.objects.filter(entry_id__in=ids).order_by().values_list("entry_id", flat=True),
                default=None)
    if taken is not None:
        raise ArchiveError(f"archive entry {taken} already exists")
    raws = [[json.dumps(item.raw, separators=(",", ":")) for item in entry.items] for entry in entries]
    stamp = connection.ops.adapt_datetimefield_value(timezone.now())
    pks = insert_returning(StoredArchiveEntry, _ENTRY_COLUMNS, [
        [entry.id, session.project_id, session.pk, run_id, entry.kind, clean_text(entry.note or ""),
         entry.content_hash, len(entry.items), entry.size_chars, float(entry.created_at or 0.0), stamp]
        for entry in entries], key="entry_id")
    # a generator: on PostgreSQL the rows stream to the server as they are prepared
    insert_values(ArchiveItem, _ITEM_COLUMNS, (
        [pks[entry.id], i, item.message_id, None if item.ordinal is None else int(item.ordinal), text,
         search_text(item.raw), clean_text(item.tool_call_id or ""), clean_text(item.tool_name or "")]
        for entry, texts in zip(entries, raws) for i, (item, text) in enumerate(zip(entry.items, texts))))


def to_engine(row: StoredArchiveEntry, items: list[ArchiveItem] | None = None) -> ArchiveEntry:
    if items is None:
        items = list(row.items.order_by("index"))
    archived = [ArchivedItem(i.message_id, i.ordinal, i.raw, i.tool_call_id or None, i.tool_name or None)
                for i in items]
    entry = ArchiveEntry(row.entry_id, str(row.session_id), row.kind, archived,
                        str(row.run_id) if row.run_id else None, row.engine_created_at, row.note, row.content_hash)
    return entry


def verify(entry: ArchiveEntry) -> ArchiveEntry:
    if entry.content_hash != items_hash(entry.items):
        raise ArchiveError(f"archive entry {entry.id} does not match its content hash")
    return entry


class DjangoArchive:
    """compaction.archive.ArchiveBackend on the database; ``session_id`` is the Session pk."""

    def write(self, entry: ArchiveEntry) -> str:
        with transaction.atomic():
            store_entry(entry)
        return entry.id

    def write_many(self, entries: list[ArchiveEntry]) -> list[str]:
        """All entries of one compaction in one transaction (compaction.archive.write_entries)."""
        with transaction.atomic():
            for session_id in dict.fromkeys(e.session_id for e in entries):
                store_entries([e for e in entries if e.session_id == session_id])
        return [e.id for e in entries]

    def entries(self, session_id: str) -> list[ArchiveEntry]:
        pk = _session_pk(session_id)
        rows = list(StoredArchiveEntry.objects.filter(session_id=pk).order_by("id"))
        items: dict[int, list[ArchiveItem]] = {r.pk: [] for r in rows}
        for item in ArchiveItem.objects.filter(entry__session_id=pk).order_by("entry_id", "index"):
            items[item.entry_id].append(item)
        return [to_engine(r, items[r.pk]) for r in rows]

    def entry_ids(self, session_id: str) -> list[str]:
        """Every handle the session's archive holds, in one query: the engine's EntryIds
        probes this set instead of one lookup per new entry (a run clearing 120 tool
        results asked the database 120 times)."""
        return list(StoredArchiveEntry.objects.filter(session_id=_session_pk(session_id))
                    .values_list("entry_id", flat=True))

    def get(self, session_id: str, entry_id: str) -> ArchiveEntry:
        row = StoredArchiveEntry.objects.filter(session_id=_session_pk(session_id), entry_id=entry_id).first()
        if row is None:
            raise ArchiveError(f"no archive entry {entry_id!r} in session {session_id!r}")
        return verify(to_engine(row))


class BufferedArchive(DjangoArchive):
    """Holds writes until ``flush`` (called inside the run's commit transaction)."""

    def __init__(self) -> None:
        self.pending: list[ArchiveEntry] = []

    def write(self, entry: ArchiveEntry) -> str:
        if any(e.id == entry.id for e in self.pending):
            raise ArchiveError(f"archive entry {entry.id} already exists")
        self.pending.append(entry)
        return entry.id

    def write_many(self, entries: list[ArchiveEntry]) -> list[str]:
        return [self.write(e) for e in entries]

    def entries(self, session_id: str) -> list[ArchiveEntry]:
        return super().entries(session_id) + [e for e in self.pending if e.session_id == str(session_id)]

    def entry_ids(self, session_id: str) -> list[str]:
        return super().entry_ids(session_id) + [e.id for e in self.pending if e.session_id == str(session_id)]

    def get(self, session_id: str, entry_id: str) -> ArchiveEntry:
        for e in self.pending:
            if e.id == entry_id and e.session_id == str(session_id):
                return e
        return super().get(session_id, entry_id)

    def flush(self, session: Session, run_id: int | None) -> list[str]:
        """Write the held entries; their ids, in the order they were written."""
        store_entries(self.pending, session=session, run_id=run_id)
        ids, self.pending = [e.id for e in self.pending], []
        return ids
