"""Worker liveness: each Celery worker's main process keeps one WorkerBeat row fresh.

Why a database row and not the broker: the database is the one thing every process of
the service shares whatever the broker (the filesystem broker has no broadcast a web
process could ask "who is there?"), a row costs one UPDATE every few seconds, and a page
or API read needs one indexed query to know when a worker was last seen. The beat comes
from a thread of the worker's main process (the one that consumes messages and replaces
pool processes), so it stops exactly when nothing would take a task any more.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max

from ..models import WorkerBeat
from .common import now
from .fork_guard import no_fork

log = logging.getLogger("dashboard.workers")

# The latest beat, read at most once a second per process (a runs list renders many rows).
_cache: tuple[float, datetime | None] = (0.0, None)
_cache_lock = threading.Lock()


def beat(name: str, pid: int | None = None) -> None:
    """Record that the worker ``name`` is alive now."""
    stamp = now()
    updated = WorkerBeat.objects.filter(name=name).update(seen_at=stamp, pid=pid or os.getpid())
    if not updated:
        WorkerBeat.objects.update_or_create(name=name, defaults={"pid": pid or os.getpid(), "seen_at": stamp,
                                                                 "started_at": stamp})


def forget(name: str) -> None:
    """A worker shutting down cleanly: it no longer counts as alive."""
    WorkerBeat.objects.filter(name=name).delete()


def last_seen(*, fresh: bool = False) -> datetime | None:
    """When any worker last beat (None: no worker ever did, or every one shut down)."""
    global _cache
    mono = time.monotonic()
    with _cache_lock:
        if not fresh and mono - _cache[0] < 1.0:
            return _cache[1]
    seen = WorkerBeat.objects.aggregate(latest=Max("seen_at"))["latest"]
    with _cache_lock:
        _cache = (mono, seen)
    return seen


def clear_cache() -> None:
    global _cache
    with _cache_lock:
        _cache = (0.0, None)


def silent_for(*, fresh: bool = False) -> float | None:
    """Seconds since a worker was last seen when none is alive now (beat within
    WORKER_LIVE_WITHIN); None while one is. ``inf`` when none was ever seen."""
    seen = last_seen(fresh=fresh)
    if seen is None:
        return float("inf")
    silent = (now() - seen).total_seconds()
    return silent if silent >= settings.WORKER_LIVE_WITHIN else None


def live_workers() -> int:
    cutoff = now() - timedelta(seconds=settings.WORKER_LIVE_WITHIN)
    return WorkerBeat.objects.filter(seen_at__gte=cutoff).count()


class BeatLoop:
    """The thread of a worker's main process that keeps its row fresh."""

    def __init__(self, name: str):
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> BeatLoop:
        interval = settings.WORKER_HEARTBEAT_INTERVAL
        if interval <= 0:
            return self
        self._thread = threading.Thread(target=self._loop, args=(interval,), name="worker-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _loop(self, interval: float) -> None:
        try:
            while True:
                # the pool forks from this process: not while this thread is in the driver
                with no_fork():
                    try:
                        beat(self.name)
                    except Exception:  # noqa: BLE001 - a missed beat is retried on the next tick
                        log.warning("worker heartbeat of %s failed", self.name, exc_info=True)
                        connection.close()
                if self._stop.wait(interval):
                    return
        finally:
            with no_fork():
                connection.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            forget(self.name)
        except Exception:  # noqa: BLE001 - the row then ages out after WORKER_LIVE_WITHIN
            log.warning("could not remove the heartbeat row of %s", self.name, exc_info=True)
        finally:
            connection.close()
