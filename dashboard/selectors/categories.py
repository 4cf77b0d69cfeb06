"""Token categories as the pages name them."""
from __future__ import annotations

from typing import Any

from compaction.tokens import CATEGORIES

CATEGORY_LABELS = {
    "system": "system", "tools": "tool schemas", "user": "user", "assistant": "assistant text",
    "tool_calls": "tool calls", "tool_results": "tool results", "summary": "summary",
}


def category_rows(before: dict[str, int] | None, after: dict[str, int] | None) -> list[dict[str, Any]]:
    """Tokens by category before and after a run (categories both sides lack are left out)."""
    before, after = before or {}, after or {}
    rows = []
    for c in [*CATEGORIES, "total"]:
        b, a = before.get(c, 0) or 0, after.get(c, 0) or 0
        if b or a or c == "total":
            rows.append({"category": CATEGORY_LABELS.get(c, c), "before": b, "after": a, "delta": a - b,
                         "total": c == "total"})
    return rows
