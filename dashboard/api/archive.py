"""Archive: what compactions removed from the live context, kept whole."""
from __future__ import annotations

from typing import Annotated, Any

from ninja import Router
from ninja.params import functions as param

from ..selectors import archive as sel
from ..selectors.sessions import get_session
from . import convert
from .errors import ERROR_CODES
from .schemas import (
    MAX_ID,
    ArchiveEntryDetailOut,
    ArchiveEntryPage,
    Error,
    ReplayOut,
    SearchPage,
    Text,
    ToolCallIn,
)

router = Router(tags=["archive"])
ERR = {code: Error for code in ERROR_CODES}
SessionId = Annotated[int, param.Path(ge=1, le=MAX_ID, description="Session id.")]
Cursor = Annotated[str | None, param.Query(None, max_length=200, description="next_cursor of the previous page.")]
Limit = Annotated[int | None, param.Query(None, ge=1, le=500, description="Page size (default 50).")]


@router.get("/sessions/{session_id}/archive", response={200: ArchiveEntryPage, **ERR},
            summary="Archive entries of a session (oldest first)")
def list_entries(request, session_id: SessionId, cursor: Cursor = None, limit: Limit = None):
    items, nxt = sel.list_entries(get_session(request.auth.pk, session_id), cursor, limit)
    return {"items": [convert.entry_out(e) for e in items], "next_cursor": nxt}


@router.get("/sessions/{session_id}/archive/search", response={200: SearchPage, **ERR},
            summary="Search a session's archive")
def search(request, session_id: SessionId,
           q: Annotated[Text, param.Query(..., min_length=1, max_length=500, description="Text to find (case-insensitive).")],
           cursor: Cursor = None, limit: Limit = None):
    session = get_session(request.auth.pk, session_id)
    items, nxt = sel.search(session, q, cursor, limit)
    hits = [{"entry_id": i.entry.entry_id, "entry_kind": i.entry.kind, "index": i.index,
             "message_id": i.message_id, "ordinal": i.ordinal, "role": str(i.raw.get("role", "")),
             "tool_name": i.tool_name or None, "snippet": sel.snippet(i.text, q),
             "url": f"/api/archive/{i.entry.entry_id}?offset={i.index}&limit=1"} for i in items]
    return {"query": q, "items": hits, "next_cursor": nxt}


@router.post("/sessions/{session_id}/archive/tool-call", response={200: dict[str, Any], **ERR},
             summary="Answer an agent's session_load or session_search call")
def tool_call(request, session_id: SessionId, body: ToolCallIn):
    """What the agent's archive tool returns, as the engine's tools answer it: a load's slice,
    or a search's ranked hits, each naming its session. ``scope`` in a search's arguments
    widens it to the other sessions of this session's project (never another project's).
    A call the agent should correct is answered 200 with ``{"error": ...}``, as a tool result."""
    return sel.tool_call(get_session(request.auth.pk, session_id), body.name, body.arguments)


@router.get("/sessions/{session_id}/archive/replay", response={200: ReplayOut, **ERR},
            summary="The full original sequence, rebuilt from archive and live context")
def replay(request, session_id: SessionId):
    return sel.replay(get_session(request.auth.pk, session_id))


@router.get("/archive/{entry_id}", response={200: ArchiveEntryDetailOut, **ERR}, summary="One archive entry")
def get_entry(request, entry_id: Annotated[str, param.Path(..., max_length=64)],
              offset: Annotated[int, param.Query(0, ge=0, le=10_000_000)] = 0,
              limit: Annotated[int, param.Query(50, ge=1, le=500)] = 50):
    """The archived messages of an entry, `limit` at a time from `offset`."""
    entry = sel.get_entry(request.auth.pk, entry_id)
    items = sel.entry_items(entry, offset, limit)
    out = convert.entry_out(entry)
    nxt = offset + limit if offset + limit < entry.item_count else None
    out.update({"offset": offset, "limit": limit, "next_offset": nxt, "items": [convert.item_out(i) for i in items]})
    return out
