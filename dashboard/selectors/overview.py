"""Reads of the project overview ("is compaction working?"): one function per widget.

Each widget reads what runs and sessions already store, in a fixed number of queries
whatever the number of sessions or runs (tests/pages/test_overview.py counts them). A
figure that is not stored per run (needed-context recall is computed on a run's page, from
the messages after it) is reported as not measured instead of being computed here.

Tokens saved: every succeeded run removed ``tokens_before - tokens_after`` from its
session's live context, so each later model call of that session sends that much less
than it would with no compaction; the sum over runs is what one model call of every
session saves now. Dollars price those tokens at the input price of the session's model
in litellm's model table; a model the table does not know is named, not guessed.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Case, Count, F, FloatField, Max, Q, Sum, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from compaction.figures import recall as pooled_recall
from compaction.windows import price_per_token

from ..models import CompactionRun, GatewaySession, Project, RunStatus, Session, TriggerKind
from .continuous_tuning import TuningNews, latest_tuning, tuning_news
from .effective_policies import policies_by_combo
from .runs_list import retention_score
from .threshold_ratio import NEAR_FRACTION, threshold_ratio

#: Days the compactions-per-day chart covers, today included.
CHART_DAYS = 30
#: Rows of the "closest to threshold" and "most expensive" tables.
TOP_SESSIONS = 5
#: Retention score buckets: (label, lower bound inclusive); the last bucket includes 1.0.
RETENTION_BUCKETS = (("0–20%", 0.0), ("20–40%", 0.2), ("40–60%", 0.4), ("60–80%", 0.6), ("80–100%", 0.8))


@dataclass(frozen=True)
class Savings:
    runs: int
    tokens: int
    dollars: float
    priced_tokens: int
    unpriced: dict[str, int] = field(default_factory=dict)  # model ("" = none recorded) -> tokens not priced


def _total(tokens: Any) -> int:
    return int(tokens.get("total", 0)) if isinstance(tokens, dict) else 0


def savings(project: Project) -> Savings:
    """Tokens and dollars saved per model call against no compaction: 1 query."""
    rows = CompactionRun.objects.filter(project=project, status=RunStatus.SUCCEEDED).values_list(
        "tokens_before", "tokens_after", "session__model")
    by_model: Counter[str] = Counter()
    runs = 0
    for before, after, model in rows:
        runs += 1
        by_model[model or ""] += max(0, _total(before) - _total(after))
    dollars, priced, unpriced = 0.0, 0, {}
    for model, tokens in sorted(by_model.items()):
        price = price_per_token(model)
        if price is None:
            unpriced[model] = tokens
        else:
            dollars += tokens * price[0]
            priced += tokens
    return Savings(runs=runs, tokens=sum(by_model.values()), dollars=dollars, priced_tokens=priced, unpriced=unpriced)


@dataclass(frozen=True)
class DayCounts:
    day: date
    succeeded: int
    failed: int
    skipped: int


def runs_per_day(project: Project, days: int = CHART_DAYS) -> list[DayCounts]:
    """Finished runs per day over the last ``days`` days, every day listed: 1 query."""
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, time.min))
    counts: dict[date, Counter[str]] = defaultdict(Counter)
    for row in (CompactionRun.objects.filter(project=project, created_at__gte=start)
                .annotate(day=TruncDate("created_at")).values("day", "status").annotate(n=Count("id"))):
        counts[row["day"]][row["status"]] += row["n"]
    out = []
    for k in range(days):
        day = first + timedelta(days=k)
        c = counts.get(day, Counter())
        out.append(DayCounts(day, c[RunStatus.SUCCEEDED], c[RunStatus.FAILED], c[RunStatus.SKIPPED]))
    return out


def chart_data(days: list[DayCounts]) -> dict[str, Any]:
    """The per-day chart's data for uPlot: x in seconds (UTC midnight of each day)."""
    epoch = date(1970, 1, 1)
    return {"x": [(d.day - epoch).days * 86400 for d in days], "succeeded": [d.succeeded for d in days],
            "failed": [d.failed for d in days]}


