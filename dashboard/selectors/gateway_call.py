"""Reads of one gateway call's inspector page: its figures (tokens, cost, where the time
went), what the client sent (its fields, and its messages as the session stores them), the
body sent upstream rebuilt from its pieces (``services/call_bodies``), and the reply."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Sum

from ..models import GatewayCall, GatewayCallBody, StoredMessage
from ..services.call_bodies import rebuilt
from .gateway_calls import NO_GAP, gap_text, usd_text

#: Bodies larger than this are offered as a download only (pretty-printing them would make
#: a page of many megabytes).
SHOWN_BYTES = 2 * 1024 * 1024
#: New messages of the client's request shown whole (the rest are counted).
NEW_SHOWN = 50

FORMATS = {"chat": "OpenAI chat completions", "anthropic": "Anthropic messages (converted to the chat form on arrival)",
           "responses": "OpenAI Responses items (converted to the chat form on arrival)",
           "compact": "OpenAI Responses items (converted to the chat form on arrival)"}


@dataclass(frozen=True)
class NewMessage:
    position: int
    role: str
    tokens: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class Sent:
    exact: bool
    to: str
    size: int
    sha256: str
    verified: bool
    pretty: str | None     # None when too large to show (or not rebuilt)
    messages: int | None   # elements of the forwarded array


@dataclass(frozen=True)
class CallPage:
    call: GatewayCall
    cost: str
    priced: bool
    gap: str
    total_ms: int | None
    upstream_share: int | None   # percent of the total the upstream took
    kept: bool                   # whether the call's body is still kept
    retention_days: float
    client_format: str
    client_fields: str | None    # pretty JSON
    messages: int
    added: int
    first: int                   # history position of the client's first message
    tokens: int | None           # of the client's messages, as stored
    new_tokens: int | None
    new: list[NewMessage]
    more_new: int                # new messages not shown
    sent: Sent | None
    reply: str | None            # pretty JSON


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _sent(body: GatewayCallBody) -> tuple[Sent | None, dict[str, Any] | None]:
    again = rebuilt(body)
    if body.sent_head is None:
        return None, again.client_fields
    pretty = messages = None
    if again.data is not None and again.verified and len(again.data) <= SHOWN_BYTES:
        parsed = json.loads(again.data)
        pretty = _pretty(parsed)
        for key in ("messages", "input"):
            if isinstance(parsed.get(key), list):
                messages = len(parsed[key])
                break
    return Sent(exact=body.sent_exact, to=body.sent_to, size=body.sent_bytes or 0, sha256=body.sent_sha256,
                verified=again.verified, pretty=pretty, messages=messages), again.client_fields


def call_page(call: GatewayCall) -> CallPage:
    """The page's reads: the body (one query), its pieces (one or two), the client's stored
    messages (two)."""
    body = GatewayCallBody.objects.filter(call_id=call.pk).first()
    total = (call.upstream_ms or 0) + (call.overhead_ms or 0) if call.overhead_ms is not None else None
    share = round(100 * (call.upstream_ms or 0) / total) if total else None
    common: dict[str, Any] = dict(call=call, cost=usd_text(call.cost_usd), priced=call.cost_usd is not None,
                  gap="–" if call.endpoint in NO_GAP else gap_text(call.estimated_prompt_tokens, call.provider_prompt_tokens),
                  total_ms=total, upstream_share=share, retention_days=float(settings.GATEWAY_CALL_BODY_DAYS))
    if body is None:
        return CallPage(**common, kept=False, client_format="", client_fields=None, messages=0, added=0, first=0,
                        tokens=None, new_tokens=None, new=[], more_new=0, sent=None, reply=None)
    sent, fields = _sent(body)
    client = body.client or {}
    count, added, upto = int(client.get("messages", 0)), int(client.get("added", 0)), int(client.get("upto", 0))
    first = max(upto - count, 0)
    stored = StoredMessage.objects.filter(session_id=call.session_id)
    tokens = stored.filter(position__gte=first, position__lt=upto).aggregate(n=Sum("tokens"))["n"]
    new_tokens = stored.filter(position__gte=upto - added, position__lt=upto).aggregate(n=Sum("tokens"))["n"]
    fresh = list(stored.filter(position__gte=upto - added, position__lt=upto).order_by("position")
                 .values_list("position", "role", "tokens", "raw")[:NEW_SHOWN]) if added else []
    return CallPage(**common, kept=True, client_format=FORMATS.get(client.get("format", ""), client.get("format", "")),
                    client_fields=_pretty(fields) if fields is not None else None, messages=count, added=added,
                    first=first, tokens=tokens, new_tokens=new_tokens,
                    new=[NewMessage(p, r, t, raw) for p, r, t, raw in fresh], more_new=max(added - len(fresh), 0), sent=sent,
                    reply=_pretty(body.reply) if body.reply is not None else None)


def upstream_bytes(call: GatewayCall) -> bytes | None:
    """The exact bytes the call sent upstream, or None when they are not kept (expired, or
    nothing was sent) or cannot be rebuilt as they were."""
    body = GatewayCallBody.objects.filter(call_id=call.pk).first()
    if body is None or body.sent_head is None:
        return None
    again = rebuilt(body)
    return again.data if again.verified else None
