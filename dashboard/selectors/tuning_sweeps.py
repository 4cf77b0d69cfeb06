"""Reads of threshold sweeps for the tuning page: the session's latest sweep, and its points
as the sweep chart draws them."""
from __future__ import annotations

from typing import Any

from ..models import Session, TuningSweep
from ..services.tuning_sweeps import SWEEP_KINDS


def latest_sweep(session: Session) -> TuningSweep | None:
    return TuningSweep.objects.filter(session_id=session.pk).order_by("-pk").first()


def sweep_label(sweep: TuningSweep) -> str:
    return SWEEP_KINDS.get(sweep.parameter, (sweep.parameter, sweep.parameter))[1]


def sweep_chart(sweep: TuningSweep) -> dict[str, Any]:
    """x: the trigger settings; what is sent (tokens, dollars) and what is kept (recall and
    retention, as shares); ``current``: the policy's own setting, marked on the chart."""
    points = list(sweep.points or [])
    return {
        "kind": sweep.parameter, "x_label": sweep_label(sweep), "current": sweep.current,
        "x": [p["value"] for p in points],
        "tokens_sent": [p["tokens_sent"] for p in points],
        "cost_usd": [p["cost_usd"] for p in points],
        "recall": [p["recall"] for p in points],
        "retention": [p["retention"] for p in points],
    }


def sweep_rows(sweep: TuningSweep) -> list[dict[str, Any]]:
    """The points as table rows, the policy's own setting flagged."""
    return [{**p, "is_current": sweep.current is not None and p["value"] == sweep.current} for p in sweep.points or []]
