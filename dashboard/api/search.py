"""Search across the sessions of the key's project: messages and archived originals, ranked."""
from __future__ import annotations

from typing import Annotated, Literal

from ninja import Router
from ninja.params import functions as param

from ..selectors import search as sel
from .errors import ERROR_CODES
from .schemas import MAX_ID, Error, ProjectSearchPage, Text

router = Router(tags=["search"])
ERR = {code: Error for code in ERROR_CODES}


@router.get("/search", response={200: ProjectSearchPage, **ERR}, summary="Search messages and archives across sessions")
def search(request,
           q: Annotated[Text, param.Query(..., min_length=1, max_length=500, description="Words to find (all of them).")],
           scope: Annotated[Literal["current_session", "other_sessions", "all_sessions"], param.Query(
               "all_sessions", description="current_session / other_sessions need session_id.")] = "all_sessions",
           session_id: Annotated[int | None, param.Query(None, ge=1, le=MAX_ID, description="The current session.")] = None,
           limit: Annotated[int, param.Query(20, ge=1, le=sel.MAX_LIMIT)] = 20):
    hits = sel.search(request.auth.pk, q, scope=scope, session_id=session_id, limit=limit)
    return {"query": q, "scope": scope, "items": [h.as_dict() for h in hits]}
