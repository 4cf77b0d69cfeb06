"""Reads of continuous tuning (``services.continuous_tuning``): the project's latest stored
pass as the overview says it ("policy X would send Y% fewer tokens at recall Z on last
week's N sessions"), and the evidence page behind that sentence."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction.policy import Policy
from compaction.recommend import setting_text

from ..models import ContinuousTuning, Project, Session, SweepStatus
from ..services.tuning_apply import applied_name
from .tuning_sweeps import sweep_rows


def latest_tuning(project: Project) -> ContinuousTuning | None:
    """The project's latest finished pass (a pass still running is not news yet): 1 query."""
    return (ContinuousTuning.objects.filter(project_id=project.pk, status__in=[SweepStatus.DONE, SweepStatus.FAILED])
            .select_related("sweep").order_by("-pk").first())


def period_text(days: float) -> str:
    """``last week's`` for 7 days, else ``the last N days'``."""
    return "last week's" if days == 7 else f"the last {days:g} day{'' if days == 1 else 's'}'"


@dataclass(frozen=True)
class TuningNews:
    """What the overview says about the latest pass."""

    tuning: ContinuousTuning
    #: The recommended policy's name as an apply would save it (None: no recommendation).
    policy_name: str | None
    #: The recommended trigger setting in words ("42%", "60,000 tokens").
    setting: str | None
    #: "fewer" / "more" / "" (no current setting of the swept kind to compare with).
    direction: str
    #: The share of tokens sent the recommendation saves (always positive; see direction).
    share: float | None
    period: str
    sessions: int
    is_current: bool
    can_apply: bool


def tuning_news(tuning: ContinuousTuning) -> TuningNews:
    sweep = tuning.sweep
    name = setting = None
    if sweep is not None and tuning.recommended is not None:
        setting = setting_text(sweep.parameter, tuning.recommended)
        name = applied_name(Policy.load(sweep.policy), sweep.parameter, tuning.recommended)
    saving = tuning.tokens_saving
    direction = "" if saving is None else ("fewer" if saving >= 0 else "more")
    is_current = tuning.recommended is not None and tuning.recommended == tuning.current
    return TuningNews(tuning=tuning, policy_name=name, setting=setting, direction=direction,
                      share=None if saving is None else abs(saving), period=period_text(tuning.window_days),
                      sessions=len(tuning.session_ids or []), is_current=is_current,
                      can_apply=sweep is not None and name is not None and not is_current)


@dataclass(frozen=True)
class Evidence:
    news: TuningNews
    sessions: list[Session]
    rows: list[dict[str, Any]]


def evidence(tuning: ContinuousTuning) -> Evidence:
    """The pass, the sessions it replayed (in its order) and its sweep's points: 3 queries."""
    by_id = Session.objects.only("id", "title", "external_id", "message_count", "history_total", "last_message_at",
                                 "created_at").in_bulk(tuning.session_ids or [])
    sessions = [by_id[i] for i in tuning.session_ids or [] if i in by_id]
    rows = sweep_rows(tuning.sweep) if tuning.sweep is not None else []
    return Evidence(news=tuning_news(tuning), sessions=sessions, rows=rows)
