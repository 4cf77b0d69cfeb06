"""Reads behind ``POST /v1/responses``: the history a request continues, from a
``previous_response_id`` or from a compaction item this gateway returned. Both are checked
against the request's project: a client reaches only its own project's sessions."""
from __future__ import annotations

from typing import Any

from ..models import GatewayResponse, GatewaySession, StoredMessage


def previous_response(project_id: int, response_id: str) -> GatewayResponse | None:
    """The project's kept response of that id, if any."""
    return GatewayResponse.objects.filter(pk=response_id, project_id=project_id).first()


def stored_prefix(project_id: int, session_id: int, end: int) -> list[dict[str, Any]] | None:
    """The first ``end`` stored messages of a gateway session of the project, as stored
    (without the provider usage a stored reply carries); None when the project has no such
    gateway session or the session has fewer messages."""
    if not GatewaySession.objects.filter(session_id=session_id, project_id=project_id, stored_count__gte=end).exists():
        return None
    rows = list(StoredMessage.objects.filter(session_id=session_id, position__lt=end)
                .order_by("position").values_list("raw", flat=True))
    if len(rows) != end:
        return None
    for raw in rows:
        raw.pop("usage", None)
    return rows
