"""The tuning page's preview: the form's policies replayed over the stored history
(compaction.preview, offline summarizer) against no compaction, and one chart for them."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from django.http import QueryDict

from compaction import PRESETS, CompactionError, PolicyError
from compaction import policy as P
from compaction.figures import ReplayFigures
from compaction.preview import PolicyPreview, preview_policy
from compaction.simulate import SimulationReport

from ..forms import CURRENT, PolicyForm, side_form
from ..models import Session, StoredMessage, StoredPolicy
from ..services.policies import apply_service_defaults, default_policy, stored_policy_for
from ..services.superseded import Superseded
from .threshold_lines import policy_lines

log = logging.getLogger("dashboard.pages")

SIDES = ("a", "b")
#: The preset policy B starts from.
B_PRESET = "deepagents"
#: Points of a tuning chart at most (model calls are bucketed beyond this).
MAX_SIM_POINTS = 1500


@dataclass(frozen=True)
class StartingPoint:
    """The session's stored policy (without service defaults) and how the page names it."""

    row: StoredPolicy | None
    policy: P.Policy

    @property
    def label(self) -> str:
        return self.row.name if self.row is not None else f"service default: {self.policy.name}"

    @property
    def name(self) -> str:
        return self.row.name if self.row is not None else self.policy.name


def starting_point(session: Session) -> StartingPoint:
    row = stored_policy_for(session)
    return StartingPoint(row=row, policy=P.Policy.load(row.data) if row is not None else default_policy())


def policy_form(session: Session, start: StartingPoint, data: Any = None, *, side: str = "a",
                preset: str = CURRENT) -> PolicyForm:
    return PolicyForm(data, prefix=side, current=start.policy, current_label=start.label,
                      session_model=session.model, preset=preset)


def initial_forms(session: Session, start: StartingPoint) -> dict[str, PolicyForm]:
    """Policy A from the session's policy, policy B from a preset."""
    return {"a": policy_form(session, start, side="a"),
            "b": policy_form(session, start, side="b", preset=B_PRESET if B_PRESET in PRESETS else CURRENT)}


@dataclass(frozen=True)
class PolicyColumn:
    """One policy of the preview table and chart."""

    label: str
    trigger_desc: str
    preview: PolicyPreview
    lines: list[dict[str, Any]]

    @property
    def report(self) -> SimulationReport:
        return self.preview.report

    @property
    def summaries(self) -> int:
        """Compactions that wrote a summary (the preview's summarizer is the offline one)."""
        return sum(1 for c in self.preview.report.compactions if c.summarized)

    @cached_property
    def figures(self) -> ReplayFigures:
        """Cost (cache-priced and uncached) and recall, as the threshold sweep counts them."""
        return self.preview.figures

    @cached_property
    def lookahead(self) -> dict[str, Any]:
        """Needed-context recall, mean context, cache breaks and cache-priced cost of the
        policy, with the same figures for the sliding-window and masking baselines."""
        report = self.preview.report.lookahead
        return report.to_dict() if report is not None else {}


@dataclass
class TuningPreview:
    forms: dict[str, PolicyForm]
    compare: bool
    columns: list[PolicyColumn] = field(default_factory=list)
    #: {"side": "A", "message": "cut.keep_fraction: …"}
    errors: list[dict[str, str]] = field(default_factory=list)
    #: Sides whose fields were reset to a newly chosen preset (the page swaps them in).
    reset: list[str] = field(default_factory=list)

    #: The baselines each replay is scored against, as the table names them.
    baseline_rows: tuple[tuple[str, str], ...] = (("sliding_window", "Sliding window"),
                                                   ("observation_masking", "Observation masking"))

    @property
    def labels(self) -> list[str]:
        return [c.label for c in self.columns]

    @property
    def chart(self) -> dict[str, Any]:
        return simulation_chart(self.columns)


def session_raws(session: Session) -> list[dict[str, Any]]:
    raws = StoredMessage.objects.filter(session_id=session.pk).order_by("position").values_list("raw", flat=True)
    # A JSONTextField loads its JSON; its stubs see the TextField it is stored in.
    return cast(list[dict[str, Any]], list(raws))


