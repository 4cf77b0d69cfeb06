"""Continuous tuning: each project's policy swept over its recent sessions on a schedule, the
answer stored for the overview ("policy X would send Y% fewer tokens at recall Z on last
week's N sessions"), and nothing changed without a click unless the operator opted into
auto-apply (``tuning_autoapply``: guarded steps, rollback).

Celery beat sends ``CONTINUOUS_TUNING_TASK`` on ``TUNING_SCHEDULE``; it queues one
``TUNE_PROJECT_TASK`` per project, which runs ``tune_project``.

The sample is deterministic, so the same sessions and settings give the same stored result:
the sessions active in the last ``TUNING_WINDOW_DAYS`` (last message, else import), most
recent first (ties by id), taken while their estimated replay time fits
``TUNING_TIME_BUDGET``. The estimate is context tokens replayed (history tokens x messages / 2
x settings tried) over ``TUNING_REPLAY_TOKENS_PER_SECOND``, not a clock, so a busy machine does not change which
sessions are used; the row keeps the seconds the pass really took, to calibrate the rate.
The most recent session is always taken, even alone over the budget.

The replays, figures and recommendation are the threshold sweep's (``tuning_sweeps``,
``compaction.figures``, ``compaction.recommend``): the points are stored in a ``TuningSweep``
with ``scope="recent"``, so the tuning page's apply and undo work on them.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.db.models.functions import Coalesce

from compaction.policy import Policy

from ..celery import app as celery_app
from ..models import ContinuousTuning, Project, Session, SweepStatus, TuningSweep
from ..schedules import CONTINUOUS_TUNING_TASK
from ..selectors.tuning_sweeps import sweep_recommendation
from . import tuning_autoapply
from .common import now
from .policies import apply_service_defaults, default_policy
from .runs.request import ENQUEUE_ERRORS, is_eager
from .tuning_sweeps import SWEEP_KINDS, current_setting, sweep_points, sweep_values

log = logging.getLogger("dashboard.tuning")

__all__ = ("CONTINUOUS_TUNING_TASK", "TUNE_PROJECT_TASK", "queue_projects", "tune_project")

TUNE_PROJECT_TASK = "dashboard.tune_project"
#: Scope of the sweeps continuous tuning stores (not every session of the project, not one).
RECENT_SCOPE = "recent"
#: The " · trigger 42%" an earlier apply appended to a policy's name (tuning_apply.applied_name).
_APPLIED_SUFFIX = re.compile(r"( · trigger [^·]+)+$")


def recent_sessions(project_id: int, days: float) -> QuerySet[Session]:
    """The project's sessions active in the last ``days`` days, most recent first."""
    since = now() - timedelta(days=days)
    return (Session.objects.filter(project_id=project_id)
            .annotate(active_at=Coalesce("last_message_at", "created_at"))
            .filter(active_at__gte=since).order_by("-active_at", "-pk"))


@dataclass(frozen=True)
class Sample:
    sessions: list[Session]
    estimated_seconds: float
    recent: int


def replay_tokens(session: Session) -> float:
    """The context tokens one replay of ``session`` goes through: every model call re-reads
    the context so far, about half the history on average (the replay time grows with it,
    not with the history alone: bench/continuous_tuning.py)."""
    return session.history_total * max(1, session.message_count) / 2


def sample_sessions(recent: list[Session], settings_tried: int, budget: float, rate: float) -> Sample:
    """The most recent sessions whose estimated replay time fits ``budget`` seconds (the
    first one always), in the order given."""
    chosen: list[Session] = []
    spent = 0.0
    for session in recent:
        cost = replay_tokens(session) * settings_tried / rate
        if chosen and spent + cost > budget:
            break
        chosen.append(session)
        spent += cost
    return Sample(chosen, spent, len(recent))


def base_policy(project: Project) -> Policy:
    """The project's policy as stored (before session defaults), named without the trigger
    an earlier apply appended, so a second apply does not stack a second suffix."""
    row = project.active_policy if project.active_policy_id else None
    policy = Policy.load(row.data) if row is not None else default_policy()
    name = _APPLIED_SUFFIX.sub("", policy.name)
    return policy.with_overrides({"name": name}) if name != policy.name else policy


def guarded_steps(kind: str, current: float | None, max_step: float) -> list[float]:
    """The settings one guarded step away from ``current`` (``TUNING_MAX_STEP`` of it either
    way), so the sweep always tries the step auto-apply may take."""
    if current is None:
        return []
    steps = [current * (1 - max_step), current * (1 + max_step)]
    if kind == "window_fraction":
        return [v for v in (round(s, 3) for s in steps) if 0.001 <= v <= 1.0 and v != current]
    return [float(v) for v in (round(s) for s in steps) if v >= 1 and v != current]


