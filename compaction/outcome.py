"""What a compaction returns: the new context, what changed, and why."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .ledger import LedgerRow
from .messages import Message


@dataclass(frozen=True)
class Skipped:
    """No compaction happened; ``reason`` says why. Falsy, so ``if outcome:`` reads naturally."""
    reason: str
    trigger: dict[str, Any] | None = None
    #: the compaction would have freed too little: the trigger waits for this many new tokens
    wait_tokens: int = 0

    def __bool__(self) -> bool:
        return False

    def to_dict(self) -> dict[str, Any]:
        out = {"compacted": False, "reason": self.reason, "trigger": self.trigger}
        if self.wait_tokens:
            out["wait_tokens"] = self.wait_tokens
        return out


@dataclass(frozen=True)
class Outcome:
    """A finished compaction, built once from the results of its steps. ``ledger_rows`` is the
    typed ledger; ``ledger`` (and ``to_dict()``) give it in the stored JSON form."""
    messages: list[Message]
    context: list[dict[str, Any]]
    tokens_before: dict[str, int]
    tokens_after: dict[str, int]
    # messages of the context as sent (``render_messages``), before and after: what the
    # service's GET context lists; ``len(messages)`` is the engine's own count
    messages_before: int
    messages_after: int
    archive_refs: list[str]
    ledger_rows: tuple[LedgerRow, ...]
    events: list[dict[str, Any]]
    trigger: dict[str, Any] | None = None
    summary: str | None = None
    model: str | None = None
    extractive: bool = False
    prompt: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    #: scores retention when ``retention`` is first read (a service writes the new context
    #: first and scores it after: the scan of the evicted span is ~10 ms of a 500-message run)
    retention_of: Callable[[], dict[str, Any] | None] | None = field(default=None, repr=False, compare=False)
    compression: float | None = None
    evicted_messages: int = 0
    summary_tokens: int = 0
    tokens_cleared: int = 0
    tokens_truncated: int = 0
    reduction_events: int = 0
    summarized: bool = False
    cut: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    clipped: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return True

    @cached_property
    def retention(self) -> dict[str, Any] | None:
        """Share of the evicted span's identifiers the new context still holds
        (:func:`compaction.retention.retention`); None when nothing was summarized."""
        return self.retention_of() if self.retention_of is not None else None

    @property
    def ledger(self) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.ledger_rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "compacted": True,
            "summarized": self.summarized,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "archive_refs": self.archive_refs,
            "trigger": self.trigger,
            "summary": self.summary,
            "model": self.model,
            "extractive": self.extractive,
            "prompt": self.prompt,
            "attempts": self.attempts,
            "retention": self.retention,
            "compression": self.compression,
            "evicted_messages": self.evicted_messages,
            "summary_tokens": self.summary_tokens,
            "tokens_cleared": self.tokens_cleared,
            "tokens_truncated": self.tokens_truncated,
            "reduction_events": self.reduction_events,
            "cut": self.cut,
            "notes": self.notes,
            "clipped": self.clipped,
            "ledger": self.ledger,
            "events": self.events,
            "messages": [m.to_dict() for m in self.messages],
            "context": self.context,
        }
