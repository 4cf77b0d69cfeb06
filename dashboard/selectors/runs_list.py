"""Reads of the runs list: the runs of every session of a project, with the sessions
list's filters, sortable columns and keyset pages."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F, Q
from django.db.models.functions import Coalesce, Lower

from ..models import CompactionRun, Project
from .effective_policies import policies_by_combo
from .list_filters import ListFilters, run_filter
from .pagination import keyset_page

#: Runs per page of the list.
RUNS_PAGE = 50

RUN_SORTS = {
    "created": F("id"),
    "session": Lower("session__title"),
    "trigger": F("trigger"),
    "status": F("status"),
    "duration": Coalesce("duration_ms", -1),
}
DEFAULT_SORT = "-created"


@dataclass(frozen=True)
class RunRow:
    run: CompactionRun
    tokens_before: int | None
    tokens_after: int | None
    retention: float | None

    @property
    def saved(self) -> int | None:
        if self.tokens_before is None or self.tokens_after is None:
            return None
        return self.tokens_before - self.tokens_after


@dataclass(frozen=True)
class RunsPage:
    rows: list[RunRow]
    next_cursor: str | None
    prev_cursor: str | None


def _total(tokens: Any) -> int | None:
    return int(tokens.get("total", 0)) if isinstance(tokens, dict) else None


def retention_score(retention: Any) -> float | None:
    """The run's retention score over the identifiers later messages referenced (None
    when the run evicted nothing to score)."""
    if not isinstance(retention, dict):
        return None
    score = (retention.get("referenced") or {}).get("score")
    return float(score) if isinstance(score, int | float) else None


def runs_page(project: Project, filters: ListFilters, *, cursor: str | None = None, prev: str | None = None,
              limit: int | None = None) -> RunsPage:
    """One page of runs in the filters' sort order (newest first by default). Raises
    ServiceError on a damaged cursor."""
    policies = policies_by_combo(project) if filters.near else {}
    qs = (CompactionRun.objects.filter(run_filter(project, filters, policies)).select_related("session", "policy")
          .only("id", "session__id", "session__title", "session__external_id", "session__model", "trigger", "status",
                "force", "created_at", "duration_ms", "tokens_before", "tokens_after", "retention", "error_kind",
                "policy__name", "model", "reason"))
    if filters.q:
        match = Q(session__title__icontains=filters.q) | Q(session__external_id__icontains=filters.q)
        if filters.q.isdigit():
            match |= Q(pk=int(filters.q)) | Q(session_id=int(filters.q))
        qs = qs.filter(match)
    sort = filters.sort or DEFAULT_SORT
    qs = qs.annotate(sort_key=RUN_SORTS.get(sort.lstrip("-"), F("id")))
    found = keyset_page(qs, "sort_key", descending=sort.startswith("-"), cursor=cursor, prev=prev,
                        limit=limit or RUNS_PAGE)
    rows = [RunRow(run=r, tokens_before=_total(r.tokens_before), tokens_after=_total(r.tokens_after),
                   retention=retention_score(r.retention)) for r in found.items]
    return RunsPage(rows=rows, next_cursor=found.next_cursor, prev_cursor=found.prev_cursor)
