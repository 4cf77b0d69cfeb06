"""The answer to "what should I set?": one trigger setting chosen from a threshold sweep's
points by a rule that can be said in one sentence.

The rule: among the settings whose needed-context recall reaches the target and that send
no call over the usable window, the one with the lowest agent input cost (cache-priced, as
:mod:`.figures` prices it; tokens sent when some setting has no known price). Ties go to
the higher recall, then to the higher trigger (fewer compactions for the same cost). A
setting whose calls needed nothing from earlier history has no recall of its own and
counts as meeting any target.

Pure: the same points and target give the same recommendation, sentence included.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .figures import ReplayFigures

#: Needed-context recall a recommended setting must reach unless the caller asks otherwise.
DEFAULT_RECALL_TARGET = 0.98


@dataclass(frozen=True)
class SweepPoint:
    """One trigger setting of a sweep and its figures (summed over the swept sessions)."""

    value: float
    figures: ReplayFigures


@dataclass(frozen=True)
class Recommendation:
    #: The chosen setting, or None when no setting meets the rule.
    choice: SweepPoint | None
    current: SweepPoint | None
    target: float
    #: "cost" (cache-priced dollars) or "tokens" (tokens sent), what "lowest" is measured in.
    measure: str
    #: The rule and its outcome in words, e.g. "lowest input cost with … : trigger 42%, …".
    sentence: str

    @property
    def is_current(self) -> bool:
        return self.choice is not None and self.current is not None and self.choice.value == self.current.value

    @property
    def saving(self) -> float | None:
        """Share of the current setting's cost (or tokens) the choice saves; negative costs more."""
        if self.choice is None or self.current is None:
            return None
        now, then = _amount(self.current, self.measure), _amount(self.choice, self.measure)
        return None if now is None or then is None or now == 0 else (now - then) / now


def _amount(point: SweepPoint, measure: str) -> float | None:
    f = point.figures
    return f.cost_usd if measure == "cost" else float(f.tokens_sent)


def _meets(point: SweepPoint, target: float) -> bool:
    recall = point.figures.recall
    return point.figures.overflow_calls == 0 and (recall is None or recall >= target)


def setting_text(kind: str, value: float) -> str:
    """A trigger setting as the tuning page writes it: a share of the window, or tokens."""
    return f"{value * 100:.1f}".rstrip("0").rstrip(".") + "%" if kind == "window_fraction" else f"{int(value):,} tokens"


def _target_text(target: float) -> str:
    return f"{target * 100:.2f}".rstrip("0").rstrip(".") + "%"


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.1f}%"


def recommend(points: Sequence[SweepPoint], *, kind: str, current: float | None,
              target: float = DEFAULT_RECALL_TARGET) -> Recommendation:
    """The recommended setting of a sweep of trigger ``kind`` (``window_fraction`` or
    ``tokens``), ``current`` being the policy's own setting (None when its trigger is of
    another kind). Raises ValueError for a target outside 0..1."""
    if not 0 <= target <= 1:
        raise ValueError(f"recall target must be between 0 and 1 (a share), got {target!r}")
    measure = "cost" if points and all(p.figures.cost_usd is not None for p in points) else "tokens"
    now = next((p for p in points if current is not None and p.value == current), None)
    rule = (f"lowest {'input cost' if measure == 'cost' else 'tokens sent'} with needed-context recall "
            f"≥ {_target_text(target)} and no over-window call")
    eligible = [p for p in points if _meets(p, target)]
    if not eligible:
        return Recommendation(None, now, target, measure,
                              f"No setting meets the rule ({rule}): lower the recall target or try another kind "
                              "of trigger.")

    def order(p: SweepPoint) -> tuple[float, float, float]:
        recall = p.figures.recall
        return (_amount(p, measure) or 0.0, -(1.0 if recall is None else recall), -p.value)

    choice = min(eligible, key=order)
    out = Recommendation(choice, now, target, measure, "")
    parts = [f"{rule}: trigger {setting_text(kind, choice.value)}"]
    if out.is_current:
        parts.append("the current setting")
    elif out.saving is not None:
        word = "cheaper" if measure == "cost" else "fewer tokens"
        if out.saving >= 0:
            parts.append(f"{out.saving * 100:.0f}% {word} than now")
        else:
            parts.append(f"{-out.saving * 100:.0f}% {'dearer' if measure == 'cost' else 'more tokens'} than now "
                         "(the current setting misses the rule)")
    recall_text = f"recall {_pct(choice.figures.recall)}"
    if now is not None and not out.is_current:
        recall_text += f" against {_pct(now.figures.recall)}"
    parts.append(recall_text)
    sentence = ", ".join(parts)
    return Recommendation(choice, now, target, measure, sentence[0].upper() + sentence[1:])
