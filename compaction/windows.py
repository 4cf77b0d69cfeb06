"""Context windows and prices from litellm's bundled model table (no litellm import)."""
from __future__ import annotations

from ._env import model_table


def _lookup(model: str) -> dict | None:
    table = model_table()
    if model in table:
        return table[model]
    # "openai/gpt-4o" -> "gpt-4o"; providers prefix names differently.
    tail = model.split("/", 1)[-1]
    return table.get(tail)


def model_window(model: str | None) -> int | None:
    if not model:
        return None
    info = _lookup(model)
    if not info:
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None


def resolve_window(policy) -> tuple[int, str]:
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
