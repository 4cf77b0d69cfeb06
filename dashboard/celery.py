"""The Celery app. Tasks live in dashboard/tasks.py and are thin wrappers over services.

Workers: ``celery -A dashboard worker -l info`` on any machine that reaches the database
and the broker. Each worker also runs the recovery loop (runs whose worker died are
queued again; started from dashboard/tasks.py), so no beat process is needed.

This module imports nothing else of the project but dashboard.brokers (which makes
``filesystem://`` the hardened embedded broker): the services use the app to send tasks.
"""
from __future__ import annotations

import os
from typing import Any

import kombu.pools
from celery import Celery, signals
from django.conf import settings

from .brokers import install as install_safe_filesystem_broker
from .pool_lock import install as install_kill_safe_pool

install_safe_filesystem_broker()
install_kill_safe_pool()  # a pool process killed while idle no longer hangs the worker (pool_lock.py)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["dashboard"])


@signals.worker_init.connect
def _preload(**_: Any) -> None:
    # Import litellm once in the parent process, before the pool forks: each child
    # then starts its first summary without a multi-second import.
    if os.environ.get("COMPACTION_PRELOAD_LITELLM", "1") != "0":
        try:
            from compaction._env import litellm  # noqa: PLC0415  (the engine costs ~0.2 s; only workers preload it)

            litellm()
        except Exception:  # noqa: BLE001 - preloading is an optimisation only
            pass
    _ = settings.DATABASES


def use_broker(url: str, transport_options: dict[str, Any]) -> None:
    """Point this (publishing) process at another broker and drop cached connections.

    For tests and benchmarks that start their own worker on a broker of their own. kombu
    keeps connection and producer pools per broker URL, process-wide; the filesystem
    transport's folders are options, so a pool from an earlier broker would still write
    into that broker's folders."""
    app.conf.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.CELERY_BROKER_URL = url
    app.conf.CELERY_BROKER_TRANSPORT_OPTIONS = transport_options
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
