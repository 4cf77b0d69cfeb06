"""The ledger of a compaction: one row per message of the context it started from, saying
what became of that message, what it cost before and after, and why."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .messages import Message, Provenance
from .reduction.result import ReductionLedgerRow
from .tailoring import DropCause
from .tokens import MessageTokens

Fate = Literal["kept", "summarized", "preserved", "pinned", "folded", "dropped", "cleared", "truncated"]

FATE_REASONS: dict[Fate, str] = {
    "summarized": "in the evicted span; replaced by the summary (original archived)",
    "preserved": "evicted, and re-inserted verbatim as a recent user message",
    "pinned": "pinned: never evicted",
    "folded": "previous summary folded into the new one",
    "kept": "in the kept head or tail",
}


def drop_reason(cause: DropCause, history_runs: int) -> str:
    if cause == "history_runs":
        return f"dropped: older than the last {history_runs} run(s) (history-runs limit)"
    return "dropped: oldest round over the token budget (token tailoring)"


@dataclass(frozen=True)
class LedgerRow:
    message_id: str
    ordinal: int | None
    role: str
    provenance: Provenance
    fate: Fate
    tokens_before: int
    tokens_after: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "ordinal": self.ordinal, "role": self.role,
                "provenance": self.provenance.value, "fate": self.fate, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerRow:
        return cls(data["message_id"], data.get("ordinal"), data["role"], Provenance(data["provenance"]),
                   data["fate"], data["tokens_before"], data["tokens_after"], data.get("reason") or "")


def build_ledger(before: list[Message], before_tokens: list[MessageTokens], after_tokens: Mapping[str, int], *,
                 fates: Mapping[str, Fate], reduced: Mapping[str, ReductionLedgerRow],
                 dropped: Mapping[str, str]) -> tuple[LedgerRow, ...]:
    """Rows for ``before`` in order. ``after_tokens``: tokens of each message id still in the
    new context; ``fates``: what the summary step decided; ``reduced``: the latest reduction
    edit of a message; ``dropped``: message id -> why the final budget step dropped it (this
    overrides everything else)."""
    rows = []
    for m, t in zip(before, before_tokens):
        red = reduced.get(m.id)
        fate: Fate
        if m.id in dropped:
            fate, reason, tokens_after = "dropped", dropped[m.id], 0
        else:
            fate = fates.get(m.id) or (red.fate if red else ("kept" if m.id in after_tokens else "summarized"))
            reason = FATE_REASONS.get(fate, red.reason if red else "")
            if red and fate not in ("cleared", "truncated"):
                reason += f"; earlier {red.fate} ({red.reason})"
            tokens_after = after_tokens.get(m.id, 0)
        rows.append(LedgerRow(m.id, m.ordinal, m.role, m.provenance, fate, t.total, tokens_after, reason))
    return tuple(rows)
