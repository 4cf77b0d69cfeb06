"""Trigger conditions as the dashboard reads them: a filter on stored totals, words, form choices.

All three are written once over the engine's condition classes (compaction.conditions); the
only dashboard knowledge here is which Session column stores each running number.
"""
from __future__ import annotations

import operator
from datetime import timedelta
from functools import reduce

from django.db.models import Q

from compaction.conditions import (
    LEAF_CONDITIONS,
    AgeCondition,
    AnyCondition,
    Condition,
    GroupCondition,
    StateField,
    kind_of,
)
from compaction.windows import usable_window

from ..services.common import now

# The Session column that stores each running number a trigger reads.
SESSION_COLUMNS: dict[StateField, str] = {
    "context_tokens": "context_total",
    "messages": "context_messages",
    "tokens_since_summary": "tokens_since_summary",
    "messages_since_summary": "messages_since_summary",
    "last_message_at": "last_message_at",
}


def condition_q(cond: Condition, window: int, reserved: int) -> Q:
    """A trigger condition as a filter on the stored running totals (same rule as
    compaction.triggers.evaluate: measure > limit)."""
    if isinstance(cond, GroupCondition):
        join = operator.or_ if isinstance(cond, AnyCondition) else operator.and_
        return reduce(join, (condition_q(c, window, reserved) for c in cond.conditions))
    column = SESSION_COLUMNS[cond.state_field]
    limit = cond.limit(usable_window(window, reserved))
    if isinstance(cond, AgeCondition):
        # More than `limit` seconds since the stored time: the time is before now - limit.
        return Q(**{f"{column}__lt": now() - timedelta(seconds=limit)})
    return Q(**{f"{column}__gt": round(limit, 3)})


def trigger_text(cond: Condition) -> str:
    """A trigger condition in words, e.g. 'context > 80% of the usable window'."""
    return cond.describe()


# The tuning form's trigger choices: (kind, label, setting name, setting type). Conditions that
# read the clock are left out: the tuning page replays a recorded history.
TRIGGER_KINDS: tuple[tuple[str, str, str, type[int] | type[float]], ...] = tuple(
    (kind_of(cls), cls.label, *cls.setting()) for cls in LEAF_CONDITIONS if cls.replayable
)
TRIGGER_INFO = {k: (key, cast) for k, _label, key, cast in TRIGGER_KINDS}
