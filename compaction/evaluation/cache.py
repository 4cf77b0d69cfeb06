"""Prompt-cache breaks and the effective input cost of a run of model calls.

Providers cache a prompt's prefix: the next call pays the cache-read price for the part
it shares with the previous call's prompt and the full (or cache-write) price for the
rest. A call *breaks the cache* when its context is not an extension of the previous
call's (something before the end was rewritten: a summary, a cleared tool output, a
dropped message). A compaction that saves tokens but breaks the cache on every call can
cost more than sending more tokens from cache, which is what these figures show.

Prices come from litellm's bundled model table (:func:`compaction.windows.cache_prices`,
no network, no litellm import). The shared prefix is measured in whole messages (tool
definitions first), a close stand-in for the provider's token-level prefix match; the
minimum cacheable length some providers apply (1,024 tokens) is ignored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..windows import cache_prices

#: Model priced when neither the caller nor the policy names one.
DEFAULT_PRICE_MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class Prices:
    model: str
    input: float
    cache_read: float
    cache_write: float

    @classmethod
    def of(cls, model: str) -> Prices | None:
        found = cache_prices(model)
        return None if found is None else cls(model, *found)


def choose_price_model(explicit: str | None, agent_model: str | None) -> str:
    """The model whose prices apply: the one asked for, else the agent's, else the default."""
    return explicit or agent_model or DEFAULT_PRICE_MODEL


class CacheMeter:
    """Feed it each call's context size and the tokens it shares with the previous call."""

    def __init__(self) -> None:
        self.calls = 0
        self.breaks = 0
        self.input_tokens = 0
        self.cached_tokens = 0

    def record(self, total: int, shared: int, extends: bool) -> bool:
        """One model call; returns whether it broke the cache (the first call never does)."""
        broke = self.calls > 0 and not extends
        self.calls += 1
        self.breaks += broke
        self.input_tokens += total
        self.cached_tokens += min(shared, total) if self.calls > 1 else 0
        return broke

    def cost(self, prices: Prices | None) -> float | None:
        if prices is None:
            return None
        fresh = self.input_tokens - self.cached_tokens
        return self.cached_tokens * prices.cache_read + fresh * prices.cache_write

    def to_dict(self, prices: Prices | None) -> dict[str, Any]:
        cost = self.cost(prices)
        full = None if prices is None else self.input_tokens * prices.input
        return {"cache_breaks": self.breaks, "input_tokens": self.input_tokens, "cached_tokens": self.cached_tokens,
                "cost_usd": None if cost is None else round(cost, 6),
                "cost_without_cache_usd": None if full is None else round(full, 6)}


def shared_prefix(previous: list[str], current: list[str]) -> int:
    """How many leading entries two fingerprint lists share."""
    n = min(len(previous), len(current))
    if current[:n] == previous[:n]:
        return n
    lo, hi = 0, n  # the first lo entries match, the first hi do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if current[:mid] == previous[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
