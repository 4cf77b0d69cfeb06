"""Keeping what ``POST /v1/responses`` answered (``GatewayResponse``), so a later request can
continue it by ``previous_response_id``."""
from __future__ import annotations

import secrets
from typing import Any

from ..models import GatewayResponse
from .common import insert_row


def new_response_id() -> str:
    """A response's id, chosen before the answer starts (a stream names it first). Random:
    it names a response, it is no part of a context, an archive or a report."""
    return f"resp_{secrets.token_hex(16)}"


def keep_response(response_id: str, *, project_id: int, session_id: int, position: int,
                  reply: dict[str, Any]) -> None:
    """The response's row: it answered the session's first ``position`` messages with ``reply``.
    Written before the answer is sent, and committed as any write is (not relaxed): a client
    that continues by ``previous_response_id`` sends nothing of the history again, so the
    row, and the placement committed before it, must be there for its next request, which
    may come as soon as the answer is read (from another worker). One plain INSERT: the
    row's values prepared by their fields, as ``save()`` would, without its machinery."""
    insert_row(GatewayResponse(pk=response_id, project_id=project_id, session_id=session_id, position=position,
                               reply=reply))