def queue_projects() -> int:
    """Queue one tuning pass per project (what the beat task does); how many were queued."""
    task = celery_app.tasks[TUNE_PROJECT_TASK]
    ids = list(Project.objects.order_by("pk").values_list("pk", flat=True))
    for project_id in ids:
        retry = {} if is_eager() else {"retry_policy": {"max_retries": 2, "interval_start": 0, "interval_step": 0.2}}
        try:
            task.apply_async(args=[project_id], **retry)
        except ENQUEUE_ERRORS as exc:
            log.warning("tuning of project %s could not be queued: %s", project_id, exc)
    return len(ids)


def tune_project(project_id: int) -> ContinuousTuning:
    """One pass over the project: roll back an auto-applied step whose live recall fell
    below the floor, sweep the recent sessions, store the result and, when opted in, take
    one guarded step."""
    project = Project.objects.select_related("active_policy").get(pk=project_id)
    tuning = ContinuousTuning.objects.create(
        project=project, window_days=settings.TUNING_WINDOW_DAYS, budget_seconds=settings.TUNING_TIME_BUDGET,
        recall_target=settings.TUNING_RECALL_TARGET)
    rolled_back = tuning_autoapply.roll_back_if_below_floor(project, tuning) if settings.TUNING_AUTO_APPLY else False
    started = time.monotonic()
    try:
        _sweep_recent(tuning, Project.objects.select_related("active_policy").get(pk=project_id))
    except Exception as exc:  # noqa: BLE001 - the row must say why the pass stopped
        log.exception("continuous tuning of project %s failed", project_id)
        tuning.status, tuning.error = SweepStatus.FAILED, f"{type(exc).__name__}: {exc}"
    tuning.elapsed_seconds = round(time.monotonic() - started, 3)
    tuning.finished_at = now()
    tuning.save()
    if settings.TUNING_AUTO_APPLY and not rolled_back and tuning.status == SweepStatus.DONE and tuning.sweep:
        tuning_autoapply.take_step(tuning, tuning.sweep)
    return tuning


def _sweep_recent(tuning: ContinuousTuning, project: Project) -> None:
    recent = list(recent_sessions(project.pk, tuning.window_days))
    if not recent:
        tuning.status = SweepStatus.DONE
        tuning.sentence = f"No session was active in the last {tuning.window_days:g} days"
        return
    base = base_policy(project)
    trigger_kind = getattr(base.trigger, "kind", None)
    kind = trigger_kind if trigger_kind in SWEEP_KINDS else "window_fraction"
    effective = apply_service_defaults(base, recent[0])
    current = current_setting(kind, effective)
    # The settings depend on the sample's largest session, and the sample on how many
    # settings there are: size the sample with the count (fixed), then place the settings.
    count = len(sweep_values(kind, effective, 0)) + len(guarded_steps(kind, current, settings.TUNING_MAX_STEP))
    sample = sample_sessions(recent, count, tuning.budget_seconds, settings.TUNING_REPLAY_TOKENS_PER_SECOND)
    largest = max(s.history_total for s in sample.sessions)
    values = sorted(set(sweep_values(kind, effective, largest) + guarded_steps(kind, current, settings.TUNING_MAX_STEP)))
    sweep = TuningSweep.objects.create(
        project=project, session=sample.sessions[0], scope=RECENT_SCOPE, parameter=kind, values=values,
        current=current, policy=base.to_json(), status=SweepStatus.RUNNING,
        total=len(values) * len(sample.sessions))
    tuning.sweep = sweep
    tuning.session_ids = [s.pk for s in sample.sessions]
    tuning.recent_sessions = sample.recent
    tuning.estimated_seconds = sample.estimated_seconds
    tuning.current = current
    tuning.save()
    points = sweep_points(sweep, sample.sessions)
    TuningSweep.objects.filter(pk=sweep.pk).update(status=SweepStatus.DONE, points=points, done=len(values) * len(
        sample.sessions), finished_at=now())
    sweep.refresh_from_db()
    _store_recommendation(tuning, sweep)
    tuning.status = SweepStatus.DONE


def _store_recommendation(tuning: ContinuousTuning, sweep: TuningSweep) -> None:
    rec = sweep_recommendation(sweep, tuning.recall_target)
    if rec is None:
        return
    tuning.sentence = rec.sentence
    if rec.choice is None:
        return
    tuning.recommended = rec.choice.value
    tuning.recall = rec.choice.figures.recall
    if rec.current is not None and rec.current.figures.tokens_sent:
        sent_now = rec.current.figures.tokens_sent
        tuning.tokens_saving = (sent_now - rec.choice.figures.tokens_sent) / sent_now
