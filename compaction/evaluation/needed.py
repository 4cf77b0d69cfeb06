"""Needed context: the identifiers a recorded assistant message used that the session had
already shown before it was written.

"Identifiers" are those of :mod:`compaction.retention` (paths, URLs, UUIDs, hashes, numbers
with units, error names, code names) read from the assistant's text and its tool-call
arguments. One is *needed* when it occurs, case-insensitively, anywhere in an earlier
message (any role: a path the agent saw in a tool result counts). Identifiers the message
introduces itself are not needed context: no compaction could have kept them.

:class:`History` indexes the session as it grows and answers, per identifier, in which
earlier messages it occurs; each identifier is looked for once per message, so the cost
stays proportional to (distinct identifiers x history) however many calls ask again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..retention import extract_identifiers, render_text


def message_text(raw: dict[str, Any]) -> str:
    """Lower-cased text of one message as presence checks read it (content, tool-call
    names and arguments)."""
    return render_text([raw]).lower()


def variants(identifier: str, is_number: bool) -> tuple[str, ...]:
    """The spellings of an identifier that count as the same one (lower case): a number
    with a unit with or without its space, a Windows path with JSON-escaped backslashes."""
    low = identifier.lower()
    if is_number and " " in low:
        return low, low.replace(" ", "")
    if "\\" in low:
        return low, low.replace("\\", "\\\\")
    return (low,)


def used_identifiers(raw: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Identifiers an assistant message wrote (its text and tool-call arguments), each with
    its spellings; sorted keys, so reports built from them are stable."""
    ids = extract_identifiers([raw])
    numbers = ids.by_kind["number_unit"]
    return {i: variants(i, i in numbers) for i in sorted(ids.referenced)}


def contains(text: str, spellings: tuple[str, ...]) -> bool:
    return any(s in text for s in spellings)


@dataclass
class _Seen:
    """Where one identifier occurs among the messages scanned so far."""

    spellings: tuple[str, ...]
    positions: list[int] = field(default_factory=list)
    scanned: int = 0


class History:
    """The session's messages so far (lower-cased text), with per-identifier occurrence lists."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._seen: dict[str, _Seen] = {}

    def append(self, raw: dict[str, Any]) -> None:
        self.texts.append(message_text(raw))

    def occurrences(self, identifier: str, spellings: tuple[str, ...]) -> list[int]:
        """Positions of the messages (so far) holding ``identifier``, oldest first."""
        seen = self._seen.get(identifier)
        if seen is None:
            seen = self._seen[identifier] = _Seen(spellings)
        texts = self.texts
        for position in range(seen.scanned, len(texts)):
            if contains(texts[position], spellings):
                seen.positions.append(position)
        seen.scanned = len(texts)
        return seen.positions

    def needed(self, raw: dict[str, Any]) -> dict[str, list[int]]:
        """Identifiers ``raw`` (the next assistant message) used that occur in an earlier
        message, with the positions of those messages."""
        out: dict[str, list[int]] = {}
        for ident, spellings in used_identifiers(raw).items():
            positions = self.occurrences(ident, spellings)
            if positions:
                out[ident] = positions
        return out

    def spellings(self, identifier: str) -> tuple[str, ...]:
        return self._seen[identifier].spellings


@dataclass
class NeededMemo:
    """What each model call of one session needed (:meth:`History.needed` at that call, with
    the identifiers' spellings), kept for the next replay of the same messages: it depends on
    the messages alone, not on the policy, so replays of one session under many policies (a
    tuning grid) scan the history once. Positions are copied when stored: a ``History``'s
    lists grow as the session does."""

    at: dict[int, tuple[dict[str, list[int]], dict[str, tuple[str, ...]]]] = field(default_factory=dict)

