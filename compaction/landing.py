"""Where a compaction must land, how much it must free, and which thresholds the overflow
guard has to stand in for.

Three numbers, all in tokens of the policy's own counter, resolved against the usable
window (window minus reserved output):

- **landing target**: a compaction moves its cut back until the context it leaves is at or
  below this (``landing.target``; default half of the trigger's lowest context-token
  threshold, or half of the usable window when that is lower or the trigger has none).
- **minimum freed**: a compaction that cannot free this much does not run, and the trigger
  waits until this many new tokens arrived (``landing.min_freed``; default 10% of the
  usable window, at most a quarter of the trigger's lowest context-token threshold). The same minimum is the yardstick of ``thrash`` in a replay report.
- **usable window**: the overflow guard's line. Nothing here decides whether to compact;
  it only names the numbers, so the policy can refuse contradictions at load and the
  dashboard and CLI can warn about thresholds the guard will pre-empt.

Settings up to 1 are shares of the usable window; larger ones are tokens.
"""
from __future__ import annotations

from .conditions import Condition
from .triggers import token_thresholds
from .windows import usable_window

__all__ = ["DEFAULT_MIN_FREED_SHARE", "DEFAULT_TARGET_SHARE", "as_tokens", "landing_target", "min_freed",
           "threshold_warnings", "trigger_threshold", "usable_window"]

DEFAULT_TARGET_SHARE = 0.5       # of the trigger threshold
DEFAULT_MIN_FREED_SHARE = 0.10   # of the usable window
DEFAULT_MIN_FREED_CAP = 0.25     # of the trigger threshold


def as_tokens(value: float, usable: int) -> int:
    """A setting as tokens: a share of the usable window when at most 1, else tokens."""
    return int(value * usable) if value <= 1 else int(value)


def trigger_threshold(trigger: Condition, window: int, reserved: int) -> int | None:
    """The lowest context-token threshold in the trigger (where it fires first), if any."""
    found = [limit for _, limit in token_thresholds(trigger, window, reserved)]
    return min(found) if found else None


def landing_target(target: float | None, trigger: Condition, window: int, reserved: int) -> int:
    usable = usable_window(window, reserved)
    if target is not None:
        return as_tokens(target, usable)
    threshold = trigger_threshold(trigger, window, reserved)
    basis = usable if threshold is None else min(threshold, usable)
    return int(DEFAULT_TARGET_SHARE * basis)


def min_freed(value: float | None, trigger: Condition, window: int, reserved: int) -> int:
    usable = usable_window(window, reserved)
    if value is not None:
        return as_tokens(value, usable)
    minimum = int(DEFAULT_MIN_FREED_SHARE * usable)
    threshold = trigger_threshold(trigger, window, reserved)
    if threshold is not None:
        # a trigger far below the window must still be able to compact
        minimum = min(minimum, int(DEFAULT_MIN_FREED_CAP * threshold))
    return minimum


def threshold_warnings(trigger: Condition, clearing_tokens: int | None, window: int, reserved: int) -> list[str]:
    """Thresholds above the usable window: they can never fire before a call would overflow,
    so the overflow guard compacts instead of them."""
    usable = usable_window(window, reserved)
    out: list[str] = []
    for kind, limit in token_thresholds(trigger, window, reserved):
        if limit > usable:
            out.append(f"trigger ({kind}) threshold of {limit:,} tokens lies above the usable window of "
                       f"{usable:,} tokens (window {window:,} minus reserved output); it cannot fire before a "
                       f"call would overflow, so the overflow guard compacts instead")
    if clearing_tokens is not None and clearing_tokens > usable:
        out.append(f"reduction.clearing.trigger_tokens of {clearing_tokens:,} lies above the usable window of "
                   f"{usable:,} tokens; the overflow guard compacts before clearing would")
    return out
