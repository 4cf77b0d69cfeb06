"""One set of numbers for a replay: what a policy sends and what it costs, against what it
keeps. The tuning preview, the threshold sweep and ``compare`` all read their figures from
here, so the same setting over the same session shows the same cost and the same recall
wherever it is shown.

*Cost* is the agent's input cost. It is priced twice: with the model's prompt-cache prices
(the shared prefix of consecutive calls at the cache-read price, the rest at the cache-write
price; :mod:`.evaluation.cache`) and at the plain input price, as if nothing were cached.
Models without cache prices in litellm's table pay the input price for both, so the two
figures are equal there. No compaction sends an append-only context, so every call after
the first reads the previous call's whole context from the cache.

*Needed-context recall* pools the calls: identifiers kept over identifiers needed across all
calls and sessions (:func:`recall`). Figures keep the two counts, never a rounded ratio, so
summing sessions and rounding for display happen once each, in one place.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from .evaluation.cache import CacheMeter, Prices


def recall(kept: int, needed: int) -> float | None:
    """Needed-context recall: the share of needed identifiers kept; None when nothing was needed."""
    return kept / needed if needed else None


def _plus(a: float | None, b: float | None) -> float | None:
    """Dollar figures add up; one unknown price makes the total unknown."""
    return None if a is None or b is None else a + b


def append_only_costs(per_call: Sequence[int], prices: Prices | None) -> tuple[float | None, float | None]:
    """(cache-priced, uncached) input cost of calls whose contexts only ever grow by
    appending (no compaction): each call shares the whole previous context."""
    meter = CacheMeter()
    previous = 0
    for total in per_call:
        meter.record(total, previous, True)
        previous = total
    return meter.cost(prices), None if prices is None else meter.input_tokens * prices.input


@dataclass
class ReplayFigures:
    """Sums over one or more replays of one policy setting (``+`` adds sessions)."""

    calls: int = 0
    tokens_sent: int = 0
    tokens_baseline: int = 0
    needed: int = 0
    kept: int = 0
    #: Agent input cost with cache pricing, and at the plain input price.
    cost_usd: float | None = 0.0
    cost_without_cache_usd: float | None = 0.0
    #: The same two costs without compaction.
    baseline_cost_usd: float | None = 0.0
    baseline_cost_without_cache_usd: float | None = 0.0
    #: Summaries at the summarizer model's price (0 without one; None: price unknown).
    summary_cost_usd: float | None = 0.0
    cache_breaks: int = 0
    overflow_calls: int = 0
    compactions: int = 0
    summaries: int = 0
    retention_sum: float = 0.0
    retention_count: int = 0

    @property
    def recall(self) -> float | None:
        return recall(self.kept, self.needed)

    @property
    def retention(self) -> float | None:
        return self.retention_sum / self.retention_count if self.retention_count else None

    def __add__(self, other: ReplayFigures) -> ReplayFigures:
        out = ReplayFigures()
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            setattr(out, f.name, _plus(a, b) if f.name.endswith("_usd") else a + b)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The stored form: counts and unrounded dollars (rounding is for display)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplayFigures:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
