"""Threshold sweeps: the answer to "which threshold should I use?".

A sweep replays one policy over the stored history of one session, or of every session of
the project, once per trigger setting from low to high (a share of the usable window, or
a token count, spread up to the largest context the sessions reach), and keeps per setting what it sends (tokens, dollars) against what it keeps
(needed-context recall, retention). The replays are the tuning preview's
(``compaction.preview``: offline summarizer, replay clock), so the same sweep twice gives
the same points.

``request_sweep`` stores the row and hands it to the Celery task ``SWEEP_TASK`` (reached by
name; services never import ``dashboard.tasks``); ``run_sweep`` is what the task runs.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from compaction import CompactionError, PolicyError
from compaction.figures import ReplayFigures
from compaction.policy import Policy
from compaction.preview import PolicyPreview, preview_policy
from compaction.windows import resolve_window, usable_window

from ..celery import app as celery_app
from ..models import Session, StoredMessage, SweepStatus, TuningSweep
from . import Invalid, workers
from .common import now
from .job_heartbeat import JobHeartbeat, claim_job, holds
from .policies import apply_service_defaults
from .runs import no_worker
from .runs.request import ENQUEUE_ERRORS, is_eager, no_worker_wait_left, worker_silence

log = logging.getLogger("dashboard.sweeps")

SWEEP_TASK = "dashboard.run_tuning_sweep"
SweepKind = Literal["window_fraction", "tokens"]
SweepScope = Literal["session", "project"]
#: What each swept trigger kind sets, and how the page names it.
SWEEP_KINDS: dict[str, tuple[str, str]] = {
    "window_fraction": ("fraction", "share of the usable window"),
    "tokens": ("threshold", "context tokens"),
}
SCOPES = ("session", "project")
#: Where the settings a sweep tries lie, as shares of the largest context the swept sessions
#: reach without compaction (at most the usable window): ten points, low to high.
SHARES = tuple(round(0.15 + i * 0.8 / 9, 3) for i in range(10))


def sweep_values(kind: str, policy: Policy, largest: int) -> list[float]:
    """The trigger settings a sweep of ``kind`` tries for ``policy`` (with its service
    defaults, so the window is the session's), low to high, with the policy's own setting
    among them when its trigger is of that kind. ``largest`` is the largest history of the
    swept sessions in tokens: settings above it would never fire, so the points spread over
    the range where they make a difference."""
    window, _source = resolve_window(policy)
    usable = usable_window(window, policy.reserved_output_tokens)
    top = min(usable, largest) if largest > 0 else usable
    if kind == "window_fraction":
        values = [min(1.0, max(0.001, round(share * top / usable, 3))) for share in SHARES]
    else:
        step = 1000 if top >= 20_000 else 100  # round numbers on the axis and in the table
        values = [float(max(step, round(share * top / step) * step)) for share in SHARES]
    mine = current_setting(kind, policy)
    if mine is not None:
        values.append(mine)
    return sorted(set(values))


def current_setting(kind: str, policy: Policy) -> float | None:
    """The policy's own value for a sweep of ``kind`` (None when its trigger is another kind)."""
    trigger = policy.trigger
    if getattr(trigger, "kind", None) != kind:
        return None
    return float(getattr(trigger, SWEEP_KINDS[kind][0]))


def with_trigger(policy: Policy, kind: str, value: float) -> Policy:
    key = SWEEP_KINDS[kind][0]
    return policy.with_overrides({"trigger": {"kind": kind, key: int(value) if kind == "tokens" else value}})


def sweep_sessions(sweep: TuningSweep) -> list[Session]:
    """The sessions a sweep replays, in a fixed order (the points do not depend on it, but the
    progress does)."""
    if sweep.scope == "project":
        return list(Session.objects.filter(project_id=sweep.project_id).order_by("pk"))
    return [sweep.session]


def request_sweep(session: Session, policy: Policy, *, kind: str, scope: str) -> TuningSweep:
    """Store a sweep of ``policy``'s trigger over ``session`` (or its whole project) and queue
    it. Raises Invalid naming the problem; nothing is stored then."""
    if kind not in SWEEP_KINDS:
        raise Invalid(f"sweep: unknown trigger kind {kind!r}; choose one of {', '.join(SWEEP_KINDS)}")
    if scope not in SCOPES:
        raise Invalid(f"sweep: unknown scope {scope!r}; choose one of {', '.join(SCOPES)}")
    effective = apply_service_defaults(policy, session)
    swept = Session.objects.filter(project_id=session.project_id) if scope == "project" else Session.objects.filter(
        pk=session.pk)
    sizes = list(swept.values_list("history_total", flat=True))
    values = sweep_values(kind, effective, max(sizes, default=0))
    sessions = len(sizes)
    with transaction.atomic():
        sweep = TuningSweep.objects.create(
            project_id=session.project_id, session=session, scope=scope, parameter=kind, values=values,
            current=current_setting(kind, effective), policy=policy.to_json(), total=len(values) * sessions)
        transaction.on_commit(lambda: enqueue_sweep(sweep.pk))
    return sweep


def enqueue_sweep(sweep_id: int) -> None:
    task = celery_app.tasks[SWEEP_TASK]
    if is_eager():
        task.apply_async(args=[sweep_id])
        return
    try:
        task.apply_async(args=[sweep_id], retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2})
    except ENQUEUE_ERRORS as exc:
        log.warning("sweep %s could not be queued: %s", sweep_id, exc)
        TuningSweep.objects.filter(pk=sweep_id).update(
            status=SweepStatus.FAILED, error=f"could not queue the sweep (broker unavailable: {type(exc).__name__})",
            finished_at=now())
        return
    silent = worker_silence()
    if silent is not None:
        # As a run does (services.runs.request.enqueue): with no live worker, this process
        # runs the sweep itself once RUN_NO_WORKER_WAIT has passed with still none in sight.
        no_worker.watch(sweep_id, no_worker_wait_left(silent), sweep_if_no_worker)


