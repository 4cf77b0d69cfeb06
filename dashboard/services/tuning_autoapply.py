"""Auto-apply of continuous tuning, for operators who opt in (``TUNING_AUTO_APPLY=1``), with
three guardrails:

- **recall floor** (``TUNING_RECALL_FLOOR``): a step goes only to a setting whose replayed
  needed-context recall on the recent sessions is at least the floor, with no call over the
  usable window;
- **maximum step** (``TUNING_MAX_STEP``): the new trigger setting differs from the current
  one by at most that share of it (0.15: 80% may become 68%..92%), and only settings that
  send fewer tokens (or cost less) than the current one are taken;
- **rollback**: at the start of each pass, when the project still uses the policy the last
  step applied, its *live recall* is checked; below the floor, the policy in use before that
  step is put back (and no new step is taken in that pass).

Live recall is read from the runs' stored figures (``services.run_recall``): the pooled
needed-context recall (identifiers kept over identifiers needed) of the succeeded runs made
under the applied policy since it was applied. A run has its figure once the agent has
answered after it; with no measured run yet, nothing is rolled back.

The apply and the undo are the tuning page's own (``tuning_apply``): the applied policy is
saved under the name that page gives it and made the project's active policy.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from compaction.figures import recall as pooled_recall
from compaction.recommend import SweepPoint, recommend, setting_text

from ..models import (
    AutoApply,
    CompactionRun,
    ContinuousTuning,
    Project,
    RunStatus,
    StoredPolicy,
    TuningSweep,
)
from ..selectors.tuning_sweeps import point_figures
from .policies import activate_policy
from .tuning_apply import apply_sweep_setting, undo_apply

log = logging.getLogger("dashboard.tuning")


def live_recall(applied: ContinuousTuning) -> tuple[float | None, int]:
    """(pooled recall, runs measured) of the runs made under ``applied``'s policy since it
    was applied; recall None when no run needed earlier history yet."""
    kept = needed = runs = 0
    rows = CompactionRun.objects.filter(project_id=applied.project_id, policy_id=applied.applied_policy_id,
                                        status=RunStatus.SUCCEEDED, created_at__gte=applied.finished_at)
    for result in rows.values_list("result", flat=True):
        figures = (result or {}).get("recall") if isinstance(result, dict) else None
        if isinstance(figures, dict) and isinstance(figures.get("needed"), int):
            runs += 1
            kept += int(figures.get("kept") or 0)
            needed += int(figures["needed"])
    return pooled_recall(kept, needed), runs


def last_step_in_use(project: Project) -> ContinuousTuning | None:
    """The last auto-applied step, if the project still uses the policy it applied."""
    last = (ContinuousTuning.objects.filter(project_id=project.pk, auto=AutoApply.APPLIED)
            .order_by("-pk").first())
    if last is None or last.applied_policy_id is None or project.active_policy_id != last.applied_policy_id:
        return None
    return last


@transaction.atomic
def roll_back_if_below_floor(project: Project, tuning: ContinuousTuning) -> bool:
    """Put back the policy from before the last step when its live recall is below the
    floor; noted on ``tuning``. Whether it rolled back."""
    step = last_step_in_use(project)
    if step is None:
        return False
    recall, runs = live_recall(step)
    tuning.live_recall = recall
    floor = settings.TUNING_RECALL_FLOOR
    if recall is None or recall >= floor:
        tuning.save(update_fields=["live_recall"])
        return False
    previous_id = step.previous_policy_id
    if step.sweep is not None:
        undo_apply(step.sweep.session, "project", previous_id)
    else:  # the sweep was deleted: what undo does for a project, without its session
        activate_policy(project, StoredPolicy.objects.filter(pk=previous_id).first() if previous_id else None)
    tuning.auto = AutoApply.ROLLED_BACK
    tuning.previous_policy_id, tuning.applied_policy_id = step.applied_policy_id, previous_id
    tuning.auto_note = (f"Rolled back step {step.pk}: live recall {recall * 100:.1f}% over {runs} run"
                        f"{'s' if runs != 1 else ''} is below the floor of {floor * 100:g}%.")
    tuning.save(update_fields=["auto", "previous_policy", "applied_policy", "auto_note", "live_recall"])
    log.warning("project %s: %s", project.pk, tuning.auto_note)
    return True


def take_step(tuning: ContinuousTuning, sweep: TuningSweep) -> None:
    """Apply the cheapest setting within one step of the current one that meets the floor;
    hold (noted) when there is none, or when it would not save anything."""
    floor, max_step = settings.TUNING_RECALL_FLOOR, settings.TUNING_MAX_STEP
    current = sweep.current
    if current is None:
        _hold(tuning, f"The policy's trigger is not a {' or '.join(('share of the window', 'token count'))}: "
                      "there is no setting to step from.")
        return
    reach = max_step * current * (1 + 1e-9)
    within = [SweepPoint(float(p["value"]), point_figures(p)) for p in sweep.points
              if not p.get("errors") and abs(float(p["value"]) - current) <= reach]
    rec = recommend(within, kind=sweep.parameter, current=current, target=floor)
    if rec.choice is None:
        _hold(tuning, f"No setting within {max_step * 100:g}% of the current one reaches the floor.")
        return
    if rec.is_current or rec.saving is None or rec.saving <= 0:
        _hold(tuning, "The current setting is already the cheapest within one step that reaches the floor.")
        return
    applied = apply_sweep_setting(sweep.session, sweep, rec.choice.value, "project")
    tuning.auto = AutoApply.APPLIED
    tuning.previous_policy = applied.previous
    tuning.applied_policy = applied.row
    tuning.applied_value = rec.choice.value
    tuning.auto_note = (f"Applied trigger {setting_text(sweep.parameter, rec.choice.value)} (was "
                        f"{setting_text(sweep.parameter, current)}) as “{applied.row.name}”: {rec.sentence}.")
    tuning.save(update_fields=["auto", "previous_policy", "applied_policy", "applied_value", "auto_note"])
    log.info("project %s: %s", tuning.project_id, tuning.auto_note)


def _hold(tuning: ContinuousTuning, note: str) -> None:
    tuning.auto, tuning.auto_note = AutoApply.HELD, note
    tuning.save(update_fields=["auto", "auto_note"])
