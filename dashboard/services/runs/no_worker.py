"""Runs sent while no worker is alive: one thread per process waits for their deadline and
then calls back (request.py executes the run inline if it is still queued and still no
worker beat). Runs that a worker takes in the meantime are left to it: the claim makes
sure a run executes once whoever gets there first."""
from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable

from django.db import connection

log = logging.getLogger("dashboard.runs")

_heap: list[tuple[float, int, Callable[[int], None]]] = []
_wake = threading.Condition()
_thread: threading.Thread | None = None
# Set once a wait ran out with no worker in sight; later runs of this process then do not
# wait again (cleared as soon as a worker is seen).
_gave_up = threading.Event()


def gave_up() -> bool:
    return _gave_up.is_set()


def note_gave_up(value: bool) -> None:
    if value:
        _gave_up.set()
    else:
        _gave_up.clear()


def watch(run_id: int, wait: float, on_timeout: Callable[[int], None]) -> None:
    """Call ``on_timeout(run_id)`` in the watch thread after ``wait`` seconds."""
    global _thread
    with _wake:
        heapq.heappush(_heap, (time.monotonic() + max(0.0, wait), run_id, on_timeout))
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_loop, name="no-worker-watch", daemon=True)
            _thread.start()
        _wake.notify()


def pending() -> list[int]:
    with _wake:
        return [run_id for _, run_id, _ in _heap]


def _loop() -> None:
    while True:
        with _wake:
            while not _heap or _heap[0][0] > time.monotonic():
                _wake.wait(timeout=(_heap[0][0] - time.monotonic()) if _heap else None)
            _deadline, run_id, on_timeout = heapq.heappop(_heap)
        try:
            on_timeout(run_id)
        except Exception:  # noqa: BLE001 - one run's fallback must not end the watch
            log.exception("fallback of run %s (no worker) failed", run_id)
        finally:
            connection.close()
