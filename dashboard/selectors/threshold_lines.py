"""The horizontal lines charts draw for a policy: every context-token threshold that can
start work on the context, each labelled with what fires there.

- ``trigger``: the summary trigger's context-token conditions;
- ``reduction``: tool-result clearing (``reduction.clearing``), which the service also runs
  as a compaction once the context passes it;
- ``window``: the usable window (window minus reserved output), where the overflow guard
  compacts whatever the other settings say.

Lines are sorted by value so labels read bottom-up in the order they fire."""
from __future__ import annotations

from typing import Any

from compaction import policy as P
from compaction.triggers import token_thresholds, usable_window
from compaction.windows import resolve_window

_TRIGGER_KINDS = {"tokens": "summary trigger", "window_fraction": "summary trigger"}


def clearing_thresholds(policy: P.Policy, usable: int) -> list[int]:
    """Context sizes at which tool-result clearing fires (none when it is off). The
    fraction is of the usable window, as the engine resolves it before a call."""
    reduction = policy.reduction
    clearing = reduction.clearing
    if not (reduction.enabled and clearing.enabled):
        return []
    limits = []
    if clearing.trigger_tokens is not None:
        limits.append(clearing.trigger_tokens)
    if clearing.trigger_fraction is not None:
        limits.append(int(clearing.trigger_fraction * usable))
    return sorted(set(limits))


def policy_lines(policy: P.Policy, window: int | None = None) -> list[dict[str, Any]]:
    if window is None:
        window, _ = resolve_window(policy)
    usable = usable_window(window, policy.reserved_output_tokens)
    lines = []
    for kind, value in token_thresholds(policy.trigger, window, policy.reserved_output_tokens):
        name = _TRIGGER_KINDS.get(kind, f"summary trigger ({kind})")
        lines.append({"label": f"{name}: {value:,} tokens", "value": value, "kind": "trigger"})
    for value in clearing_thresholds(policy, usable):
        lines.append({"label": f"tool-result clearing: {value:,} tokens", "value": value, "kind": "reduction"})
    lines.append({"label": f"overflow guard (usable window): {usable:,} tokens", "value": usable, "kind": "window"})
    return sorted(lines, key=lambda line: line["value"])
