"""The look-ahead evaluator a replay drives, and its report.

At each model call of a recorded session the evaluator knows the context the policy would
have sent *and* the assistant message that was actually written next. *Needed-context
recall* is the share of the identifiers that message used from earlier history
(:mod:`.needed`) still present in the context sent. The same figure is computed for the two
baselines of :mod:`.baselines` in the same pass, with each strategy's context size and its
prompt-cache behaviour (:mod:`.cache`).

A missing identifier is put down to the step that lost it: *reduction* when a message that
held it is still in the context but was edited (tool output cleared or truncated), else
*eviction* (every message that held it was summarized away or dropped, and the summary
did not carry it).

Totals pool the calls (kept over needed across all calls), so a call that needed twenty
identifiers weighs twenty times one that needed one. Calls that needed nothing from
earlier history have no recall of their own and do not move the total.

Everything in the report is computed from the messages and token counts alone (sorted
lists, rounded figures), so the same replay gives the same report byte for byte.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, Provenance, original_id
from ..tokens import MessageCounter, MessageTokens
from .baselines import MASK_PLACEHOLDER, ObservationMasking, SlidingWindow
from .cache import CacheMeter, Prices, shared_prefix
from .needed import History, NeededMemo, contains, message_text

#: Missing identifiers listed per call at most.
MISSING_PER_CALL = 10


def _ratio(kept: int, needed: int) -> float | None:
    return round(kept / needed, 4) if needed else None


@dataclass
class StrategyFigures:
    """Recall, context size and cache figures of one strategy over the calls so far."""

    needed: int = 0
    kept: int = 0
    context_tokens: int = 0
    peak: int = 0
    overflow: int = 0
    lost_to_reduction: int = 0
    lost_to_eviction: int = 0
    cache: CacheMeter = field(default_factory=CacheMeter)

    def add(self, needed: int, kept: int, tokens: int, limit: int) -> None:
        self.needed += needed
        self.kept += kept
        self.context_tokens += tokens
        self.peak = max(self.peak, tokens)
        self.overflow += tokens > limit

    def to_dict(self, calls: int, prices: Prices | None) -> dict[str, Any]:
        return {"recall": _ratio(self.kept, self.needed), "needed": self.needed, "kept": self.kept,
                "mean_context_tokens": round(self.context_tokens / calls) if calls else 0,
                "peak_context_tokens": self.peak, "overflow_calls": self.overflow, **self.cache.to_dict(prices)}

    def policy_dict(self, calls: int, prices: Prices | None) -> dict[str, Any]:
        return {**self.to_dict(calls, prices),
                "lost": {"reduction": self.lost_to_reduction, "eviction": self.lost_to_eviction}}


@dataclass(frozen=True)
class LookAheadReport:
    calls: int
    usable_window: int
    prices: Prices | None
    price_model: str
    policy: StrategyFigures
    baselines: dict[str, StrategyFigures]
    per_call: list[dict[str, Any]]

    @property
    def recall(self) -> float | None:
        return _ratio(self.policy.kept, self.policy.needed)

    def to_dict(self) -> dict[str, Any]:
        """``recall``, ``needed``, ``kept``, ``lost`` (missing identifiers per step that lost
        them), ``mean_context_tokens``, cache figures, ``baselines``
        (the same figures per baseline), ``price_model`` and ``per_call`` rows."""
        return {**self.policy.policy_dict(self.calls, self.prices), "usable_window": self.usable_window,
                "price_model": self.price_model, "prices_known": self.prices is not None,
                "baselines": {name: f.to_dict(self.calls, self.prices) for name, f in self.baselines.items()},
                "per_call": self.per_call}


class LookAhead:
    """Feed it every original message (``append``) and every model call (``call``)."""

    def __init__(self, counter: MessageCounter, *, tools_tokens: int, usable_window: int, price_model: str,
                 overflow_above: int | None = None, memo: NeededMemo | None = None) -> None:
        """``usable_window`` is what the sliding window fits into; ``overflow_above`` the size
        over which a call counts as over the window (default: the usable window), so the
        baselines are counted as the replay counts the policy."""
        self.counter = counter
        self.tools_tokens = tools_tokens
        self.usable = usable_window
        self.overflow_above = overflow_above if overflow_above is not None else usable_window
        self.price_model = price_model
        self.history = History()
        self.memo = memo
        placeholder = counter.count(Message({"role": "tool", "tool_call_id": "call", "content": MASK_PLACEHOLDER},
                                            "placeholder", Provenance.ORIGINAL, 0)).total
        self.sliding = SlidingWindow(usable_window, tools_tokens)
        self.masking = ObservationMasking(tools_tokens, placeholder)
        self.figures = StrategyFigures()
        self.baseline_figures = {self.sliding.name: StrategyFigures(), self.masking.name: StrategyFigures()}
        self.per_call: list[dict[str, Any]] = []
        self._texts: dict[str, str] = {}
        self._previous: list[str] = []

    def append(self, raw: dict[str, Any]) -> None:
        """An original message, as recorded (before any truncation on arrival)."""
        position = len(self.history.texts)
        self.history.append(raw)
        tokens = self.counter.count(Message(raw, original_id(position), Provenance.ORIGINAL, position)).total
        role = str(raw.get("role"))
        self.sliding.append(role, tokens)
        self.masking.append(role, tokens)

    def _text(self, message: Message) -> str:
        text = self._texts.get(message.hash)
        if text is None:
            text = self._texts[message.hash] = message_text(message.raw)
        return text

    def call(self, at: int, next_message: dict[str, Any], context: Sequence[Message],
             tokens: Sequence[MessageTokens], total: int) -> None:
        """The model call that produced ``next_message``, sent with ``context`` (``total`` tokens)."""
        needed, spellings = self._needed(at, next_message)
        sent = "\n".join(self._text(m) for m in context)
        missing = [i for i in needed if not contains(sent, spellings[i])]
        kept = len(needed) - len(missing)

        fingerprints = [m.hash for m in context]
        common = shared_prefix(self._previous, fingerprints)
        extends = common == len(self._previous)
        shared = self.tools_tokens + sum(t.total for t in tokens[:common])
        self._previous = fingerprints
        broke = self.figures.cache.record(total, shared, extends)
        self.figures.add(len(needed), kept, total, self.overflow_above)

        row: dict[str, Any] = {"at": at, "context_tokens": total, "needed": len(needed), "kept": kept,
                               "recall": _ratio(kept, len(needed)), "cache_break": broke}
        for strategy in (self.sliding, self.masking):
            shape = strategy.call()
            seen = sum(1 for positions in needed.values() if any(strategy.visible(p) for p in positions))
            figures = self.baseline_figures[strategy.name]
            figures.cache.record(shape.tokens, shape.shared, shape.extends)
            figures.add(len(needed), seen, shape.tokens, self.overflow_above)
            row[f"kept_{strategy.name}"] = seen
        if missing:
            row["missing"] = missing[:MISSING_PER_CALL]
            live = {m.ordinal for m in context if m.ordinal is not None}  # held, but edited
            by_reduction = sum(1 for i in missing if any(p in live for p in needed[i]))
            self.figures.lost_to_reduction += by_reduction
            self.figures.lost_to_eviction += len(missing) - by_reduction
        self.per_call.append(row)

    def _needed(self, at: int, next_message: dict[str, Any]) -> tuple[dict[str, list[int]], dict[str, tuple[str, ...]]]:
        """The identifiers the call at ``at`` needed, with their spellings (from the memo of an
        earlier replay of the same messages when there is one)."""
        if self.memo is not None and at in self.memo.at:
            return self.memo.at[at]
        needed = self.history.needed(next_message)
        found = ({i: list(p) for i, p in needed.items()}, {i: self.history.spellings(i) for i in needed})
        if self.memo is not None:
            self.memo.at[at] = found
        return found

    def report(self) -> LookAheadReport:
        return LookAheadReport(calls=len(self.per_call), usable_window=self.usable, prices=Prices.of(self.price_model),
                               price_model=self.price_model, policy=self.figures, baselines=self.baseline_figures,
                               per_call=self.per_call)
