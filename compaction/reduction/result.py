"""What a reduction step returns: the new message list and everything the caller must record."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..archive import ArchiveEntry
from ..messages import Message

EVENT_TRUNCATED = "tool_output_truncated"
EVENT_CLEARED = "tool_output_cleared"
EVENT_WARNING = "reduction_warning"
EVENT_ABANDONED = "tool_output_clearing_abandoned"


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
    events: list[dict] = field(default_factory=list)
    ledger: list[dict] = field(default_factory=list)
    tokens_cleared: int = 0
    tokens_truncated: int = 0
    abandoned: str | None = None

    @property
    def changed(self) -> bool:
        return self.abandoned is None and bool(self.ledger)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_cleared + self.tokens_truncated

    def __bool__(self) -> bool:
        return self.changed

    def to_dict(self) -> dict:
        return {"abandoned": self.abandoned, "tokens_cleared": self.tokens_cleared,
                "tokens_truncated": self.tokens_truncated, "events": self.events, "ledger": self.ledger,
                "archive_refs": [e.id for e in self.entries]}
