"""Reads of the before/after page: the context a run was given and the one it produced,
aligned by message, with the summary where it replaced the evicted span."""
from __future__ import annotations

from typing import Any

from compaction import Policy, PolicyError
from compaction.cut import LATEST_ROUND_NOTE
from compaction.messages import Provenance, text_of
from compaction.windows import resolve_window

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


#: Fates of the messages a run left in the context verbatim or reduced in place.
TAIL_FATES = ("kept", "pinned", "cleared", "truncated")
#: Start of the engine's note when the landing target moved the cut (compaction.steps.plan_eviction).
LANDING_NOTE = "moved the cut back past the tail bounds"


def _head_length(ledger: list[dict[str, Any]]) -> int:
    """Leading system/developer messages of the snapshot: the head the cut never evicts."""
    n = 0
    while (n < len(ledger) and ledger[n].get("role") in ("system", "developer")
           and ledger[n].get("provenance") == Provenance.ORIGINAL.value):
        n += 1
    return n


def _policy_of(run: CompactionRun) -> Policy | None:
    try:
        return Policy.load(run.policy_snapshot or {})
    except PolicyError:
        return None  # a snapshot an older policy schema wrote: the page names no figures


def kept_tail(run: CompactionRun) -> dict[str, Any] | None:
    """What the run kept verbatim after its summary (the kept tail) and why that many.

    The tail is bounded by ``cut.keep_messages`` and by ``cut.keep_fraction`` of the window in
    tokens, the smaller winning, so ``keep_messages`` is a ceiling: ``keep_fraction`` 0 keeps
    no message at all. Then the tail may start later (a user turn), earlier (a tool call
    stays with its results), or the landing target moves the cut further. ``reasons`` say
    which of these decided this run's tail, from the stored cut (``result.cut``: ``target``
    is where the two bounds put the tail's start, ``tail_start`` where it started) and the
    run's policy snapshot. None when the run made no cut (no summary)."""
    ledger = run.ledger or []
    cut = (run.result or {}).get("cut")
    if not ledger or not isinstance(cut, dict) or not isinstance(cut.get("tail_start"), int):
        return None
    n = len(ledger)
    start = min(max(cut["tail_start"], 0), n)
    target: int = cut["target"] if isinstance(cut.get("target"), int) else start
    notes = [str(note) for note in cut.get("notes") or []]
    tail = [r for r in ledger[start:] if r.get("fate") in TAIL_FATES]
    ordinals = [r["ordinal"] for r in tail if r.get("ordinal") is not None]
    policy = _policy_of(run)
    out: dict[str, Any] = {"count": len(tail), "first": min(ordinals) if ordinals else None,
                           "last": max(ordinals) if ordinals else None, "notes": notes, "reasons": []}
    reasons: list[str] = out["reasons"]
    if any(note.startswith(LANDING_NOTE) for note in notes):
        reasons.append("The landing target moved the cut past the tail bounds so that the context lands near it "
                       "(landing.target, landing.move_cut; figures in the note below).")
    elif policy is not None:
        keep, fraction = policy.cut.keep_messages, policy.cut.keep_fraction
        window, _source = resolve_window(policy)
        budget = int(fraction * window)
        allowed = n - target
        out.update(keep_messages=keep, keep_fraction=fraction, window=window, budget=budget)
        if LATEST_ROUND_NOTE in notes:
            # the bounds reached into the latest round: the engine kept it whole (compaction.cut rule 6)
            bound = (f"cut.keep_fraction is 0, so the tail may hold no tokens, whatever cut.keep_messages ({keep}) "
                     f"allows" if budget == 0 else
                     f"cut.keep_messages ({keep}) and cut.keep_fraction {fraction:g} of the {window:,}-token window "
                     f"(the smaller winning) allow less than it")
            reasons.append(f"Only the latest round stays: the last user message, or the last call with its results, "
                           f"kept verbatim whatever the tail bounds say (cut.keep_latest_round); {bound}.")
        elif allowed < keep and target > _head_length(ledger):
            if budget == 0:
                reasons.append(f"cut.keep_fraction is 0, so the tail may hold no tokens: no message stays verbatim, "
                               f"whatever cut.keep_messages ({keep}) allows. The smaller of the two bounds wins; "
                               f"cut.keep_fraction above 0 (1: no token bound) keeps up to {keep}.")
            else:
                reasons.append(f"cut.keep_fraction {fraction:g} of the {window:,}-token window allows {budget:,} "
                               f"tokens of tail: {allowed} message{'' if allowed == 1 else 's'} fit, fewer than "
                               f"cut.keep_messages ({keep}); the smaller of the two bounds wins.")
        elif allowed >= keep:
            reasons.append(f"cut.keep_messages ({keep}) bounds the tail"
                           + (f"; its {keep:,} messages fit in cut.keep_fraction {fraction:g} of the {window:,}-token "
                              f"window ({budget:,} tokens)." if keep else ": no message stays verbatim."))
        else:
            reasons.append("Every message after the head fits both tail bounds.")
    if start > target and not any(note.startswith(LANDING_NOTE) for note in notes):
        where = "a user turn" if cut.get("boundary") == "user_turn" else "the nearest safe boundary"
        later = start - target
        reasons.append(f"The tail starts {later} message{'' if later == 1 else 's'} after where the bounds put it, "
                       f"at {where} (cut.user_turn, cut.search).")
    elif start < target:
        earlier = target - start
        why = ("it starts at a user turn" if cut.get("boundary") == "user_turn"
               else "no tool call is separated from its results")
        reasons.append(f"The tail starts {earlier} message{'' if earlier == 1 else 's'} before where the bounds put "
                       f"it, so that {why}.")
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
    return {"rows": rows, "offset": offset, "limit": limit, "total": len(ledger), "tail": kept_tail(run),
            "changes": sum(1 for row in rows if row["changed"]),
            "next": end if end < len(ledger) else None,
            "prev": max(0, offset - limit) if offset > 0 else None, "end": end}
