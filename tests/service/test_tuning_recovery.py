"""A tuning job whose worker process is killed mid-job (a hard time limit, an OOM kill, a
restart without a warm shutdown) is queued again by the recovery loop and finished once,
with the figures an undisturbed job gives; it used to stay "running" for ever. Real
`celery -A dashboard worker` processes on the filesystem broker."""
from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest

from compaction import Policy
from dashboard.models import (
    GridStatus,
    Session,
    SweepStatus,
    TuningGrid,
    TuningGridChunk,
    TuningSweep,
)
from dashboard.services import tuning_recovery
from dashboard.services.common import now
from dashboard.services.tuning_grids import request_grid
from dashboard.services.tuning_sweeps import request_sweep
from tests.service.helpers import chat, wait_for

POLICY = Policy.load({"name": "lost-job-test", "context_window": 8000, "reserved_output_tokens": 500,
                      "trigger": {"kind": "window_fraction", "fraction": 0.7}})


def new_session(live_api, turns: int) -> Session:
    r = live_api.post("/api/sessions", {"messages": chat(turns), "auto_compact": False})
    assert r.status_code == 201, r.content
    return Session.objects.get(pk=r.json()["session"]["id"])


def kill_pool_once_running(worker, running) -> None:
    """SIGKILL the worker's pool process once ``running()`` says the job is under way."""
    wait_for(running, timeout=120, interval=0.02, what="the job to start its replays")
    pids = worker.pool_pids()
    assert pids, worker.tail()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_sweep_whose_worker_process_is_killed_is_finished_by_another_with_the_same_points(start_worker, live_api):
    worker = start_worker("filesystem")
    session = new_session(live_api, turns=60)
    sweep = request_sweep(session, POLICY, kind="window_fraction", scope="session")
    kill_pool_once_running(worker, lambda: TuningSweep.objects.filter(pk=sweep.pk, status=SweepStatus.RUNNING,
                                                                      done__gte=1).exists())
    lost = wait_for(lambda: TuningSweep.objects.filter(pk=sweep.pk, status__in=("done", "failed")).first(),
                    timeout=180, what="the sweep to be finished after its process was killed")
    assert lost.status == "done", lost.error
    assert lost.attempts == 2 and lost.done == lost.total
    # the same sweep, undisturbed
    again = request_sweep(session, POLICY, kind="window_fraction", scope="session")
    clean = wait_for(lambda: TuningSweep.objects.filter(pk=again.pk, status__in=("done", "failed")).first(),
                     timeout=180, what="the undisturbed sweep")
    assert clean.status == "done" and clean.attempts == 1
    assert lost.points == clean.points


@pytest.mark.slow
def test_a_grid_chunk_whose_worker_process_is_killed_is_replayed_and_counted_once(start_worker, live_api, settings):
    settings.TUNING_GRID_CHUNKS = 1  # the grid's split is made here, by the request
    worker = start_worker("filesystem")
    session = new_session(live_api, turns=60)

    def grid_of() -> TuningGrid:
        return request_grid(session, POLICY, x_param="window_fraction", y_param="keep_messages", columns=3, rows=2,
                            scope="session")

    grid = grid_of()
    kill_pool_once_running(worker, lambda: TuningGridChunk.objects.filter(grid=grid, status=GridStatus.RUNNING,
                                                                          done__gte=1).exists())
    lost = wait_for(lambda: TuningGrid.objects.filter(pk=grid.pk, status__in=("done", "failed")).first(),
                    timeout=180, what="the grid to be finished after its process was killed")
    assert lost.status == "done", lost.error
    assert lost.done == lost.total == 6, (lost.done, lost.total)  # each replay counted once
    assert TuningGridChunk.objects.get(grid=grid).attempts == 2
    clean_grid = grid_of()
    clean = wait_for(lambda: TuningGrid.objects.filter(pk=clean_grid.pk, status__in=("done", "failed")).first(),
                     timeout=180, what="the undisturbed grid")
    assert clean.status == "done" and lost.cells == clean.cells


def test_a_job_lost_as_often_as_run_max_deliveries_allows_fails_saying_so(api, settings,
                                                                           django_capture_on_commit_callbacks):
    """The recovery pass alone: a sweep and a grid whose executions all died are failed
    with the reason instead of being sent again for ever; a younger heartbeat is left alone."""
    settings.RUN_MAX_DELIVERIES = 2
    session = new_session(api, turns=3)
    with django_capture_on_commit_callbacks(execute=True):  # both finish here (eager)
        sweep = request_sweep(session, POLICY, kind="window_fraction", scope="session")
        grid = request_grid(session, POLICY, x_param="window_fraction", y_param="keep_messages", columns=2, rows=2,
                            scope="session")
    long_ago, just_now = now() - timedelta(seconds=60), now()
    TuningSweep.objects.filter(pk=sweep.pk).update(status=SweepStatus.RUNNING, attempts=2, heartbeat_at=long_ago)
    TuningGrid.objects.filter(pk=grid.pk).update(status=GridStatus.RUNNING)
    chunk = TuningGridChunk.objects.filter(grid=grid).first()
    TuningGridChunk.objects.filter(pk=chunk.pk).update(status=GridStatus.RUNNING, attempts=2, heartbeat_at=just_now)
    cutoff = now() - timedelta(seconds=10)
    assert tuning_recovery.recover_tuning_jobs(cutoff) == 0
    sweep.refresh_from_db()
    assert sweep.status == "failed"
    assert "worker lost 2 times" in sweep.error and "RUN_MAX_DELIVERIES=2" in sweep.error
    assert TuningGridChunk.objects.get(pk=chunk.pk).status == "running"  # its heartbeat is fresh
    TuningGridChunk.objects.filter(pk=chunk.pk).update(heartbeat_at=long_ago)
    assert tuning_recovery.recover_tuning_jobs(cutoff) == 0
    grid.refresh_from_db()
    assert grid.status == "failed" and "worker was lost 2 times" in grid.error
