"""How close each session is to its trigger, as one SQL expression over stored totals.

The ratio is the measure over the limit of the policy the session runs under (1.0 = at the
trigger, above 1 = over it): for an ``any`` group the largest of its conditions, for an
``all`` group the smallest, as the group fires. Conditions that read the clock (idle time)
count as 0, since "close to idle" says nothing about the context's size. Sessions of every
(model, policy) pair are rated in the same query, so ordering or filtering a project's
sessions on it costs one query whatever their number.
"""
from __future__ import annotations

from django.db.models import Case, F, FloatField, Q, Value, When
from django.db.models.expressions import Combinable
from django.db.models.functions import Cast, Greatest, Least

from compaction.conditions import AgeCondition, AnyCondition, Condition, GroupCondition
from compaction.windows import resolve_window, usable_window

from .effective_policies import PoliciesByCombo
from .triggers import SESSION_COLUMNS

#: A session at or above this share of its trigger is "near its threshold".
NEAR_FRACTION = 0.8


def _condition_ratio(cond: Condition, usable: int) -> Combinable:
    if isinstance(cond, GroupCondition):
        parts = [_condition_ratio(c, usable) for c in cond.conditions]
        if len(parts) == 1:
            return parts[0]
        return (Greatest if isinstance(cond, AnyCondition) else Least)(*parts, output_field=FloatField())
    if isinstance(cond, AgeCondition):
        return Value(0.0, output_field=FloatField())
    limit = max(cond.limit(usable), 1e-9)
    return Cast(F(SESSION_COLUMNS[cond.state_field]), FloatField()) / Value(float(limit), output_field=FloatField())


def threshold_ratio(policies: PoliciesByCombo) -> Case:
    """An annotation: each session's measure over its trigger's limit (0 without a policy)."""
    whens = []
    for (model, pid), policy in sorted(policies.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        window, _ = resolve_window(policy)
        usable = usable_window(window, policy.reserved_output_tokens)
        whens.append(When(Q(model=model, policy_id=pid), then=_condition_ratio(policy.trigger, usable)))
    return Case(*whens, default=Value(0.0, output_field=FloatField()), output_field=FloatField())
