"""Context windows and prices from litellm's bundled model table (no litellm import)."""
from __future__ import annotations

from typing import Any, Protocol

from ._env import model_table


class WindowSettings(Protocol):
    """The policy settings that decide the window (a Policy has them all)."""

    @property
    def model(self) -> str | None: ...
    @property
    def context_window(self) -> int | None: ...
    @property
    def fallback_context_window(self) -> int: ...


def usable_window(window: int, reserved: int) -> int:
    """Window minus the room reserved for output. The reserve never takes more than a
    quarter of the window, so a 4,096-token reserve meant for large models does not
    swallow a small one."""
    return max(1, window - min(reserved, window // 4))


def _lookup(model: str) -> dict[str, Any] | None:
    table = model_table()
    found: dict[str, Any] | None = table.get(model)
    if found is not None:
        return found
    # "openai/gpt-4o" -> "gpt-4o"; providers prefix names differently.
    tail = model.split("/", 1)[-1]
    found = table.get(tail)
    return found


def model_window(model: str | None) -> int | None:
    if not model:
        return None
    info = _lookup(model)
    if not info:
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None


def resolve_window(policy: WindowSettings) -> tuple[int, str]:
    """(window tokens, where it came from): override, litellm table, or fallback."""
    if policy.context_window:
        return policy.context_window, "policy override"
    found = model_window(policy.model)
    if found:
        return found, f"litellm model table ({policy.model})"
    return policy.fallback_context_window, "fallback"


def price_per_token(model: str | None) -> tuple[float, float] | None:
    """(input, output) USD per token, or None when litellm does not know the model."""
    if not model:
        return None
    info = _lookup(model)
    if not info or "input_cost_per_token" not in info:
        return None
    return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)


def cache_prices(model: str | None) -> tuple[float, float, float] | None:
    """(input, cache read, cache write) USD per prompt token, or None when litellm does not
    know the model. A model without a listed cache-read price gets its input price (no
    discount); one without a cache-write price pays the input price for what it caches."""
    if not model:
        return None
    info = _lookup(model)
    if not info or "input_cost_per_token" not in info:
        return None
    base = float(info.get("input_cost_per_token") or 0.0)
    read = info.get("cache_read_input_token_cost")
    write = info.get("cache_creation_input_token_cost")
    return base, float(read) if read is not None else base, float(write) if write else base
