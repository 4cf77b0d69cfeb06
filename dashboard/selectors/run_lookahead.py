"""The run page's look-ahead: did the context this run produced still hold what the agent
used next?

The next assistant message recorded after the run's snapshot is compared with the history
the snapshot covered (compaction.evaluation.needed): of the identifiers that message used
from that history, the share visible in the run's result. The result is rebuilt from the
run's ledger and summary: messages kept, pinned or re-inserted count with their original
text; cleared, truncated or otherwise reduced ones count as not visible (their edited text
is not stored), so the figure errs low, never high.
"""
from __future__ import annotations

from typing import Any

from compaction.evaluation.needed import History, contains
from compaction.figures import recall as pooled_recall

from ..models import CompactionRun, StoredMessage

#: Ledger fates whose message stays in the result with its text.
VISIBLE_FATES = ("kept", "pinned", "preserved")
#: Missing identifiers listed at most.
MISSING_SHOWN = 30


def _visible(row: dict[str, Any]) -> bool:
    if row.get("fate") not in VISIBLE_FATES or row.get("ordinal") is None:
        return False
    return row.get("fate") == "preserved" or (row.get("tokens_after") or 0) >= (row.get("tokens_before") or 0)


def run_position(run: CompactionRun) -> int | None:
    """Original messages the run's snapshot covered (exact, from its ledger)."""
    ords = [r.get("ordinal") for r in run.ledger or [] if r.get("ordinal") is not None]
    return max(ords) + 1 if ords else None


def run_lookahead(run: CompactionRun, position: int | None) -> dict[str, Any] | None:
    """``{"at", "needed", "kept", "recall", "missing"}`` for the first assistant message after
    the run's snapshot; ``{"at": None}`` when the session has none yet; None when the run
    produced no result to judge."""
    if position is None or not run.ledger:
        return None
    nxt = (StoredMessage.objects.filter(session_id=run.session_id, position__gte=position, role="assistant")
           .order_by("position").only("position", "raw").first())
    if nxt is None:
        return {"at": None}
    history = History()
    for raw in (StoredMessage.objects.filter(session_id=run.session_id, position__lt=position)
                .order_by("position").values_list("raw", flat=True)):
        history.append(raw)
    needed = history.needed(nxt.raw)
    visible_positions = {r["ordinal"] for r in run.ledger if _visible(r)}
    summary = (run.summary or "").lower()
    missing = []
    for ident, positions in needed.items():
        if any(p in visible_positions for p in positions) or contains(summary, history.spellings(ident)):
            continue
        missing.append(ident)
    kept = len(needed) - len(missing)
    return {"at": nxt.position, "needed": len(needed), "kept": kept,
            "recall": pooled_recall(kept, len(needed)), "missing": missing[:MISSING_SHOWN],
            "more_missing": max(0, len(missing) - MISSING_SHOWN)}
