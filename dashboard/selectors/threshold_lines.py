"""The horizontal lines charts draw for a policy: its trigger's token thresholds and the
usable window."""
from __future__ import annotations

from typing import Any

from compaction import policy as P
from compaction.triggers import token_thresholds, usable_window
from compaction.windows import resolve_window


def policy_lines(policy: P.Policy, window: int | None = None) -> list[dict[str, Any]]:
    if window is None:
        window, _ = resolve_window(policy)
    lines = []
    for kind, value in token_thresholds(policy.trigger, window, policy.reserved_output_tokens):
        label = {"tokens": "trigger", "window_fraction": "trigger"}.get(kind, kind)
        lines.append({"label": f"{label}: {value:,} tokens", "value": value, "kind": "trigger"})
    usable = usable_window(window, policy.reserved_output_tokens)
    lines.append({"label": f"usable window: {usable:,} tokens", "value": usable, "kind": "window"})
    return lines
