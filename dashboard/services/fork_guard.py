"""No fork while a thread of this process is inside the database driver.

A worker's main process runs threads that use the database (the recovery loop, the
worker heartbeat) and forks its pool processes from another thread (at start, and again
whenever a pool process dies: a hard time limit, an OOM kill, a crash). A fork copies the
locks the driver holds at that instant but not the thread that would release them: SQLite
keeps process-wide mutexes, and a pool process forked while the recovery thread was inside
a SQLite call hangs on its first query, forever. Measured here with the two threads
reconnecting on every pass (DB_CONN_MAX_AGE=0): 70 of 300 forked processes hung without
this guard, 0 with it (tests/service/test_fork_guard.py). A hung pool process holds the
task it was given.

Threads wrap their database work in :func:`no_fork`; a fork waits until the wrapped work
ends (at most one pass of the thread's loop) and never starts inside it."""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()


def _before_fork() -> None:
    _lock.acquire()


def _after_fork_in_parent() -> None:
    _lock.release()


def _after_fork_in_child() -> None:
    # The child inherits the lock held (by the forking thread, now gone): a new one.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


@contextmanager
def no_fork() -> Iterator[None]:
    """Hold off forks of this process while the block runs."""
    lock = _lock
    with lock:
        yield
