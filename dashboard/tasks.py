"""Celery tasks: thin wrappers over dashboard.services.runs."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings


@shared_task(name="dashboard.run_compaction", acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             soft_time_limit=settings.RUN_SOFT_TIME_LIMIT, time_limit=settings.RUN_TIME_LIMIT)
def run_compaction(run_id: int) -> str:
    """Execute one compaction run. Idempotent: a run that is finished, or executing in
    another worker, is left alone; a run whose session is busy stays queued and is
    started by the run that holds the session when it finishes."""
    from .services.runs import execute  # noqa: PLC0415

    return execute(int(run_id))


@shared_task(name="dashboard.recover_runs", ignore_result=True)
def recover_runs() -> dict:
    from .services.recovery import recover_once  # noqa: PLC0415

    return recover_once()