@dataclass(frozen=True)
class TriggerStatusTable:
    statuses: list[str]
    rows: list[tuple[str, list[int], int]]  # trigger, count per status, row total
    totals: list[int]
    total: int


def runs_by_trigger_and_status(project: Project) -> TriggerStatusTable:
    """Run counts per trigger kind and status: 1 query."""
    counts: Counter[tuple[str, str]] = Counter()
    for row in CompactionRun.objects.filter(project=project).values("trigger", "status").annotate(n=Count("id")):
        counts[(row["trigger"], row["status"])] = row["n"]
    statuses = [s.value for s in RunStatus]
    rows = []
    for trigger in [t.value for t in TriggerKind]:
        per = [counts[(trigger, s)] for s in statuses]
        rows.append((trigger, per, sum(per)))
    totals = [sum(counts[(t, s)] for t in TriggerKind) for s in statuses]
    return TriggerStatusTable(statuses=statuses, rows=rows, totals=totals, total=sum(totals))


@dataclass(frozen=True)
class RetentionDistribution:
    buckets: list[tuple[str, int]]
    scored: int
    not_scored: int
    mean: float | None


def retention_distribution(project: Project) -> RetentionDistribution:
    """Succeeded runs by retention score (identifiers later messages referenced that the
    new context still holds): 1 query."""
    counts = [0] * len(RETENTION_BUCKETS)
    scores = []
    not_scored = 0
    for retention in CompactionRun.objects.filter(project=project, status=RunStatus.SUCCEEDED).values_list(
            "retention", flat=True):
        score = retention_score(retention)
        if score is None:
            not_scored += 1
            continue
        scores.append(score)
        index = max(k for k, (_label, low) in enumerate(RETENTION_BUCKETS) if score >= low)
        counts[index] += 1
    return RetentionDistribution(buckets=[(label, n) for (label, _low), n in zip(RETENTION_BUCKETS, counts, strict=True)],
                                 scored=len(scores), not_scored=not_scored,
                                 mean=sum(scores) / len(scores) if scores else None)


def _bucketed(scores: list[float]) -> list[tuple[str, int]]:
    counts = [0] * len(RETENTION_BUCKETS)
    for score in scores:
        counts[max(k for k, (_label, low) in enumerate(RETENTION_BUCKETS) if score >= low)] += 1
    return [(label, n) for (label, _low), n in zip(RETENTION_BUCKETS, counts, strict=True)]


@dataclass(frozen=True)
class RecallDistribution:
    buckets: list[tuple[str, int]]
    measured: int      # succeeded runs whose recall is kept (services.run_recall)
    not_measured: int  # the agent has not answered after them yet, or nothing needed earlier history
    #: Kept over needed across the measured runs (compaction.figures.recall, as the tuning
    #: page and ``compare`` pool calls), so a run that needed many identifiers weighs more.
    pooled: float | None


def recall_distribution(project: Project) -> RecallDistribution:
    """Succeeded runs by needed-context recall: of the identifiers the agent's next message
    used from earlier history, the share the run's result still held. Read from what runs
    keep (``result["recall"]``): 1 query."""
    scores: list[float] = []
    not_measured = kept = needed = 0
    for result in CompactionRun.objects.filter(project=project, status=RunStatus.SUCCEEDED).values_list(
            "result", flat=True):
        recall = (result or {}).get("recall") if isinstance(result, dict) else None
        value = recall.get("recall") if isinstance(recall, dict) else None
        if isinstance(recall, dict) and isinstance(value, (int, float)):
            scores.append(float(value))
            kept += int(recall.get("kept") or 0)
            needed += int(recall.get("needed") or 0)
        else:
            not_measured += 1
    return RecallDistribution(buckets=_bucketed(scores), measured=len(scores), not_measured=not_measured,
                              pooled=pooled_recall(kept, needed))


