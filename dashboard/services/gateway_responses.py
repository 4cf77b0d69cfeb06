"""Keeping what ``POST /v1/responses`` answered (``GatewayResponse``), so a later request can
continue it by ``previous_response_id``."""
from __future__ import annotations

import secrets
from typing import Any

from ..models import GatewayResponse


def new_response_id() -> str:
    """A response's id, chosen before the answer starts (a stream names it first). Random:
    it names a response, it is no part of a context, an archive or a report."""
    return f"resp_{secrets.token_hex(16)}"


def keep_response(response_id: str, *, project_id: int, session_id: int, position: int,
                  reply: dict[str, Any]) -> None:
    """The response's row: it answered the session's first ``position`` messages with ``reply``."""
    GatewayResponse.objects.create(pk=response_id, project_id=project_id, session_id=session_id, position=position,
                                   reply=reply)
