"""Reads of the before/after page: the context a run was given and the one it produced,
aligned by message, with the summary where it replaced the evicted span."""
from __future__ import annotations

from typing import Any

from compaction.messages import Provenance, text_of

from ..models import ArchiveItem, CompactionRun, StoredMessage

#: Ledger rows per page.
ROWS_PER_PAGE = 150
#: Fates of the messages a summary replaced.
EVICTED_FATES = ("summarized", "folded", "preserved")


def archive_refs_by_message(run: CompactionRun) -> dict[str, dict[str, Any]]:
    """message id -> {entry, kind, index} for what this run archived."""
    out: dict[str, dict[str, Any]] = {}
    for item in (ArchiveItem.objects.filter(entry__run_id=run.pk)
                 .values("message_id", "index", "entry__entry_id", "entry__kind")):
        out.setdefault(item["message_id"], {"entry": item["entry__entry_id"], "kind": item["entry__kind"],
                                            "index": item["index"]})
    return out


def before_after(run: CompactionRun, offset: int = 0, limit: int = ROWS_PER_PAGE) -> dict[str, Any]:
    """Rows aligning the context before the run with the context after it, by message.

    Left: each message of the snapshot (originals from the history, earlier summaries from
    the archive). Right: what became of it (kept, cleared/truncated with sizes, evicted,
    re-inserted), with the summary block where it replaced the evicted span."""
    ledger = run.ledger or []
    offset = max(0, min(offset, len(ledger) - 1))
    window = ledger[offset: offset + limit]
    refs = archive_refs_by_message(run)
    ordinals = [r["ordinal"] for r in window if r.get("ordinal") is not None]
    originals = {m.position: m for m in StoredMessage.objects.filter(session_id=run.session_id, position__in=ordinals)
                 .only("position", "role", "raw", "tokens")}
    prev_texts: dict[str, str] = {}
    prev_ids = [r["message_id"] for r in window if r.get("provenance") == Provenance.SUMMARY.value]
    if prev_ids:
        for item in (ArchiveItem.objects.filter(entry__run_id=run.pk, message_id__in=prev_ids)
                     .only("message_id", "raw")):
            prev_texts[item.message_id] = text_of(item.raw.get("content"))
    first_evicted = next((i for i, r in enumerate(ledger) if r.get("fate") in EVICTED_FATES), None)
    rows: list[dict[str, Any]] = []
    for k, r in enumerate(window):
        if first_evicted is not None and offset + k == first_evicted and run.summary:
            rows.append({"kind": "summary"})
        m = originals.get(r["ordinal"]) if r.get("ordinal") is not None else None
        text = text_of(m.raw.get("content")) if m is not None else prev_texts.get(r["message_id"], "")
        calls = [((c.get("function") or {}).get("name") or "") for c in (m.raw.get("tool_calls") or [])] if m else []
        fate = r.get("fate", "")
        reduced = fate in ("cleared", "truncated") or (
            fate == "kept" and (r.get("tokens_after") or 0) < (r.get("tokens_before") or 0))
        rows.append({"kind": "message", "row": r, "text": text, "calls": calls, "fate": fate,
                     "ref": refs.get(r["message_id"]), "reduced": reduced})
    return {"rows": rows, "offset": offset, "limit": limit, "total": len(ledger),
            "next": offset + limit if offset + limit < len(ledger) else None,
            "prev": max(0, offset - limit) if offset > 0 else None}
