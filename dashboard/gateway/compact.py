"""The project's policy before the model call.

When the session's trigger fires, tool-output clearing is due, or the live context no
longer fits the model's usable window, the gateway compacts before forwarding: it executes
the session's pending run (one a background worker has not started yet) or a new one, in
this process, through the same run machinery as every other run (runs, events, archive).
A run another worker is executing is waited for. When nothing is due, the live context,
as the last run left it, is forwarded as it is.

A request may bring dotted overrides of the session's policy (Anthropic's
``context_management`` edits): they decide whether a compaction is due and shape the run
this request starts. A run already queued (by the previous reply) keeps its own policy."""
from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from compaction import Policy
from compaction.windows import resolve_window, usable_window

from ..models import CompactionRun, RunStatus, Session, TriggerKind
from ..services.runs import execute
from ..services.runs.request import force_run, pending_run, request_run
from ..services.triggers import check_trigger, clearing_due, trigger_state
from .errors import GatewayError


def _usable(policy: Policy) -> int:
    window, _src = resolve_window(policy)
    return usable_window(window, policy.reserved_output_tokens)


def _due(session: Session, policy: Policy) -> tuple[str | None, bool]:
    """(why a compaction is due or None, whether it must be forced: over the window)."""
    window, _src = resolve_window(policy)
    usable = usable_window(window, policy.reserved_output_tokens)
    if session.context_total > usable:
        return f"gateway: the context ({session.context_total} tokens) is over the usable window ({usable})", True
    fired = check_trigger(session, policy)
    if fired.fired:
        return f"gateway: {fired.reason}", False
    if clearing_due(policy, trigger_state(session, policy)):
        return "gateway: tool-output clearing threshold passed", False
    return None, False


def _wait(run_id: int) -> None:
    deadline = time.monotonic() + settings.GATEWAY_COMPACTION_WAIT
    while time.monotonic() < deadline:
        status = CompactionRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        if status is None or CompactionRun(status=status).is_final:
            return
        time.sleep(0.05)


def before_call(session: Session, policy: Policy,
                overrides: dict[str, Any] | None = None) -> tuple[Session, CompactionRun | None]:
    """Compact when due; returns the session as it now is and the run that changed or tried
    to change it (None when nothing ran or the run found nothing to do). Raises GatewayError
    when the context still does not fit the window. ``policy``: the session's effective
    policy, as the caller read it (the request's overrides are applied here)."""
    ran: CompactionRun | None = None
    effective = policy.with_overrides(overrides) if overrides else policy
    for _attempt in range(2):
        why, force = _due(session, effective)
        if why is None or (_attempt and not force):
            # A second run only when the first compacted an older snapshot (a run another
            # worker was executing) and the context is still over the window.
            break
        # The session's pending run goes first (a newer one would queue behind it).
        run = pending_run(session) or request_run(session, trigger=TriggerKind.AUTO, force=force, reason=why,
                                                     overrides=overrides or None)
        state = execute(run.pk)
        if state in ("busy", "running_elsewhere"):
            _wait(run.pk)
        run = CompactionRun.objects.get(pk=run.pk)
        session = Session.objects.get(pk=session.pk)
        if run.status != RunStatus.SKIPPED:
            ran = run
    usable = _usable(effective)
    if session.context_total > usable:
        raise GatewayError(400, f"the context is {session.context_total} tokens after compaction, over the "
                                f"model's usable window of {usable} tokens; the project's policy cannot bring it "
                                f"under (see run {ran.pk if ran else 'none'})", code="context_length_exceeded",
                           param="messages")
    return session, ran


def compact_now(session: Session, reason: str) -> tuple[Session, CompactionRun]:
    """A forced compaction of the session's live context (``POST /v1/responses/compact``),
    executed here through the run machinery; an automatic run still pending goes first, so
    the forced one compacts what it left. Returns the session as it now is and the run,
    whatever it came to (a run with nothing to compact is skipped)."""
    ahead = pending_run(session)
    if ahead is not None and not ahead.force and execute(ahead.pk) in ("busy", "running_elsewhere"):
        _wait(ahead.pk)
    run, _created = force_run(session, trigger=TriggerKind.API, reason=reason)
    if execute(run.pk) in ("busy", "running_elsewhere"):
        _wait(run.pk)
    return Session.objects.get(pk=session.pk), CompactionRun.objects.get(pk=run.pk)
