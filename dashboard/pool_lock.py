"""The prefork pool's job queue, safe against a pool process killed while it waits for a job.

Without the event loop (the embedded filesystem broker cannot drive it), billiard's pool hands
jobs to its processes through one shared pipe guarded by one process-shared lock, and an idle
process waits for its next job *holding that lock*. A process killed then (OOM killer, a hard
time limit, ``kill -9``) leaves the lock held for ever: every other process, and every
replacement, blocks on it, and the worker, still alive and receiving tasks, never executes
another one. billiard releases the lock nowhere.

Here the lock records which process holds it, and the pool's supervisor, when it replaces
dead processes, releases the lock a dead process still holds. (A process killed in the few
instructions between taking the lock and recording itself is not covered; one killed halfway
through reading a job would leave the pipe mid-message, which no lock can repair.) The Redis
broker's event-loop pool gives each process a pipe of its own and needs none of this."""
from __future__ import annotations

import logging
import os
from typing import Any

from billiard.pool import Pool  # type: ignore[import-untyped]
from celery.concurrency import prefork

log = logging.getLogger("dashboard.workers")


class OwnedLock:
    """A process-shared lock that remembers the pid holding it."""

    def __init__(self, ctx: Any):
        self._lock = ctx.Lock()
        self._owner = ctx.Value("i", 0, lock=False)

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        got = self._lock.acquire(block, timeout) if timeout is not None else self._lock.acquire(block)
        if got:
            self._owner.value = os.getpid()
        return bool(got)

    def release(self) -> None:
        self._owner.value = 0
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def free_if_held_by_dead(self, alive: set[int]) -> int | None:
        """Release the lock when the process holding it is not among ``alive``; its pid, or None."""
        owner = self._owner.value
        if not owner or owner in alive:
            return None
        self._owner.value = 0
        try:
            self._lock.release()
        except ValueError:  # released meanwhile
            return None
        return owner


class KillSafePool(Pool):
    """billiard's pool whose job queue survives a process killed while waiting for a job."""

    def _setup_queues(self) -> None:
        super()._setup_queues()
        self._inqueue._rlock = OwnedLock(self._ctx)

    def _maintain_pool(self) -> None:
        super()._maintain_pool()
        lock = getattr(self._inqueue, "_rlock", None)
        if isinstance(lock, OwnedLock):
            alive = {w.pid for w in self._pool if w.exitcode is None}
            dead = lock.free_if_held_by_dead(alive)
            if dead is not None:
                log.warning("pool process %s died holding the job queue's lock; released it", dead)


def install() -> None:
    """Use KillSafePool wherever celery builds a prefork pool without the event loop."""


    prefork.TaskPool.BlockingPool = KillSafePool  # type: ignore[assignment]
