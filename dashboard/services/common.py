"""Small helpers shared by the services: token counters, text clean-up, timestamps."""
from __future__ import annotations

from datetime import UTC, datetime

# One MessageCounter per tokenizer per process (the engine keeps them), so its
# content-hash cache is shared by every request, run and simulation in the process.
from compaction.compactor import counter_for  # noqa: F401
from compaction.tokens import CATEGORIES


def empty_totals() -> dict:
    return {c: 0 for c in CATEGORIES}


def add_totals(totals: dict, by_category: dict, sign: int = 1) -> dict:
    for k, v in by_category.items():
        totals[k] = totals.get(k, 0) + sign * v
    return totals


def with_total(totals: dict) -> dict:
    out = {c: int(totals.get(c, 0)) for c in CATEGORIES}
    for k, v in totals.items():
        if k not in out and k != "total":
            out[k] = int(v)
    out["total"] = sum(v for k, v in out.items() if k != "total")
    return out


def clean_text(text: str) -> str:
    """Text safe for any database text column: no NUL, no lone surrogates."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def text_problem(value: str) -> str | None:
    """Why a user-supplied string cannot be stored as is, or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (no lone surrogates)"
    return None


def ts(dt: datetime | None) -> float | None:
    return dt.timestamp() if dt is not None else None


def now() -> datetime:
    return datetime.now(UTC)
