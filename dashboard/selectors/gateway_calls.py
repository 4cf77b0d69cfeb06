"""Reads of a session's gateway calls: the Calls table of the session page (newest first,
a page at a time) and the cost line of its header. A fixed number of queries per page,
whatever the number of calls."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Q, Sum

from ..models import GatewayCall, Session

#: Calls per page of the table.
CALLS_PAGE = 20
#: Endpoints whose provider tokens are not the prompt we estimated: a compaction's are the
#: summarizer's request, so a gap between the two would compare different things.
NO_GAP = frozenset({"responses/compact"})


def usd_text(value: Decimal | None) -> str:
    """A price as the table shows it; None (litellm has no price for the model) is "no price",
    never $0. Small amounts keep their significant digits: a call often costs a fraction of a cent."""
    if value is None:
        return "no price"
    if value == 0:
        return "$0"
    if value < Decimal("0.01"):
        return f"${value:.6f}".rstrip("0")
    return f"${value:,.2f}"


def gap_text(ours: int | None, theirs: int | None) -> str:
    """How far our estimate was from the provider's count, relative to the provider's."""
    if ours is None or not theirs:
        return "–"
    pct = (ours - theirs) / theirs * 100
    return f"{pct:+.1f}%"


@dataclass(frozen=True)
class CallRow:
    pk: int
    created_at: datetime
    endpoint: str
    model: str
    status_code: int
    run_id: int | None
    estimated: int | None
    provider_prompt: int | None
    provider_completion: int | None
    gap: str
    cost: str
    priced: bool
    upstream_ms: int | None
    overhead_ms: int | None


@dataclass(frozen=True)
class CallsPage:
    rows: list[CallRow]
    older: int | None     # the ``calls_before`` of the next (older) page
    first_page: bool


def calls_page(session: Session, before: int | None = None, limit: int = CALLS_PAGE) -> CallsPage:
    """The calls older than call ``before`` (the newest when None), newest first. One query."""
    qs = GatewayCall.objects.filter(session_id=session.pk)
    if before is not None:
        qs = qs.filter(pk__lt=before)
    found = list(qs.order_by("-id")[:limit + 1])
    rows = [CallRow(pk=c.pk, created_at=c.created_at, endpoint=c.endpoint, model=c.model, status_code=c.status_code,
                    run_id=c.run_id, estimated=c.estimated_prompt_tokens, provider_prompt=c.provider_prompt_tokens,
                    provider_completion=c.provider_completion_tokens,
                    gap="–" if c.endpoint in NO_GAP else gap_text(c.estimated_prompt_tokens, c.provider_prompt_tokens), cost=usd_text(c.cost_usd),
                    priced=c.cost_usd is not None, upstream_ms=c.upstream_ms, overhead_ms=c.overhead_ms)
            for c in found[:limit]]
    return CallsPage(rows=rows, older=rows[-1].pk if len(found) > limit else None, first_page=before is None)


@dataclass(frozen=True)
class CallsCost:
    calls: int
    cost: str         # the total of the priced calls
    unpriced: int     # calls with provider tokens but no price


def calls_cost(session: Session) -> CallsCost | None:
    """The session's gateway calls and what they cost, or None when it has none. One query."""
    agg = GatewayCall.objects.filter(session_id=session.pk).aggregate(
        calls=Count("id"), cost=Sum("cost_usd"),
        unpriced=Count("id", filter=Q(cost_usd__isnull=True) & (Q(provider_prompt_tokens__gt=0)
                                                                | Q(provider_completion_tokens__gt=0))))
    if not agg["calls"]:
        return None
    total = agg["cost"]
    return CallsCost(calls=agg["calls"], cost=usd_text(total) if total is not None else "no price",
                     unpriced=agg["unpriced"])
