"""The filters the sessions list and the runs list share, read from the URL.

Both lists take the same query parameters (``model``, ``policy``, ``since``, ``until``,
``failures``, ``near``, plus ``q`` and ``sort``), so a filtered sessions list and the runs of
those sessions are one link apart. A value that cannot be read is dropped and named in
``problems`` (the page says so) rather than silently widening or emptying the list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.http import QueryDict
from django.utils import timezone

from ..models import CompactionRun, Project, RunStatus, Session, StoredPolicy
from .effective_policies import PoliciesByCombo
from .threshold_ratio import NEAR_FRACTION, threshold_ratio

#: Longest search text read from the URL.
MAX_QUERY = 200


@dataclass(frozen=True)
class ListFilters:
    q: str = ""
    model: str = ""
    policy: int | None = None
    since: date | None = None
    until: date | None = None
    failures: bool = False
    near: bool = False
    compacted: bool = False
    over: bool = False
    sort: str = ""
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def any(self) -> bool:
        return bool(self.q or self.model or self.policy or self.since or self.until or self.failures
                    or self.near or self.compacted or self.over)


def _date(raw: str, name: str, problems: list[str]) -> date | None:
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        problems.append(f"{name}: '{raw[:30]}' is not a date (YYYY-MM-DD); ignored")
        return None


def parse_filters(params: QueryDict, sorts: tuple[str, ...], default_sort: str) -> ListFilters:
    """The filters in ``params``; ``sort`` is one of ``sorts``, optionally prefixed by '-'."""
    problems: list[str] = []
    policy: int | None = None
    raw_policy = params.get("policy", "")
    if raw_policy:
        if raw_policy.isdigit():
            policy = int(raw_policy)
        else:
            problems.append(f"policy: '{raw_policy[:30]}' is not a policy id; ignored")
    sort = params.get("sort", "") or default_sort
    if sort.lstrip("-") not in sorts:
        problems.append(f"sort: '{sort[:30]}' is not a column of this list; sorted by {default_sort.lstrip('-')}")
        sort = default_sort
    since = _date(params.get("since", ""), "since", problems)
    until = _date(params.get("until", ""), "until", problems)
    if since and until and since > until:
        problems.append("since is after until: the dates were swapped")
        since, until = until, since
    return ListFilters(
        q=params.get("q", "")[:MAX_QUERY].strip(), model=params.get("model", "")[:200], policy=policy,
        since=since, until=until, failures=params.get("failures") == "1", near=params.get("near") == "1",
        compacted=params.get("compacted") == "1", over=params.get("over") == "1", sort=sort,
        problems=tuple(problems))


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def session_filter(project: Project, filters: ListFilters, policies: PoliciesByCombo) -> Q:
    """The sessions of ``project`` the filters keep (the search, ``compacted`` and ``over``
    are the sessions list's own and are applied there)."""
    out = Q(project=project)
    if filters.model:
        out &= Q(model=filters.model)
    if filters.policy:
        # A session without its own policy runs under the project's active one.
        by_policy = Q(policy_id=filters.policy)
        if filters.policy == project.active_policy_id:
            by_policy |= Q(policy__isnull=True)
        out &= by_policy
    if filters.since:
        out &= Q(created_at__gte=_day_start(filters.since))
    if filters.until:
        out &= Q(created_at__lt=_day_start(filters.until + timedelta(days=1)))
    if filters.failures:
        out &= Q(Exists(CompactionRun.objects.filter(session=OuterRef("pk"), status=RunStatus.FAILED)))
    if filters.near:
        out &= Q(pk__in=Session.objects.filter(project=project).annotate(ratio=threshold_ratio(policies))
                 .filter(ratio__gte=NEAR_FRACTION).values("pk"))
    return out


def run_filter(project: Project, filters: ListFilters, policies: PoliciesByCombo) -> Q:
    """The runs of ``project`` the filters keep: ``policy`` is the policy the run used, the
    dates are when it was requested, ``failures`` keeps failed runs, ``model`` and ``near``
    look at the run's session."""
    out = Q(project=project)
    if filters.model:
        out &= Q(session__model=filters.model)
    if filters.policy:
        out &= Q(policy_id=filters.policy)
    if filters.since:
        out &= Q(created_at__gte=_day_start(filters.since))
    if filters.until:
        out &= Q(created_at__lt=_day_start(filters.until + timedelta(days=1)))
    if filters.failures:
        out &= Q(status=RunStatus.FAILED)
    if filters.near:
        out &= Q(session__in=Session.objects.filter(project=project).annotate(ratio=threshold_ratio(policies))
                 .filter(ratio__gte=NEAR_FRACTION).values("pk"))
    return out


def filter_choices(project: Project) -> dict[str, Any]:
    """The models and policies the filter menus offer: 2 queries."""
    models = list(Session.objects.filter(project=project).exclude(model="").order_by("model")
                  .values_list("model", flat=True).distinct())
    policies = list(StoredPolicy.objects.filter(project=project).order_by("name").values("id", "name"))
    return {"models": models, "policies": policies}

