"""Trigger checks the service runs on stored running totals (no session read)."""
from __future__ import annotations

from datetime import datetime

from compaction.policy import Policy
from compaction.reduction.pipeline import clearing_due as _engine_clearing_due
from compaction.triggers import ConditionResult, TriggerState, evaluate
from compaction.windows import resolve_window

from ..models import Session
from .policies import effective_policy


def clearing_due(policy: Policy, state: TriggerState) -> bool:
    """Whether a write should schedule a run for tool-output clearing: the engine's check on
    the stored totals, threshold only (the every-call passes run inside every run anyway)."""
    return _engine_clearing_due(policy.reduction, state.context_tokens, state.usable_window, every_call_passes=False)


def overflow_due(state: TriggerState) -> bool:
    """Whether the stored context would not fit the usable window: the engine's overflow
    guard compacts it in the run whatever the trigger says, so a write schedules one."""
    return state.context_tokens > state.usable_window


def trigger_state(session: Session, policy: Policy, last_message_at: datetime | None = None) -> TriggerState:
    """The session's stored running totals as the engine's trigger input (no recount)."""
    window, _src = resolve_window(policy)
    last = last_message_at if last_message_at is not None else session.last_message_at
    return TriggerState(context_tokens=session.context_total, messages=session.context_messages,
                        tokens_since_summary=session.tokens_since_summary,
                        messages_since_summary=session.messages_since_summary,
                        last_message_at=last.timestamp() if last else None, window=window,
                        reserved_output_tokens=policy.reserved_output_tokens)


def check_trigger(session: Session, policy: Policy | None = None) -> ConditionResult:
    """Whether the session's trigger fires now (its effective policy unless one is given)."""
    if policy is None:
        policy, _ = effective_policy(session)
    return evaluate(policy.trigger, trigger_state(session, policy))
