"""Reads of the sessions list: search, filters, sort and keyset pages, each row with how
close the session is to its trigger, its tokens saved and what its import said about it.
A gateway session shows the identity its client gave, and the sessions forked from it are
listed under it (grouped under the session their fork tree started from), not as rows of
their own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F, Q
from django.db.models.functions import Coalesce, Lower

from compaction.triggers import evaluate

from ..models import Project, Session
from ..services.sessions import trigger_state
from .effective_policies import over_threshold_q, policies_by_combo, policy_for
from .gateway_sessions import Fork, Identity, fork_trees, gateway_row, identity_of
from .import_metadata import MetadataView, metadata_view
from .list_filters import ListFilters, session_filter
from .pagination import keyset_page
from .threshold_ratio import threshold_ratio

#: Sessions per page of the list.
SESSIONS_PAGE = 25

#: Sort names of the URL -> what they order on. "saved" is what the live context no longer
#: holds of the history: the tokens each model call sends less than with no compaction.
SESSION_SORTS = {
    "created": F("id"),
    "title": Lower("title"),
    "messages": F("message_count"),
    "context": F("context_total"),
    "total": F("history_total"),
    "saved": F("history_total") - F("context_total"),
    "compactions": F("compaction_count"),
    "activity": Coalesce("last_message_at", "created_at"),
}
#: The ratio to the trigger is sortable too; it is built per project (see threshold_ratio).
SORT_NAMES = (*SESSION_SORTS, "threshold")
DEFAULT_SORT = "-created"


@dataclass(frozen=True)
class SessionRow:
    session: Session
    over: bool
    reason: str
    policy: str
    ratio: float
    saved: int
    meta: MetadataView
    identity: Identity | None = None  # a gateway session's
    forks: tuple[Fork, ...] = ()


@dataclass(frozen=True)
class SessionsPage:
    rows: list[SessionRow]
    next_cursor: str | None
    prev_cursor: str | None


def sessions_page(project: Project, filters: ListFilters, *, cursor: str | None = None,
                  prev: str | None = None, limit: int = SESSIONS_PAGE) -> SessionsPage:
    """One page in the filters' sort order (newest first by default). ``cursor`` pages
    forward, ``prev`` back (opaque tokens holding the sort value and id at the page edge).
    Raises ServiceError on a damaged cursor."""
    policies = policies_by_combo(project)
    # forks are listed under the session their tree started from (a fork whose root was
    # deleted is a row of its own)
    qs = (Session.objects.filter(session_filter(project, filters, policies), gateway__fork_root__isnull=True)
          .select_related("policy", "gateway"))
    q = filters.q
    if q:
        match = Q(title__icontains=q) | Q(external_id__icontains=q)
        if q.isdigit():
            match |= Q(pk=int(q))
        qs = qs.filter(match)
    if filters.compacted:
        qs = qs.filter(compaction_count__gt=0)
    if filters.over:
        qs = qs.filter(over_threshold_q(policies))
    sort = filters.sort or DEFAULT_SORT
    name = sort.lstrip("-")
    key: Any = threshold_ratio(policies) if name == "threshold" else SESSION_SORTS.get(name, F("id"))
    qs = qs.annotate(sort_key=key, ratio=threshold_ratio(policies), saved=F("history_total") - F("context_total"))
    found = keyset_page(qs, "sort_key", descending=sort.startswith("-"), cursor=cursor, prev=prev,
                        limit=limit)
    rows = []
    trees = fork_trees(s.pk for s in found.items if gateway_row(s) is not None)
    for s in found.items:
        policy = policies.get((s.model, s.policy_id)) or policy_for(project, s.model, s.policy)
        fired = evaluate(policy.trigger, trigger_state(s, policy))
        gw = gateway_row(s)
        rows.append(SessionRow(session=s, over=fired.fired, reason=fired.reason, policy=policy.name,
                               ratio=float(s.ratio or 0.0), saved=max(0, int(s.saved)), meta=metadata_view(s),
                               identity=identity_of(gw, s) if gw is not None else None,
                               forks=tuple(trees.get(s.pk, ()))))
    return SessionsPage(rows=rows, next_cursor=found.next_cursor, prev_cursor=found.prev_cursor)
