"""A pool process killed while it waits for a job no longer hangs a filesystem-broker worker.

Without the event loop, billiard's pool processes share one job pipe guarded by one lock,
and the idle process holds that lock while it waits. Killed then, it left the lock held for
ever: the replacements blocked on it and the worker never executed another task (the
pool-kill drill's "runs still unfinished", reproduced here every time before the fix).
A real ``celery worker`` on the filesystem broker; nothing is mocked."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from dashboard.models import CompactionRun
from dashboard.pool_lock import OwnedLock
from dashboard.services.runs import request_run
from tests.service.helpers import wait_for
from tests.service.test_fault_drills import new_session

FINAL = ("succeeded", "skipped", "failed")


def _finished(run_id: int) -> bool:
    return CompactionRun.objects.get(pk=run_id).status in FINAL


@pytest.mark.slow
def test_a_run_is_executed_after_both_idle_pool_processes_were_killed(start_worker, live_api):
    worker = start_worker("filesystem", concurrency=2)
    first = request_run(new_session(live_api, tag="a"), reason="before the kills").pk
    wait_for(lambda: _finished(first), timeout=30, what="the first run")
    time.sleep(2)  # both processes idle: one of them waits for a job holding the queue's lock
    killed = worker.pool_pids()
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(worker.pool_pids()) == 2 and not set(worker.pool_pids()) & set(killed), timeout=20,
             what="the replacement pool processes")
    after = request_run(new_session(live_api, tag="b"), reason="after the kills").pk
    wait_for(lambda: _finished(after), timeout=40, what=f"the run after the kills\n{worker.tail()}")
    assert "died holding the job queue's lock; released it" in worker.tail()


def _hold_and_die(lock: OwnedLock) -> None:
    lock.acquire()
    os._exit(0)  # dies holding it, as a process killed mid-wait does


def test_the_lock_a_dead_process_held_is_released_and_a_live_holder_keeps_it():
    ctx = multiprocessing.get_context("fork")
    lock = OwnedLock(ctx)
    child = ctx.Process(target=_hold_and_die, args=(lock,))
    child.start()
    child.join(10)
    assert not lock.acquire(timeout=0.1), "the dead process still holds it"
    assert lock.free_if_held_by_dead(alive={os.getpid()}) == child.pid
    assert lock.acquire(timeout=1)
    assert lock.free_if_held_by_dead(alive={os.getpid()}) is None  # held by a live process: kept
    assert not lock.acquire(timeout=0.1)
    lock.release()
