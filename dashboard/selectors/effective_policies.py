"""Effective policies of many sessions at once, and the "over its trigger" filter.

A project's sessions share few (model, session policy) pairs, so the policy every session
runs under is built once per pair instead of once per session.
"""
from __future__ import annotations

from django.db.models import Q

from compaction import policy as P
from compaction.windows import resolve_window

from ..models import Project, Session, StoredPolicy
from ..services.policies import apply_service_defaults, default_policy
from .triggers import condition_q

#: (session model, session policy id) -> the engine policy such a session runs under.
PoliciesByCombo = dict[tuple[str, int | None], P.Policy]


def policy_for(project: Project, model: str, policy_row: StoredPolicy | None) -> P.Policy:
    """The effective policy of a session of ``project`` with ``model`` and ``policy_row``."""
    if policy_row is not None:
        base = P.Policy.load(policy_row.data)
    elif project.active_policy is not None:
        base = P.Policy.load(project.active_policy.data)
    else:
        base = default_policy()
    return apply_service_defaults(base, Session(project=project, model=model or ""))


def policies_by_combo(project: Project) -> PoliciesByCombo:
    """Effective policy of every (model, session policy) pair in a project: 2 queries."""
    combos = set(Session.objects.filter(project=project).values_list("model", "policy_id").distinct())
    rows = {p.pk: p for p in StoredPolicy.objects.filter(pk__in={pid for _, pid in combos if pid})}
    return {(m, pid): policy_for(project, m, rows.get(pid) if pid else None) for m, pid in combos}


def over_threshold_q(policies: PoliciesByCombo) -> Q:
    """Sessions whose stored totals exceed the trigger of the policy they run under."""
    out = Q(pk__in=[])
    for (model, pid), policy in policies.items():
        window, _ = resolve_window(policy)
        out |= Q(model=model, policy_id=pid) & condition_q(policy.trigger, window, policy.reserved_output_tokens)
    return out
