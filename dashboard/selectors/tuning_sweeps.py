"""Reads of threshold sweeps for the tuning page: the session's latest sweep, and its points
as the sweep chart draws them."""
from __future__ import annotations

from typing import Any

from compaction.figures import ReplayFigures
from compaction.recommend import DEFAULT_RECALL_TARGET, Recommendation, SweepPoint, recommend

from ..models import Session, TuningSweep
from ..services.tuning_sweeps import SWEEP_KINDS


def latest_sweep(session: Session) -> TuningSweep | None:
    """The session's latest sweep from its tuning page (continuous tuning's sweeps, scope
    ``recent``, have a page of their own: views.continuous_tuning)."""
    return TuningSweep.objects.filter(session_id=session.pk).exclude(scope="recent").order_by("-pk").first()


def sweep_label(sweep: TuningSweep) -> str:
    return SWEEP_KINDS.get(sweep.parameter, (sweep.parameter, sweep.parameter))[1]


def point_figures(point: dict[str, Any]) -> ReplayFigures:
    """A stored sweep point as figures. Points stored before the sweep priced the cache kept
    only the uncached cost (under ``cost_usd``); they show it as such."""
    if "cost_without_cache_usd" not in point:
        point = {**point, "cost_usd": None, "cost_without_cache_usd": point.get("cost_usd")}
    return ReplayFigures.from_dict(point)


def sweep_chart(sweep: TuningSweep) -> dict[str, Any]:
    """x: the trigger settings; what is sent (tokens, dollars) and what is kept (recall and
    retention, as shares); ``current``: the policy's own setting, marked on the chart."""
    rows = sweep_rows(sweep)
    return {
        "kind": sweep.parameter, "x_label": sweep_label(sweep), "current": sweep.current,
        "x": [p["value"] for p in rows],
        "tokens_sent": [p["tokens_sent"] for p in rows],
        "cost_usd": [p["cost_usd"] for p in rows],
        "recall": [p["recall"] for p in rows],
        "retention": [p["retention"] for p in rows],
    }


def sweep_rows(sweep: TuningSweep) -> list[dict[str, Any]]:
    """The points as table rows (recall and retention derived from the stored counts, as the
    preview derives them), the policy's own setting flagged."""
    rows = []
    for point in sweep.points or []:
        figures = point_figures(point)
        rows.append({**figures.to_dict(), "value": point["value"], "errors": point.get("errors", []),
                     "recall": figures.recall, "retention": figures.retention, "figures": figures,
                     "is_current": sweep.current is not None and point["value"] == sweep.current})
    return rows


def recall_target(raw: str | None) -> float:
    """The recall target field (a percentage, default DEFAULT_RECALL_TARGET) as a share.
    Raises ValueError naming the problem."""
    if raw is None or str(raw).strip() == "":
        return DEFAULT_RECALL_TARGET
    try:
        percent = float(str(raw).strip().rstrip("%"))
    except ValueError:
        raise ValueError(f"recall target: {raw!r} is not a number (a percentage, e.g. 98)") from None
    if not 0 <= percent <= 100:
        raise ValueError(f"recall target: {raw} is outside 0–100 %")
    return percent / 100


def sweep_recommendation(sweep: TuningSweep, target: float = DEFAULT_RECALL_TARGET) -> Recommendation | None:
    """The recommended setting of a finished sweep (compaction.recommend); None before."""
    if not sweep.finished or not sweep.points or sweep.parameter not in SWEEP_KINDS:
        return None
    points = [SweepPoint(float(p["value"]), point_figures(p)) for p in sweep.points if not p.get("errors")]
    return recommend(points, kind=sweep.parameter, current=sweep.current, target=target)