def tuning_preview(session: Session, data: QueryDict,
                   progress: Callable[[int, int], None] | None = None) -> TuningPreview:
    """Replay the posted policies (B only when comparing). Errors, whether in the form, in
    the policy or in the replay, are reported per side and never raise; ``progress`` is
    called as each replay goes, and Superseded raised by it stops the preview."""
    start = starting_point(session)
    compare = data.get("compare") in ("1", "on")
    out = TuningPreview(forms={}, compare=compare)
    raws: list[dict[str, Any]] | None = None
    for side in SIDES:
        form, reset = side_form(data, side, current=start.policy, current_label=start.label,
                                session_model=session.model)
        out.forms[side] = form
        if reset:
            out.reset.append(side)
        if side == "b" and not compare:
            _describe_trigger(form)
            continue
        try:
            policy = form.policy() if not form.is_bound or form.is_valid() else None
        except PolicyError as exc:
            out.errors.append({"side": side.upper(), "message": _named(exc)})
            continue
        if policy is None:
            out.errors.extend({"side": side.upper(), "message": m} for m in form.problems())
            continue
        if raws is None:
            raws = session_raws(session)
        try:
            out.columns.append(preview_column(session, raws, policy, label=_label(start, form, side),
                                              trigger_desc=form.trigger_desc, progress=progress))
        except Superseded:
            raise
        except (CompactionError, ValueError) as exc:
            out.errors.append({"side": side.upper(), "message": f"simulation failed: {exc}"})
        except Exception as exc:  # noqa: BLE001 - an engine fault must not take the page down
            log.exception("simulation of session %s failed", session.pk)
            out.errors.append({"side": side.upper(), "message": f"simulation failed: {type(exc).__name__}: {exc}"})
    return out


def _describe_trigger(form: PolicyForm) -> None:
    """Bring the side's "Now:" trigger text up to date with what was typed, even when the side
    is not simulated; a side that does not validate keeps its previous text."""
    try:
        if not form.is_bound or form.is_valid():
            form.policy()
    except PolicyError:
        pass


def _named(exc: PolicyError) -> str:
    msg = str(exc)
    return msg if not exc.field or msg.startswith(exc.field) else f"{exc.field}: {msg}"


def _label(start: StartingPoint, form: PolicyForm, side: str) -> str:
    preset = form["preset"].value() if form.is_bound else form.initial.get("preset", CURRENT)
    return f"{side.upper()}: {start.name if preset not in PRESETS else preset}"


def preview_column(session: Session, raws: list[dict[str, Any]], policy: P.Policy, *, label: str,
                   trigger_desc: str, progress: Callable[[int, int], None] | None = None) -> PolicyColumn:
    """``policy`` (with the service defaults, as a run of this session would get it)
    replayed over ``raws``."""
    effective = apply_service_defaults(policy, session)
    preview = preview_policy(raws, effective, tools=session.tools or None, fallback_model=session.model or None,
                             progress=progress)  # PREVIEW_SESSION_ID: figures independent of the key
    return PolicyColumn(label=label, trigger_desc=trigger_desc, preview=preview,
                        lines=policy_lines(effective, preview.report.window))


def _buckets(n: int, max_buckets: int) -> int:
    return max(1, -(-n // max_buckets)) if n else 1


def simulation_chart(columns: list[PolicyColumn]) -> dict[str, Any]:
    """One chart for one or two simulations: context per model call for each policy and
    without compaction, compaction markers and threshold lines; bucketed past MAX_SIM_POINTS."""
    if not columns:
        return {}
    first = columns[0].preview
    n = len(first.calls)
    size = _buckets(n, MAX_SIM_POINTS)
    groups = [range(s, min(n, s + size)) for s in range(0, n, size)]

    def reduce(values: list[int]) -> list[int | None]:
        return [max(values[i] for i in group) if group else None for group in groups]

    series = [{"label": "no compaction", "values": reduce(first.baseline), "kind": "baseline"}]
    markers: list[dict[str, Any]] = []
    lines: list[dict[str, Any]] = []
    for col in columns:
        series.append({"label": col.label, "values": reduce(col.preview.per_call), "kind": "policy"})
        markers.extend({"x": c.at - 0.5, "policy": col.label, "position": c.at,
                        "tokens_before": c.tokens_before, "tokens_after": c.tokens_after,
                        "messages_before": c.messages_before, "messages_after": c.messages_after,
                        "evicted": c.evicted_messages, "summarized": c.summarized}
                       for c in col.preview.report.compactions)
        lines.extend({**line, "label": f"{col.label} {line['label']}" if len(columns) > 1 else line["label"],
                      "policy": col.label} for line in col.lines)
    return {"x": [first.calls[g[0]] for g in groups], "bucket": size, "lines": lines, "series": series,
            "markers": markers}


def posted_policy(session: Session, data: QueryDict, side: str) -> P.Policy:
    """The policy one side of a posted tuning form describes. Raises PolicyError naming
    each setting that is wrong."""
    start = starting_point(session)
    form, _reset = side_form(data, side, current=start.policy, current_label=start.label,
                             session_model=session.model)
    if form.is_bound and not form.is_valid():
        raise PolicyError("; ".join(form.problems()))
    return form.policy()
