"""One click from a sweep's or a grid's recommendation to a policy in use, and one click back.

Applying saves the sweep's policy with the chosen trigger setting (a grid's: the chosen
cell's pair of settings) as a stored policy named after them (a new version when that name
exists with other settings), then makes it this session's policy or the project's active one. The answer carries what was in use before,
so undo puts exactly that back (the saved policy stays in the project's list).
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from compaction.policy import Policy
from compaction.recommend import setting_text

from ..models import GridStatus, Session, StoredPolicy, SweepStatus, TuningGrid, TuningSweep
from . import Invalid
from .policies import SaveTarget, activate_policy, save_tuned_policy, set_session_policy
from .tuning_grids import AXES, cell_policy, y_text
from .tuning_sweeps import with_trigger

TARGETS: tuple[SaveTarget, ...] = ("session", "project")


@dataclass(frozen=True)
class Applied:
    row: StoredPolicy
    target: SaveTarget
    #: The stored policy in use before (None: the project's policy, or the service default).
    previous: StoredPolicy | None


def _target(target: str) -> SaveTarget:
    if target not in TARGETS:
        raise Invalid(f"apply: unknown target {target!r}; choose session or project")
    return "session" if target == "session" else "project"


def applied_name(policy: Policy, kind: str, value: float) -> str:
    return f"{policy.name} · trigger {setting_text(kind, value)}"


@transaction.atomic
def apply_sweep_setting(session: Session, sweep: TuningSweep, value: float, target: str) -> Applied:
    """Save ``sweep``'s policy with its trigger at ``value`` (one of the settings it swept)
    and put it in use for ``session`` or its project. Raises Invalid naming the problem;
    nothing changes then."""
    where = _target(target)
    if sweep.project_id != session.project_id:
        raise Invalid("apply: that sweep belongs to another project")
    if sweep.status != SweepStatus.DONE:
        raise Invalid("apply: the sweep has not finished")
    if float(value) not in [float(v) for v in sweep.values]:
        raise Invalid(f"apply: {value!r} is not one of the settings the sweep tried")
    session = Session.objects.select_related("policy", "project__active_policy").get(pk=session.pk)
    previous = session.policy if where == "session" else session.project.active_policy
    policy = with_trigger(Policy.load(sweep.policy), sweep.parameter, float(value))
    row = save_tuned_policy(session, applied_name(policy, sweep.parameter, float(value)), policy, where)
    return Applied(row=row, target=where, previous=previous)


@transaction.atomic
def apply_grid_cell(session: Session, grid: TuningGrid, cell: int, target: str) -> Applied:
    """Save ``grid``'s policy with the settings of ``cell`` (index ``y * columns + x``, as the
    recommendation names it) and put it in use for ``session`` or its project. Raises
    Invalid naming the problem; nothing changes then."""
    where = _target(target)
    if grid.project_id != session.project_id:
        raise Invalid("apply: that grid belongs to another project")
    if grid.status != GridStatus.DONE:
        raise Invalid("apply: the grid has not finished")
    cells = len(grid.x_values) * len(grid.y_values)
    if not 0 <= cell < cells:
        raise Invalid(f"apply: the grid has cells 0 to {cells - 1}, not {cell}")
    session = Session.objects.select_related("policy", "project__active_policy").get(pk=session.pk)
    previous = session.policy if where == "session" else session.project.active_policy
    policy = cell_policy(Policy.load(grid.policy), grid, cell)
    x, y = grid.x_values[cell % len(grid.x_values)], grid.y_values[cell // len(grid.x_values)]
    name = f"{applied_name(policy, grid.x_param, float(x))}, {AXES[grid.y_param].short} {y_text(grid.y_param, float(y))}"
    row = save_tuned_policy(session, name, policy, where)
    return Applied(row=row, target=where, previous=previous)


@transaction.atomic
def undo_apply(session: Session, target: str, previous_id: int | None) -> StoredPolicy | None:
    """Put back the policy that was in use before an apply (``previous_id`` None: none was
    stored, so the session follows its project, or the project the service default)."""
    where = _target(target)
    previous = None
    if previous_id is not None:
        previous = StoredPolicy.objects.filter(pk=previous_id, project_id=session.project_id).first()
        if previous is None:
            raise Invalid("undo: that policy is not one of this project's")
    if where == "session":
        set_session_policy(session, previous)
    else:
        activate_policy(session.project, previous)
    return previous
