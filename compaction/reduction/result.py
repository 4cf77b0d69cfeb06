"""What a reduction step returns: the new message list and everything the caller must record."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..archive import ArchiveEntry
from ..messages import Message
from .marks import Phase

EVENT_TRUNCATED = "tool_output_truncated"
EVENT_CLEARED = "tool_output_cleared"
EVENT_WARNING = "reduction_warning"
EVENT_ABANDONED = "tool_output_clearing_abandoned"

ReducedFate = Literal["truncated", "cleared"]


@dataclass(frozen=True)
class ReductionLedgerRow:
    """One edit of one message: what it cost before and after, why, and where the original went."""

    message_id: str
    fate: ReducedFate
    tokens_before: int
    tokens_after: int
    reason: str
    archive_ref: str | None
    phase: Phase

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "fate": self.fate, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "reason": self.reason, "archive_ref": self.archive_ref,
                "phase": self.phase}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReductionLedgerRow:
        return cls(data["message_id"], data["fate"], data["tokens_before"], data["tokens_after"], data["reason"],
                   data.get("archive_ref"), data["phase"])


@dataclass
class ReductionResult:
    """Outcome of :func:`on_append` or :func:`before_call`.

    ``messages`` is a new list (unchanged Message objects reused, edited ones replaced by
    copies carrying ``meta["reduction"]``). ``entries`` are the ``offloaded`` archive entries
    holding the originals; the caller writes them once it commits the new list, before
    anyone can ask to load them. When ``abandoned`` is set nothing changed: ``messages`` is
    the input list and ``entries`` is empty (``events`` may still hold warnings).
    """

    messages: list[Message]
    entries: list[ArchiveEntry] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    ledger_rows: list[ReductionLedgerRow] = field(default_factory=list)
    tokens_cleared: int = 0
    tokens_truncated: int = 0
    abandoned: str | None = None

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """The ledger rows in their stored (JSON) form."""
        return [row.to_dict() for row in self.ledger_rows]

    @property
    def changed(self) -> bool:
        return self.abandoned is None and bool(self.ledger_rows)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_cleared + self.tokens_truncated

    def __bool__(self) -> bool:
        return self.changed

    def to_dict(self) -> dict[str, Any]:
        return {"abandoned": self.abandoned, "tokens_cleared": self.tokens_cleared,
                "tokens_truncated": self.tokens_truncated, "events": self.events, "ledger": self.ledger,
                "archive_refs": [e.id for e in self.entries]}
