"""A daemon thread that proves an execution is alive: it calls ``beat`` every
RUN_HEARTBEAT_INTERVAL seconds until stopped, or until ``beat`` says the execution lost
its claim. Runs (``runs/execute.Heartbeat``) and tuning jobs (``job_heartbeat.JobHeartbeat``)
beat this way; the recovery loop queues again whatever stops beating."""
from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connection

from .request import is_eager

log = logging.getLogger("dashboard.jobs")


class BeatThread:
    """Subclasses say what one beat writes (``beat``, False once the claim is gone) and what
    it is called in logs (``label``). Use ``start``/``stop`` or ``with``."""

    label = "job"

    def beat(self) -> bool:
        raise NotImplementedError

    def __init__(self) -> None:
        self.interval = settings.RUN_HEARTBEAT_INTERVAL
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> BeatThread:
        # Inline execution (tests, CELERY_TASK_ALWAYS_EAGER): the caller's thread is the only
        # one executing, so no heartbeat; a second connection could not see its transaction.
        if self.interval > 0 and not is_eager():
            self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{self.label}", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    if not self.beat():
                        return  # ended, cancelled or taken by another execution: nothing to keep alive
                except Exception:  # noqa: BLE001 - a missed beat is retried on the next tick
                    log.warning("heartbeat of %s failed", self.label, exc_info=True)
                    # The next beat on a new connection: one the server dropped stays broken in
                    # this thread, and an execution whose beats all fail is taken for lost.
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> BeatThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
