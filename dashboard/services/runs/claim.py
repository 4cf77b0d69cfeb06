"""Claiming a run: exactly one execution at a time takes a queued run (or one whose worker
was lost) and the session's run slot, and snapshots the live context it will compact."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from django.db import transaction

from ...models import CompactionRun, RunEvent, RunStatus, Session, SessionContext
from ..common import batched_writes, lock_row
from .commit import finish_locked

# claimed: this execution holds the run; any other word says why it does not:
#   done: already finished; running_elsewhere: another worker executes it (fresh heartbeat);
#   busy: another run holds the session, or an older run of it is queued (this one stays
#   queued); missing: the run or its session was deleted.
ClaimState = Literal["claimed", "done", "busy", "running_elsewhere", "missing"]


@dataclass
class Claim:
    state: ClaimState
    run: CompactionRun | None = None
    token: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    last_message_at: float | None = None
    parent_request: dict[str, Any] | None = None  # what GET .../context served last (cache-safe requests)
    branches: dict[str, Any] | None = None        # the stored branch summaries


def claim(run_id: int) -> Claim:
    head = CompactionRun.objects.filter(pk=run_id).values("session_id").first()
    if head is None:
        return Claim("missing")
    with transaction.atomic():
        session = lock_row(Session, head["session_id"])
        run = lock_row(CompactionRun, run_id)
        if not isinstance(session, Session) or not isinstance(run, CompactionRun):
            return Claim("missing")
        if run.is_final:
            return Claim("done", run)
        if run.status == RunStatus.RUNNING and run.heartbeat_fresh(settings.RUN_STALE_AFTER):
            return Claim("running_elsewhere", run)
        holder = session.active_run_id
        if holder is not None and holder != run.pk:
            other = CompactionRun.objects.filter(pk=holder).values("status").first()
            if other is not None and other["status"] == RunStatus.RUNNING:
                return Claim("busy", run)
            # the slot points at a run that is not executing (finished or deleted): take it
        if run.status == RunStatus.QUEUED and CompactionRun.objects.filter(
                session_id=session.pk, status=RunStatus.QUEUED, pk__lt=run.pk).exists():
            # First come, first served: an older queued run goes first (the run that
            # finishes next, or the recovery loop, enqueues it).
            return Claim("busy", run)
        if run.deliveries >= settings.RUN_MAX_DELIVERIES:
            finish_locked(session, run, "failed", error=(
                f"gave up after {run.deliveries} executions that did not finish (worker lost or hard time "
                f"limit); the session is unchanged"), error_kind="worker_lost")
            return Claim("done", run)
        # rendered (~1 MB for 500 messages) is read only when the served list is kept by
        # reference to it (served_messages then loads it; the row is locked meanwhile)
        ctx = SessionContext.objects.select_for_update().defer("rendered").get(session_id=session.pk)
        items = ctx.load_items()
        parent = None
        served = ctx.served_messages()
        if served:
            parent = {"messages": json.loads(served)}
            if session.tools:
                parent["tools"] = list(session.tools)
        # The claim's writes go to PostgreSQL as one round trip (nothing above reads them).
        with batched_writes():
            token = run.mark_running(snapshot_messages=len(items), snapshot_version=session.context_version,
                                     detail={"messages": len(items), "tokens": session.context_total},
                                     snapshot_position=session.message_count)
            session.hold_run(run.pk)
            RunEvent.record(run.pk, "started", {"snapshot_messages": len(items),
                                                "context_version": session.context_version,
                                                "delivery": run.deliveries}, run.deliveries)
        return Claim("claimed", run, token, items, list(session.tools or []),
                     session.last_message_at.timestamp() if session.last_message_at else None,
                     parent, ctx.branch_summaries or {})
