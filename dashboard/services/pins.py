"""Pinned messages: which of a write's messages the client asked to keep through every compaction.

A client pins a message by writing ``"pinned": true`` beside its fields, or by listing its
index in the body's ``pinned`` list. The flag is taken out of the message before anything is
stored (the dict sent to a provider stays the one the agent produced) and lands in the live
context item's ``meta``, where the engine honours it: the cut and token tailoring never
evict a pinned message, and tool-output reduction leaves it as it is.
"""
from __future__ import annotations

from typing import Any

from compaction.messages import Message

from . import Invalid

PINNED = "pinned"


class PinInvalid(Invalid):
    """A pin that names no message of the write; ``field`` is the body path at fault."""

    def __init__(self, detail: str, field: str = PINNED):
        super().__init__(detail)
        self.field = field


def split_pins(raws: Any, indexes: list[int] | None = None) -> tuple[Any, set[int]]:
    """(messages without the ``pinned`` field, positions to pin within the write).

    ``indexes`` are positions in ``raws``; the per-message field and the list may be mixed.
    The input dicts are not modified. Validates everything before returning."""
    if not isinstance(raws, list):
        if indexes:
            raise PinInvalid("pinned: pinning needs a list of messages")
        return raws, set()
    positions: set[int] = set()
    for k, index in enumerate(indexes or []):
        if isinstance(index, bool) or not isinstance(index, int):
            raise PinInvalid(f"pinned[{k}]: expected a message index, got {index!r}", f"pinned[{k}]")
        if not 0 <= index < len(raws):
            raise PinInvalid(f"pinned[{k}]: index {index} is outside the {len(raws)} message(s) of this request",
                             f"pinned[{k}]")
        if index in positions:
            raise PinInvalid(f"pinned[{k}]: index {index} is listed twice", f"pinned[{k}]")
        positions.add(index)
    if not any(isinstance(r, dict) and PINNED in r for r in raws):
        return raws, positions
    out = []
    for k, raw in enumerate(raws):
        if isinstance(raw, dict) and PINNED in raw:
            raw = dict(raw)
            flag = raw.pop(PINNED)
            if not isinstance(flag, bool):
                raise PinInvalid(f"messages[{k}].pinned: expected true or false, got {flag!r}",
                                 f"messages[{k}].pinned")
            if flag:
                positions.add(k)
        out.append(raw)
    return out, positions


def check_pins(positions: set[int], count: int, what: str = "messages") -> None:
    """Every position must name one of the ``count`` stored messages (after conversion)."""
    outside = sorted(p for p in positions if p >= count)
    if outside:
        raise PinInvalid(f"pinned: index {outside[0]} does not map to one of the {count} stored {what}; "
                         f"pin OpenAI-format messages, which map one to one")


def pin(messages: list[Message], positions: set[int]) -> list[Message]:
    """Mark the messages at ``positions`` (of this write) pinned in their live-context meta."""
    for k in positions:
        messages[k].meta[PINNED] = True
    return messages
