"""Reads of the archive browser: entries grouped by the run that wrote them, and one
entry's items a page at a time."""
from __future__ import annotations

from typing import Any

from django.http import Http404

from ..models import Session, StoredArchiveEntry
from .archive import entry_items

#: Items of an entry per page, by default and at most.
ITEMS_PER_PAGE = 10
MAX_ITEMS_PER_PAGE = 100
#: Entries the browser lists at most.
MAX_ENTRIES = 500


def archive_groups(session: Session, run_id: int | None = None, limit: int = MAX_ENTRIES) -> list[dict[str, Any]]:
    """Archive entries grouped by the run that wrote them (newest run first)."""
    qs = StoredArchiveEntry.objects.filter(session_id=session.pk).select_related("run").only(
        "id", "entry_id", "kind", "note", "item_count", "size_chars", "created_at", "run_id",
        "run__id", "run__status", "run__trigger", "run__created_at")
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    groups: dict[int | None, dict[str, Any]] = {}
    for e in qs.order_by("-id")[:limit]:
        g = groups.setdefault(e.run_id, {"run": e.run, "entries": [], "items": 0, "size": 0})
        g["entries"].append(e)
        g["items"] += e.item_count
        g["size"] += e.size_chars
    return list(groups.values())


def load_entry(session: Session, entry_id: str) -> StoredArchiveEntry:
    e = StoredArchiveEntry.objects.filter(session_id=session.pk, entry_id=entry_id).first()
    if e is None:
        raise Http404("no such archive entry")
    return e


def entry_context(entry: StoredArchiveEntry, offset: int, limit: int) -> dict[str, Any]:
    """``limit`` items of ``entry`` from ``offset`` (both clamped), with the paging links."""
    offset = max(0, min(offset, entry.item_count - 1))
    limit = max(1, min(limit, MAX_ITEMS_PER_PAGE))
    items = entry_items(entry, offset, limit)
    return {"entry": entry, "items": items, "offset": offset, "limit": limit,
            "end": offset + len(items),
            "next_offset": offset + limit if offset + limit < entry.item_count else None,
            "prev_offset": max(0, offset - limit) if offset > 0 else None}
