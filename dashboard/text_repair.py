"""Text read back from the database is always valid Unicode.

Older versions accepted messages holding lone surrogates (``"\\ud800"``) and stored them as
JSON escapes. Such text cannot be encoded as UTF-8, so every page, API answer, archive write
or summary that touched it failed. ``JSONTextField`` (dashboard.models) passes what it loads
through ``repaired``: lone surrogates become U+FFFD in memory, the stored row stays as it is.
A caller that writes something derived from what it read (a compaction run) wraps its reads
in ``counting_repairs()`` and reports the count, so no replacement happens silently.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from compaction.textsize import replace_lone_surrogates


@dataclass
class RepairCount:
    values: int = 0       # loaded values that held at least one lone surrogate
    characters: int = 0   # lone surrogates replaced


_current: ContextVar[RepairCount | None] = ContextVar("text_repairs", default=None)


@contextmanager
def counting_repairs() -> Iterator[RepairCount]:
    count = RepairCount()
    token = _current.set(count)
    try:
        yield count
    finally:
        _current.reset(token)


def repaired(text: str, value: Any) -> Any:
    """``value`` (parsed from the JSON ``text``) without lone surrogates. JSON written with
    ASCII escapes holds a surrogate only as ``\\udXXX``, so most texts skip the walk."""
    if "\\ud" not in text and "\\uD" not in text:
        return value
    fixed, n = replace_lone_surrogates(value)
    if n:
        count = _current.get()
        if count is not None:
            count.values += 1
            count.characters += n
    return fixed


def repaired_json_text(text: str) -> str:
    """A stored JSON text served as it is (the live context), with any lone surrogate
    replaced; the text itself when it holds none."""
    if "\\ud" not in text and "\\uD" not in text:
        return text
    fixed, n = replace_lone_surrogates(json.loads(text))
    return json.dumps(fixed, separators=(",", ":")) if n else text
