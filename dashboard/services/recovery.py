"""The recovery loop each worker runs in a background thread (started on worker_ready):
every RUN_RECOVERY_INTERVAL seconds it calls runs.recover() and prunes the filesystem
broker's processed/ folder. Several workers running it at once is fine."""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection

log = logging.getLogger("dashboard.recovery")

_thread: threading.Thread | None = None
_stop = threading.Event()


def recover_once() -> dict:
    from .runs import recover  # noqa: PLC0415

    close_old_connections()
    counts = recover()
    if any(counts.values()):
        log.info("recovery: %s", counts)
    prune_processed()
    return counts


def prune_processed(max_age: float = 3600.0) -> int:
    opts = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    folder = opts.get("processed_folder")
    if not folder or not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return 0
    cutoff = time.time() - max_age
    removed = 0
    for p in Path(folder).glob("*.msg"):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def _loop() -> None:
    interval = settings.RUN_RECOVERY_INTERVAL
    try:
        while True:
            try:
                recover_once()
            except Exception:  # noqa: BLE001 - keep the loop alive; the next tick retries
                log.warning("recovery pass failed", exc_info=True)
            if _stop.wait(interval):
                return
    finally:
        connection.close()


def start_recovery_loop() -> None:
    global _thread
    if settings.RUN_RECOVERY_INTERVAL <= 0 or (_thread is not None and _thread.is_alive()):
        return
    _stop.clear()
    _thread = threading.Thread(target=_loop, name="compaction-recovery", daemon=True)
    _thread.start()


def stop_recovery_loop() -> None:
    _stop.set()
