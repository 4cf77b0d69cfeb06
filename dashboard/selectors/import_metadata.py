"""What the lists show of a session's import metadata (``Session.metadata``).

Imports keep what their file said: a corpus file's ``id``, ``source``, ``license`` and
``meta``, an OpenAI request's ``metadata``, or explicit ``tags``. The lists show the
external id uncut, the source, and a few short values as chips; everything is text (the
template escapes it), and odd shapes (a number where a list was expected) are read as text
rather than refused, since the file is already imported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import Session

#: ``meta`` keys whose short values describe a session well enough to be chips.
META_CHIP_KEYS = ("format", "agent", "benchmark", "set", "exit_status")
#: Longest chip text; chips are labels, not content.
CHIP_CHARS = 60
#: Chips shown at most per session.
MAX_CHIPS = 8


@dataclass(frozen=True)
class MetadataView:
    external_id: str
    source: str
    license: str
    chips: tuple[str, ...]


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text[:CHIP_CHARS] if text else None


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip()[:CHIP_CHARS] for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [t for t in (_scalar(v) for v in value) if t]
    return []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def metadata_view(session: Session) -> MetadataView:
    data = _mapping(session.metadata)
    meta, openai = _mapping(data.get("meta")), _mapping(data.get("metadata"))
    chips: list[str] = _tags(data.get("tags")) + _tags(meta.get("tags")) + _tags(openai.get("tags"))
    for key in META_CHIP_KEYS:
        value = _scalar(meta.get(key))
        if value:
            chips.append(f"{key}: {value}")
    for key, value in sorted(openai.items()):
        text = _scalar(value)
        if key != "tags" and text:
            chips.append(f"{key}: {text}")
    unique = tuple(dict.fromkeys(chips))[:MAX_CHIPS]
    ident = data.get("id")
    return MetadataView(external_id=session.external_id or (str(ident) if isinstance(ident, str | int) else ""),
                        source=str(data.get("source") or "")[:500], license=str(data.get("license") or "")[:200],
                        chips=unique)
