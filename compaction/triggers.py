"""Trigger evaluation: reads running totals only, so a check costs O(size of the condition tree).

Both checks here are written once over the condition classes of :mod:`compaction.conditions`:
:func:`evaluate` explains what fired and why, :func:`compile_condition` answers only whether
it fired, fast enough to run before every model call.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .conditions import (
    STATE_FIELDS,
    AgeCondition,
    AnyCondition,
    Condition,
    GroupCondition,
    TriggerState,
)
from .windows import usable_window

__all__ = ["ConditionResult", "LazyTrigger", "TriggerState", "compile_condition", "evaluate", "token_thresholds",
           "usable_window"]


@dataclass
class ConditionResult:
    kind: str
    fired: bool
    value: float | None = None
    threshold: float | None = None
    children: list[ConditionResult] = field(default_factory=list)

    def describe(self) -> str:
        if self.kind in ("any", "all"):
            inner = (" or " if self.kind == "any" else " and ").join(c.describe() for c in self.children)
            return f"({inner})"
        mark = "fired" if self.fired else "not met"
        return f"{self.kind} {_fmt(self.value)} > {_fmt(self.threshold)} {mark}"

    def fired_leaves(self) -> list[ConditionResult]:
        if self.kind in ("any", "all"):
            return [leaf for c in self.children for leaf in c.fired_leaves()] if self.fired else []
        return [self] if self.fired else []

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "fired": self.fired}
        if self.children:
            d["children"] = [c.to_dict() for c in self.children]
        else:
            d["value"] = self.value
            d["threshold"] = self.threshold
        return d

    @property
    def reason(self) -> str:
        """The conditions that fired, e.g. 'tokens 9120 > 8000'; else why nothing fired."""
        leaves = self.fired_leaves()
        if leaves:
            return "; ".join(f"{leaf.kind} {_fmt(leaf.value)} > {_fmt(leaf.threshold)}" for leaf in leaves)
        return "not triggered: " + self.describe()


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.3f}"
    return str(int(v))


def evaluate(cond: Condition, s: TriggerState) -> ConditionResult:
    if isinstance(cond, GroupCondition):
        kids = [evaluate(c, s) for c in cond.conditions]
        return ConditionResult(cond.kind, cond.fires(k.fired for k in kids), children=kids)
    value = cond.measure(s)
    limit = cond.limit(s.usable_window)
    if value is None:
        return ConditionResult(cond.kind, False, None, limit)
    return ConditionResult(cond.kind, value > limit, value, round(limit, 3))


def token_thresholds(cond: Condition, window: int, reserved: int = 0) -> list[tuple[str, int]]:
    """Absolute thresholds on the context's tokens in a condition tree (for threshold lines on charts)."""
    usable = usable_window(window, reserved)
    out: list[tuple[str, int]] = []
    if isinstance(cond, GroupCondition):
        for c in cond.conditions:
            out.extend(token_thresholds(c, window, reserved))
    elif cond.state_field == "context_tokens":
        out.append((cond.kind, int(cond.limit(usable))))
    return out


# -- the fast path -----------------------------------------------------------------------
# should_compact() runs before every model call, so it must cost next to nothing. The
# condition tree is compiled once (per policy and window) into a single expression over
# the five running numbers; the explanation (which condition fired, with what values) is
# computed only when somebody reads it. The compiled function's parameters are named after
# the TriggerState fields, so a leaf's expression is just its field against its limit.

def _expr(cond: Condition, usable: int) -> str:
    if isinstance(cond, GroupCondition):
        joiner = " or " if isinstance(cond, AnyCondition) else " and "
        return "(" + joiner.join(_expr(c, usable) for c in cond.conditions) + ")"
    name, limit = cond.state_field, float(cond.limit(usable))
    if isinstance(cond, AgeCondition):
        return f"({name} is not None and ((_now() if now is None else now) - {name}) > {limit!r})"
    return f"{name} > {limit!r}"


FastCheck = Callable[..., bool]


def compile_condition(cond: Condition, window: int, reserved: int = 0) -> FastCheck:
    """A function (context_tokens, messages, tokens_since_summary, messages_since_summary,
    last_message_at, now=None) -> bool equal to ``evaluate(...).fired``.

    The generated source holds only comparisons with numeric literals taken from a
    validated policy, so evaluating it is safe."""
    source = f"lambda {', '.join(STATE_FIELDS)}, now=None: " + _expr(cond, usable_window(window, reserved))
    check: FastCheck = eval(source, {"__builtins__": {}, "_now": time.time})  # noqa: S307
    return check


# TriggerState's fields in order: the five running numbers, window, reserved output, now.
TriggerNumbers = tuple[int, int, int, int, float | None, int, int, float | None]


class LazyTrigger:
    """``fired`` is known at once; ``reason``/``to_dict()`` evaluate the tree on demand."""

    __slots__ = ("fired", "_cond", "_numbers", "_result")

    def __init__(self, fired: bool, cond: Condition, numbers: TriggerNumbers):
        self.fired = fired
        self._cond = cond
        self._numbers = numbers
        self._result: ConditionResult | None = None

    def __bool__(self) -> bool:
        return self.fired

    @property
    def result(self) -> ConditionResult:
        if self._result is None:
            self._result = evaluate(self._cond, TriggerState(*self._numbers))
        return self._result

    @property
    def reason(self) -> str:
        return self.result.reason

    @property
    def kind(self) -> str:
        return self.result.kind

    @property
    def children(self) -> list[ConditionResult]:
        return self.result.children

    def describe(self) -> str:
        return self.result.describe()

    def fired_leaves(self) -> list[ConditionResult]:
        return self.result.fired_leaves()

    def to_dict(self) -> dict[str, Any]:
        return self.result.to_dict()
