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
#: Fates whose contiguous messages collapse into one row: the span the summary replaced
#: (preserved messages included: the row counts those re-inserted verbatim after it).
COLLAPSED_FATES = EVICTED_FATES


def archive_refs_by_message(run: CompactionRun) -> dict[str, dict[str, Any]]:
    """message id -> {entry, kind, index} for what this run archived."""
    out: dict[str, dict[str, Any]] = {}
    for item in (ArchiveItem.objects.filter(entry__run_id=run.pk)
                 .values("message_id", "index", "entry__entry_id", "entry__kind")):
        out.setdefault(item["message_id"], {"entry": item["entry__entry_id"], "kind": item["entry__kind"],
                                            "index": item["index"]})
    return out


def _changed(fate: str, reduced: bool) -> bool:
    return fate not in ("kept", "pinned") or reduced


def page_bounds(ledger: list[dict[str, Any]], offset: int, limit: int) -> tuple[int, int]:
    """Ledger rows ``[offset, end)`` of one page: ``limit`` rows as shown, a collapsed span
    counting as one row and never split at the page's end."""
    offset = max(0, min(offset, len(ledger) - 1))
    shown, i = 0, offset
    while i < len(ledger) and shown < limit:
        if ledger[i].get("fate") in COLLAPSED_FATES:
            while i < len(ledger) and ledger[i].get("fate") in COLLAPSED_FATES:
                i += 1
        else:
            i += 1
        shown += 1
    return offset, i


def before_after(run: CompactionRun, offset: int = 0, limit: int = ROWS_PER_PAGE) -> dict[str, Any]:
    """Rows aligning the context before the run with the context after it, by message.

    Left: each message of the snapshot (originals from the history, earlier summaries from
    the archive). Right: what became of it (kept, cleared/truncated with sizes, evicted,
    re-inserted). Contiguous evicted messages collapse into one ``span`` row (its messages
    listed inside, for expanding), the first span beside the summary that replaced it."""
    ledger = run.ledger or []
    offset, end = page_bounds(ledger, offset, limit)
    window = ledger[offset:end]
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
    span: dict[str, Any] | None = None
    for k, r in enumerate(window):
        m = originals.get(r["ordinal"]) if r.get("ordinal") is not None else None
        text = text_of(m.raw.get("content")) if m is not None else prev_texts.get(r["message_id"], "")
        calls = [((c.get("function") or {}).get("name") or "") for c in (m.raw.get("tool_calls") or [])] if m else []
        fate = r.get("fate", "")
        reduced = fate in ("cleared", "truncated") or (
            fate == "kept" and (r.get("tokens_after") or 0) < (r.get("tokens_before") or 0))
        row = {"kind": "message", "row": r, "text": text, "calls": calls, "fate": fate,
               "ref": refs.get(r["message_id"]), "reduced": reduced, "changed": _changed(fate, reduced)}
        if fate not in COLLAPSED_FATES:
            span = None
            if first_evicted is not None and offset + k == first_evicted and run.summary:
                rows.append({"kind": "summary", "changed": True})
            rows.append(row)
            continue
        if span is None:
            span = {"kind": "span", "items": [], "tokens": 0, "changed": True,
                    "summary": bool(run.summary) and first_evicted is not None and offset + k == first_evicted}
            rows.append(span)
        span["items"].append(row)
        span["tokens"] += r.get("tokens_before") or 0
    for row in rows:
        if row["kind"] == "span":
            ords = [i["row"].get("ordinal") for i in row["items"] if i["row"].get("ordinal") is not None]
            row.update(count=len(row["items"]), first=min(ords) if ords else None, last=max(ords) if ords else None,
                       preserved=sum(1 for i in row["items"] if i["fate"] == "preserved"))
    return {"rows": rows, "offset": offset, "limit": limit, "total": len(ledger),
            "changes": sum(1 for row in rows if row["changed"]),
            "next": end if end < len(ledger) else None,
            "prev": max(0, offset - limit) if offset > 0 else None, "end": end}
