"""Trigger evaluation: reads running totals only, so a check costs O(size of the condition tree)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import policy as P


def usable_window(window: int, reserved: int) -> int:
    """Window minus the room reserved for output. The reserve never takes more than a
    quarter of the window, so a 4,096-token reserve meant for large models does not
    swallow a small one."""
    return max(1, window - min(reserved, window // 4))


@dataclass
class TriggerState:
    """The numbers a trigger looks at, all maintained incrementally by LiveContext."""
    context_tokens: int
    messages: int
    tokens_since_summary: int
    messages_since_summary: int
    last_message_at: float | None
    window: int
    reserved_output_tokens: int = 0
    now: float | None = None

    @property
    def usable_window(self) -> int:
        return usable_window(self.window, self.reserved_output_tokens)


@dataclass
class ConditionResult:
    kind: str
    fired: bool
    value: float | None = None
    threshold: float | None = None
    children: list["ConditionResult"] = field(default_factory=list)

    def describe(self) -> str:
        if self.kind in ("any", "all"):
            inner = (" or " if self.kind == "any" else " and ").join(c.describe() for c in self.children)
            return f"({inner})"
        mark = "fired" if self.fired else "not met"
        return f"{self.kind} {_fmt(self.value)} > {_fmt(self.threshold)} {mark}"

    def fired_leaves(self) -> list["ConditionResult"]:
        if self.kind in ("any", "all"):
            return [leaf for c in self.children for leaf in c.fired_leaves()] if self.fired else []
        return [self] if self.fired else []

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "fired": self.fired}
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


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.3f}"
    return str(int(v))


def evaluate(cond, s: TriggerState) -> ConditionResult:
    if isinstance(cond, P.AnyCondition):
        kids = [evaluate(c, s) for c in cond.conditions]
        return ConditionResult("any", any(k.fired for k in kids), children=kids)
    if isinstance(cond, P.AllCondition):
        kids = [evaluate(c, s) for c in cond.conditions]
        return ConditionResult("all", all(k.fired for k in kids), children=kids)
    if isinstance(cond, P.TokensCondition):
        return _leaf(cond.kind, s.context_tokens, cond.threshold)
    if isinstance(cond, P.WindowFractionCondition):
        return _leaf(cond.kind, s.context_tokens, cond.fraction * s.usable_window)
    if isinstance(cond, P.MessagesCondition):
        return _leaf(cond.kind, s.messages, cond.threshold)
    if isinstance(cond, P.TokensSinceSummaryCondition):
        return _leaf(cond.kind, s.tokens_since_summary, cond.threshold)
    if isinstance(cond, P.WindowFractionSinceSummaryCondition):
        return _leaf(cond.kind, s.tokens_since_summary, cond.fraction * s.usable_window)
    if isinstance(cond, P.MessagesSinceSummaryCondition):
        return _leaf(cond.kind, s.messages_since_summary, cond.threshold)
    if isinstance(cond, P.IdleCondition):
        if s.last_message_at is None:
            return ConditionResult(cond.kind, False, None, cond.seconds)
        now = time.time() if s.now is None else s.now
        return _leaf(cond.kind, round(now - s.last_message_at, 3), cond.seconds)
    raise TypeError(f"unknown condition {cond!r}")


def _leaf(kind: str, value: float, threshold: float) -> ConditionResult:
    return ConditionResult(kind, value > threshold, value, round(threshold, 3))


def token_thresholds(cond, window: int, reserved: int = 0) -> list[tuple[str, int]]:
    """Absolute token thresholds in a condition tree (for threshold lines on charts)."""
    usable = usable_window(window, reserved)
    out: list[tuple[str, int]] = []
    if isinstance(cond, (P.AnyCondition, P.AllCondition)):
        for c in cond.conditions:
            out.extend(token_thresholds(c, window, reserved))
    elif isinstance(cond, P.TokensCondition):
        out.append((cond.kind, cond.threshold))
    elif isinstance(cond, P.WindowFractionCondition):
        out.append((cond.kind, int(cond.fraction * usable)))
    return out


# -- the fast path -----------------------------------------------------------------------
# should_compact() runs before every model call, so it must cost next to nothing. The
# condition tree is compiled once (per policy and window) into a single expression over
# the five running numbers; the explanation (which condition fired, with what values) is
# computed only when somebody reads it.

def _expr(cond, usable: int) -> str:
    if isinstance(cond, (P.AnyCondition, P.AllCondition)):
        joiner = " or " if isinstance(cond, P.AnyCondition) else " and "
        return "(" + joiner.join(_expr(c, usable) for c in cond.conditions) + ")"
    if isinstance(cond, P.TokensCondition):
        return f"ct > {float(cond.threshold)!r}"
    if isinstance(cond, P.WindowFractionCondition):
        return f"ct > {float(cond.fraction * usable)!r}"
    if isinstance(cond, P.MessagesCondition):
        return f"m > {float(cond.threshold)!r}"
    if isinstance(cond, P.TokensSinceSummaryCondition):
        return f"ts > {float(cond.threshold)!r}"
    if isinstance(cond, P.WindowFractionSinceSummaryCondition):
        return f"ts > {float(cond.fraction * usable)!r}"
    if isinstance(cond, P.MessagesSinceSummaryCondition):
        return f"ms > {float(cond.threshold)!r}"
    if isinstance(cond, P.IdleCondition):
        return f"(last is not None and ((_now() if now is None else now) - last) > {float(cond.seconds)!r})"
    raise TypeError(f"unknown condition {cond!r}")


def compile_condition(cond, window: int, reserved: int = 0):
    """A function (ct, m, ts, ms, last, now) -> bool equal to ``evaluate(...).fired``.

    The generated source holds only comparisons with numeric literals taken from a
    validated policy, so evaluating it is safe."""
    source = "lambda ct, m, ts, ms, last, now=None: " + _expr(cond, usable_window(window, reserved))
    return eval(source, {"__builtins__": {}, "_now": time.time})  # noqa: S307


class LazyTrigger:
    """``fired`` is known at once; ``reason``/``to_dict()`` evaluate the tree on demand."""

    __slots__ = ("fired", "_cond", "_numbers", "_result")

    def __init__(self, fired: bool, cond, numbers: tuple):
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
    def children(self) -> list:
        return self.result.children

    def describe(self) -> str:
        return self.result.describe()

    def fired_leaves(self) -> list:
        return self.result.fired_leaves()

    def to_dict(self) -> dict:
        return self.result.to_dict()