def sweep_if_no_worker(sweep_id: int) -> None:
    """The no-worker wait of a sweep ran out: if it is still queued and still no worker
    beats, run it here, in a thread of its own (a sweep replays whole sessions, so it must not
    hold up the runs waiting on the same watch)."""
    if workers.silent_for(fresh=True) is None:
        return
    if not TuningSweep.objects.filter(pk=sweep_id, status=SweepStatus.QUEUED).exists():
        return
    no_worker.note_gave_up(True)
    log.warning("sweep %s waited RUN_NO_WORKER_WAIT=%ss with no live worker; running it here", sweep_id,
                settings.RUN_NO_WORKER_WAIT)
    threading.Thread(target=_run_here, args=(sweep_id,), name=f"sweep-{sweep_id}", daemon=True).start()


def _run_here(sweep_id: int) -> None:
    try:
        run_sweep(sweep_id)  # claims it first: a worker that took it meanwhile keeps it
    finally:
        connection.close()


@dataclass
class _Point:
    """The figures of one trigger setting, summed over the sessions (compaction.figures, the
    same numbers the preview shows for that setting)."""

    value: float
    figures: ReplayFigures = field(default_factory=ReplayFigures)
    errors: list[str] = field(default_factory=list)

    def add(self, p: PolicyPreview) -> None:
        self.figures = self.figures + p.figures

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, **self.figures.to_dict(), "errors": self.errors}


def _raws(session: Session) -> list[dict[str, Any]]:
    rows = StoredMessage.objects.filter(session_id=session.pk).order_by("position").values_list("raw", flat=True)
    return cast(list[dict[str, Any]], list(rows))


def run_sweep(sweep_id: int) -> str:
    """Replay the sweep's policy at each setting over its sessions, counting progress after
    each replay; store the points (or the error) when done. A finished sweep is left alone."""
    attempt = claim_job(TuningSweep, sweep_id, SweepStatus.QUEUED, SweepStatus.RUNNING, done=0)
    if attempt is None:
        return "skipped"
    sweep = TuningSweep.objects.get(pk=sweep_id)
    mine = holds(TuningSweep, sweep_id, attempt, SweepStatus.RUNNING)
    try:
        with JobHeartbeat(TuningSweep, sweep_id, attempt, SweepStatus.RUNNING):
            points = sweep_points(sweep, sweep_sessions(sweep))
    except Exception as exc:  # noqa: BLE001 - the row must say why the sweep stopped
        log.exception("sweep %s failed", sweep_id)
        mine.update(status=SweepStatus.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=now())
        return "failed"
    # only while this execution still holds the sweep (not queued again meanwhile as lost)
    if not mine.update(status=SweepStatus.DONE, points=points, done=F("total"), finished_at=now()):
        return "superseded"
    return "done"


def sweep_points(sweep: TuningSweep, sessions: list[Session]) -> list[dict[str, Any]]:
    """The sweep's points over ``sessions`` (one replay per setting and session, counted in
    ``done`` as it goes). Continuous tuning calls it with its own sample of sessions."""
    base = Policy.load(sweep.policy)
    points = [_Point(value=float(v)) for v in sweep.values]
    for session in sessions:
        raws = _raws(session)
        effective = apply_service_defaults(base, session)
        for point in points:
            try:
                policy = with_trigger(effective, sweep.parameter, point.value)
                # under PREVIEW_SESSION_ID, not the session's key: the same history gives the same points
                point.add(preview_policy(raws, policy, tools=session.tools or None,
                                         fallback_model=session.model or None))
            except (PolicyError, CompactionError, ValueError) as exc:
                point.errors.append(f"session {session.pk}: {exc}")
            TuningSweep.objects.filter(pk=sweep.pk).update(done=F("done") + 1)
    return [p.to_dict() for p in points]
