"""Archive reads: entries, one entry's items (offset/limit), search, replay."""
from __future__ import annotations

import json
from typing import Any

from compaction.archive import replay as engine_replay
from compaction.archive_tools import handle_tool_call
from compaction.errors import ArchiveError
from compaction.messages import Message, canonical_json, content_hash

from ..models import ArchiveItem, Session, SessionContext, StoredArchiveEntry, StoredMessage
from ..services import NotFound, ServiceError
from ..services.archive import DjangoArchive
from .pagination import paginate


def list_entries(session: Session, cursor: str | None = None, limit: int | None = None):
    return paginate(StoredArchiveEntry.objects.filter(session_id=session.pk), cursor, limit, key="id")


def get_entry(project_id: int, entry_id: str) -> StoredArchiveEntry:
    row = StoredArchiveEntry.objects.filter(project_id=project_id, entry_id=entry_id).first()
    if row is None:
        raise NotFound(f"archive entry {entry_id!r} not found")
    return row


def entry_items(entry: StoredArchiveEntry, offset: int = 0, limit: int = 50) -> list[ArchiveItem]:
    return list(entry.items.order_by("index")[offset: offset + limit])


def search(session: Session, q: str, cursor: str | None = None, limit: int | None = None):
    qs = (ArchiveItem.objects.filter(entry__session_id=session.pk, text__icontains=q)
          .select_related("entry").only("id", "index", "message_id", "ordinal", "raw", "text", "tool_name",
                                        "tool_call_id", "entry__entry_id", "entry__kind"))
    return paginate(qs, cursor, limit, key="id")


def tool_call(session: Session, name: str, arguments: dict[str, Any] | str, language: str = "en") -> dict[str, Any]:
    """An agent's ``session_load`` / ``session_search`` call, answered from the archive as the
    engine's tools answer it (``{"error": ...}`` for a call the agent should correct). A
    search widened to ``other_sessions`` or ``all_sessions`` reads the archives of the other
    sessions of the session's own project, never another project's."""
    def siblings() -> list[str]:
        # only sessions with something archived: the others would add no document
        return [str(pk) for pk in StoredArchiveEntry.objects.filter(project_id=session.project_id)
                .exclude(session_id=session.pk).order_by("session_id").values_list("session_id", flat=True).distinct()]

    return json.loads(handle_tool_call(DjangoArchive(), str(session.pk), name, arguments, language,
                                       other_sessions=siblings))


def snippet(text: str, q: str, width: int = 160) -> str:
    at = text.lower().find(q.lower())
    if at < 0:
        return text[:width]
    start = max(0, at - width // 2)
    end = min(len(text), at + len(q) + width // 2)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def replay(session: Session) -> dict:
    """The full original sequence rebuilt from the archive plus the live context, and
    whether it matches the stored history message for message."""
    ctx = SessionContext.objects.get(session_id=session.pk)
    live = [Message.from_dict(i) for i in ctx.load_items()]
    try:
        messages = engine_replay(DjangoArchive().entries(str(session.pk)), live)
    except ArchiveError as exc:
        raise ServiceError(f"archive is inconsistent: {exc}", status=409) from None
    stored = list(StoredMessage.objects.filter(session_id=session.pk).order_by("position").values_list("content_hash", flat=True))
    rebuilt = [content_hash(m) for m in messages]
    whole = content_hash({"messages": messages}) if messages else content_hash({"messages": []})
    return {"session_id": session.pk, "count": len(messages), "matches_history": rebuilt == stored,
            "content_hash": whole, "messages": messages}


__all__ = ["list_entries", "get_entry", "entry_items", "search", "snippet", "replay", "canonical_json"]
