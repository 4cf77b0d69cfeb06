"""What a compaction returns: the new context, what changed, and why."""
from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Message


@dataclass
class Skipped:
    """No compaction happened; ``reason`` says why. Falsy, so ``if outcome:`` reads naturally."""
    reason: str
    trigger: dict | None = None

    def __bool__(self) -> bool:
        return False

    def to_dict(self) -> dict:
        return {"compacted": False, "reason": self.reason, "trigger": self.trigger}


@dataclass
class Outcome:
    messages: list[Message]
    context: list[dict]
    tokens_before: dict
    tokens_after: dict
    messages_before: int
    messages_after: int
    archive_refs: list[str]
    ledger: list[dict]
    events: list[dict]
    trigger: dict | None = None
    summary: str | None = None
    model: str | None = None
    extractive: bool = False
    prompt: list[dict] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)
    retention: dict | None = None
    compression: float | None = None
    evicted_messages: int = 0
    summary_tokens: int = 0
    tokens_cleared: int = 0
    tokens_truncated: int = 0
    reduction_events: int = 0
    summarized: bool = False
    cut: dict | None = None
    notes: list[str] = field(default_factory=list)
    clipped: list[dict] = field(default_factory=list)

    def __bool__(self) -> bool:
        return True

    def to_dict(self) -> dict:
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
