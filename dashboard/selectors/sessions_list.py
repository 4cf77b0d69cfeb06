"""Reads of the sessions list: search, filters and cursor pages, each row with whether the
session is over its trigger now."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from compaction.triggers import evaluate

from ..models import Project, Session
from ..services.sessions import trigger_state
from .effective_policies import over_threshold_q, policies_by_combo, policy_for
from .pagination import decode_cursor, encode_cursor

#: Sessions per page of the list.
SESSIONS_PAGE = 25


@dataclass(frozen=True)
class SessionRow:
    session: Session
    over: bool
    reason: str
    policy: str


@dataclass(frozen=True)
class SessionsPage:
    rows: list[SessionRow]
    next_cursor: str | None
    prev_cursor: str | None


@dataclass(frozen=True)
class SessionFilters:
    q: str = ""
    compacted: bool = False
    over: bool = False


def sessions_page(project: Project, filters: SessionFilters, *, cursor: str | None = None,
                  prev: str | None = None, limit: int = SESSIONS_PAGE) -> SessionsPage:
    """Newest first. ``cursor`` pages to older sessions, ``prev`` back to newer ones
    (both opaque tokens holding the id at the page edge). Raises ServiceError on a bad cursor."""
    qs = Session.objects.filter(project=project).select_related("policy")
    q = filters.q.strip()
    if q:
        match = Q(title__icontains=q) | Q(external_id__icontains=q)
        if q.isdigit():
            match |= Q(pk=int(q))
        qs = qs.filter(match)
    if filters.compacted:
        qs = qs.filter(compaction_count__gt=0)
    policies = policies_by_combo(project)
    if filters.over:
        qs = qs.filter(over_threshold_q(policies))
    before, after = decode_cursor(cursor), decode_cursor(prev)
    if after is not None and before is None:
        items = list(qs.filter(pk__gt=after).order_by("id")[: limit + 1])
        more_newer = len(items) > limit
        items = list(reversed(items[:limit]))
        has_next, has_prev = True, more_newer
    else:
        if before is not None:
            qs = qs.filter(pk__lt=before)
        items = list(qs.order_by("-id")[: limit + 1])
        has_next = len(items) > limit
        items = items[:limit]
        has_prev = before is not None
    rows = []
    for s in items:
        policy = policies.get((s.model, s.policy_id)) or policy_for(project, s.model, s.policy)
        fired = evaluate(policy.trigger, trigger_state(s, policy))
        rows.append(SessionRow(session=s, over=fired.fired, reason=fired.reason, policy=policy.name))
    return SessionsPage(
        rows=rows,
        next_cursor=encode_cursor(items[-1].pk) if items and has_next else None,
        prev_cursor=encode_cursor(items[0].pk) if items and has_prev else None,
    )