@dataclass(frozen=True)
class NearRow:
    session: Session
    ratio: float


def closest_to_threshold(project: Project, limit: int = TOP_SESSIONS) -> list[NearRow]:
    """The sessions with the highest share of their trigger: 3 queries (2 build the
    policies every session runs under, 1 rates and orders them)."""
    policies = policies_by_combo(project)
    if not policies:
        return []
    qs = (Session.objects.filter(project=project).annotate(ratio=threshold_ratio(policies))
          .filter(ratio__gt=0).order_by("-ratio", "-id")
          .only("id", "title", "external_id", "model", "context_total", "compaction_count")[:limit])
    return [NearRow(session=s, ratio=float(s.ratio)) for s in qs]


@dataclass(frozen=True)
class CostRow:
    session: Session
    dollars: float


@dataclass(frozen=True)
class Expensive:
    rows: list[CostRow]
    unpriced_models: list[str]


def most_expensive(project: Project, limit: int = TOP_SESSIONS) -> Expensive:
    """The sessions whose next model call costs most (live context x the input price of
    the session's model): 2 queries (the models, then the ordered sessions)."""
    models = list(Session.objects.filter(project=project).values_list("model", flat=True).distinct())
    prices = {m: price_per_token(m) for m in sorted(models)}
    priced = {m: p[0] for m, p in prices.items() if p is not None}
    unpriced = sorted(m or "(no model)" for m, p in prices.items() if p is None)
    if not priced:
        return Expensive(rows=[], unpriced_models=unpriced)
    price = Case(*[When(model=m, then=Value(p)) for m, p in priced.items()], output_field=FloatField())
    qs = (Session.objects.filter(project=project, model__in=list(priced)).annotate(cost=F("context_total") * price)
          .order_by("-cost", "-id").only("id", "title", "external_id", "model", "context_total")[:limit])
    return Expensive(rows=[CostRow(session=s, dollars=float(s.cost)) for s in qs], unpriced_models=unpriced)


@dataclass(frozen=True)
class GatewayTraffic:
    sessions: int
    messages: int
    forks: int
    last_seen: datetime | None


def gateway_traffic(project: Project) -> GatewayTraffic | None:
    """Sessions the OpenAI-compatible gateway recognised, or None when it saw none: 1 query."""
    agg = GatewaySession.objects.filter(project=project).aggregate(
        sessions=Count("id"), messages=Sum("stored_count"), forks=Count("id", filter=Q(forked_from__isnull=False)),
        last_seen=Max("updated_at"))
    if not agg["sessions"]:
        return None
    return GatewayTraffic(sessions=agg["sessions"], messages=agg["messages"] or 0, forks=agg["forks"],
                          last_seen=agg["last_seen"])


@dataclass(frozen=True)
class Overview:
    savings: Savings
    days: list[DayCounts]
    chart: dict[str, Any]
    by_trigger: TriggerStatusTable
    retention: RetentionDistribution
    recall: RecallDistribution
    closest: list[NearRow]
    expensive: Expensive
    gateway: GatewayTraffic | None
    #: The latest continuous tuning pass (services.continuous_tuning), None before the first.
    tuning: TuningNews | None = None
    near_fraction: float = NEAR_FRACTION


def overview(project: Project) -> Overview:
    days = runs_per_day(project)
    return Overview(savings=savings(project), days=days, chart=chart_data(days),
                    by_trigger=runs_by_trigger_and_status(project), retention=retention_distribution(project),
                    recall=recall_distribution(project), closest=closest_to_threshold(project), expensive=most_expensive(project),
                    gateway=gateway_traffic(project), tuning=continuous_tuning(project))


def continuous_tuning(project: Project) -> TuningNews | None:
    """What the latest continuous tuning pass found: 1 query."""
    latest = latest_tuning(project)
    return tuning_news(latest) if latest is not None else None
