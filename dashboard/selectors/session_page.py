"""Reads of the session page: its runs placed in the history, the token timeline, the
transcript pages and the branch summaries.

Each function runs a fixed number of queries whatever the session length (the page of a
10,000-message session runs as many queries as that of a 10-message one), and anything
proportional to the session (timeline bars, table rows, transcript items) is bucketed or
paged so that pages stay small.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, cast

from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.http import Http404

from compaction import policy as P
from compaction.messages import text_of
from compaction.tokens import CATEGORIES
from compaction.windows import resolve_window

from ..models import ArchiveItem, CompactionRun, RunStatus, Session, StoredMessage
from ..services import ServiceError
from ..services.branches import load_store, retrieve_for, summaries_of
from ..services.policies import effective_policy
from ..services.sessions import check_trigger
from ..templatetags.studio import pretty_json
from .categories import CATEGORY_LABELS
from .runs import RUN_LIST_FIELDS, run_badge
from .threshold_lines import policy_lines
from .triggers import trigger_text

#: Bars drawn on a session timeline at most; longer sessions are bucketed server-side.
MAX_BARS = 500
#: Rows of the timeline's data-table fallback at most.
MAX_TABLE_ROWS = 100
#: Transcript messages per page.
TRANSCRIPT_PAGE = 50
#: Runs a session page reads (markers, badges, run list).
MAX_RUNS = 500
#: Runs listed in the session overview.
RECENT_RUNS = 10


@dataclass
class PlacedRun:
    """A run of the session as its page places it: ``snap_position`` is how many original
    messages existed when it took its snapshot (the messages created before it started),
    ``commit_position`` where its result applies in the history. Reads the run's own
    fields through (``placed.status``, ``placed.pk``), so templates treat it as the run."""

    run: CompactionRun
    snap_position: int | None
    commit_position: int
    badge: dict[str, Any] | None

    def __getattr__(self, name: str) -> Any:
        if name == "run":  # not set yet (copy, unpickling): no run to read through
            raise AttributeError(name)
        return getattr(self.run, name)


def session_runs(session: Session, limit: int = MAX_RUNS) -> list[PlacedRun]:
    """The session's runs, oldest first (the newest ``limit``). A run's snapshot position is
    the one it stored when claimed; runs from before that column existed count the messages
    created before they started."""
    snap = (StoredMessage.objects.filter(session_id=OuterRef("session_id"), created_at__lte=OuterRef("started_at"))
            .order_by().values("session_id").annotate(c=Count("id")).values("c"))
    runs = list(CompactionRun.objects.filter(session_id=session.pk).only(*RUN_LIST_FIELDS)
                .annotate(snap_count=Subquery(snap, output_field=IntegerField())).order_by("-id")[:limit])
    runs.reverse()
    placed = []
    for r in runs:
        snap_at = r.snapshot_position if r.snapshot_position is not None else r.snap_count  # type: ignore[attr-defined]
        base = snap_at if snap_at is not None else session.message_count
        commit = min(session.message_count, base + (r.appended_during_run or 0))
        placed.append(PlacedRun(run=r, snap_position=snap_at, commit_position=commit, badge=run_badge(r)))
    return placed


def _buckets(n: int, max_buckets: int) -> int:
    return max(1, math.ceil(n / max_buckets)) if n else 1


def trailing_slot(n: int, bucket: int, trailing: int) -> float:
    """Width (in message positions) of the slot each run after the last message gets: wide
    enough to see at any session length, and all of them together at most 30% of it."""
    if not trailing:
        return 0
    return float(max(1, bucket, round(min(0.04 * n, 0.3 * n / trailing))))


def context_steps(xs: list[float], ctx: list[int | None], markers: list[dict[str, Any]],
                  x_max: float) -> list[list[float]]:
    """The context line as drawn: a point at each model call, and a vertical step at each
    compaction from the tokens it was given to the tokens it left (runs after the last
    message included), held flat to the right edge after the last one."""
    points: list[tuple[float, int, float]] = [(x, 0, v) for x, v in zip(xs, ctx, strict=True) if v is not None]
    for m in markers:
        points.append((m["x"], 1, m["tokens_before"]))
        points.append((m["x"], 2, m["tokens_after"]))
    points.sort(key=lambda p: (p[0], p[1]))
    if points and points[-1][1] == 2:
        points.append((x_max, 3, points[-1][2]))
    return [[x, v] for x, _order, v in points]


def timeline(session: Session, runs: list[PlacedRun], policy: P.Policy) -> dict[str, Any]:
    """Chart data of the session page: per-message (or per-bucket) tokens by category, the
    context size sent at each model call after compactions, compaction markers and the
    policy's threshold lines. One query (the message rows' positions, roles and counts)."""
    # A JSONTextField loads its JSON; its stubs see the TextField it is stored in.
    rows = cast(list[tuple[str, int, dict[str, int] | None]], list(
        StoredMessage.objects.filter(session_id=session.pk).order_by("position")
        .values_list("role", "tokens", "tokens_by_category")))
    n = len(rows)
    prefix = [0] * (n + 1)
    for i, (_role, tok, _cats) in enumerate(rows):
        prefix[i + 1] = prefix[i] + tok

    # Context segments: before any compaction the context is the tool schemas plus every
    # message so far; after a run commits at position c it is the run's result plus the
    # messages added since its snapshot.
    segments = [(0, 0, session.tools_tokens or 0)]  # (from position, snapshot position, base tokens)
    compacted = [r for r in runs if r.badge is not None]
    trailing = sum(1 for r in compacted if r.commit_position >= n)
    size = _buckets(n, MAX_BARS)
    slot = trailing_slot(n, size, trailing)
    markers = []
    k = 0
    for r in compacted:
        badge = r.badge or {}
        snap = r.snap_position if r.snap_position is not None else r.commit_position
        segments.append((r.commit_position, snap, badge["tokens_after"]))
        after_end = r.commit_position >= n
        # Runs after the last message (import-time and forced runs) each get their own slot
        # right of the last bar, so their markers do not pile up and the line steps at each.
        x = n - 0.5 + (k + 1) * slot if after_end else r.commit_position - 0.5
        k += after_end
        markers.append({"x": x, "position": r.commit_position, "after_end": after_end, "run": r.run.pk,
                        **badge})
    segments.sort(key=lambda s: s[0])
    starts = [s[0] for s in segments]

    def context_at(p: int) -> int:
        _start, snap, base = segments[bisect_right(starts, p) - 1]
        return base + prefix[p] - prefix[min(snap, p)]

    nb = math.ceil(n / size) if n else 0
    present = [c for c in CATEGORIES if any((cats or {}).get(c) for _r, _t, cats in rows)]
    series = {c: [0] * nb for c in present}
    ctx: list[int | None] = [None] * nb
    calls = [0] * nb
    for i, (role, _tok, cats) in enumerate(rows):
        b = i // size
        for c, v in (cats or {}).items():
            if c in series:
                series[c][b] += v
        if role == "assistant":
            value = context_at(i)
            calls[b] += 1
            prev = ctx[b]
            ctx[b] = value if prev is None else max(prev, value)
    xs = [b * size + (min(size, n - b * size) - 1) / 2 for b in range(nb)]
    window, window_source = resolve_window(policy)

    # data-table fallback, coarser
    tsize = _buckets(n, MAX_TABLE_ROWS)
    table = []
    for start in range(0, n, tsize):
        end = min(n, start + tsize)
        cats_sum = dict.fromkeys(present, 0)
        last_ctx = None
        for i in range(start, end):
            role, _tok, cats = rows[i]
            for c, v in (cats or {}).items():
                if c in cats_sum:
                    cats_sum[c] += v
            if role == "assistant":
                last_ctx = context_at(i)
        table.append({"start": start, "end": end - 1, "tokens": prefix[end] - prefix[start],
                      "categories": [cats_sum[c] for c in present], "context": last_ctx,
                      "compactions": sum(1 for m in markers if start < m["position"] <= end)})
    labels = [CATEGORY_LABELS.get(c, c) for c in present]
    thresholds = policy_lines(policy, window)
    x_max = n - 0.5 + (trailing + 1) * slot if trailing else max(1, n) - 0.5
    chart = {
        "n": n, "bucket": size, "x": xs, "starts": [b * size for b in range(nb)],
        "categories": present, "labels": labels,
        "series": [series[c] for c in present], "context": ctx, "calls": calls,
        "markers": markers, "thresholds": thresholds, "x_max": x_max,
        "line": context_steps(xs, ctx, markers, x_max), "after_end_runs": trailing,
    }
    return {"chart": chart, "n": n, "bucket": size, "labels": labels, "markers": markers,
            "thresholds": thresholds, "window": window, "window_source": window_source,
            "table": table, "table_bucket": tsize, "model_calls": sum(calls)}


@dataclass(frozen=True)
class TranscriptPage:
    items: list[dict[str, Any]]
    start: int
    end: int
    total: int
    next_start: int | None
    prev_start: int | None
    last_start: int = 0


def transcript_page(session: Session, runs: list[PlacedRun], start: int = 0,
                    limit: int = TRANSCRIPT_PAGE) -> TranscriptPage:
    """One page of the original history with compaction badges where runs applied, each
    message marked when its original now lives in the archive. Two queries."""
    total = session.message_count
    start = max(0, min(start, max(0, total - 1)))
    look_back = 30  # tool results name their tool from the call, usually a few messages earlier
    rows = list(StoredMessage.objects.filter(session_id=session.pk, position__gte=max(0, start - look_back),
                                       position__lt=start + limit).order_by("position")
                .only("position", "role", "raw", "tokens", "tokens_by_category", "created_at"))
    names: dict[str, str] = {}
    for m in rows:
        for call in m.raw.get("tool_calls") or []:
            if isinstance(call, dict):
                names[call.get("id", "")] = ((call.get("function") or {}).get("name") or "")
    page = [m for m in rows if m.position >= start]
    end = page[-1].position + 1 if page else start
    marks: dict[int, dict[str, Any]] = {}
    if page:
        for item in (ArchiveItem.objects.filter(entry__session_id=session.pk, ordinal__gte=start, ordinal__lt=end)
                     .values("ordinal", "entry__entry_id", "entry__kind", "entry__run_id").order_by("entry_id")):
            if item["ordinal"] is None:  # not an original message (the range filter already excludes these)
                continue
            mark = marks.setdefault(item["ordinal"], {"evicted": None, "offloaded": None})
            key = "offloaded" if item["entry__kind"] == "offloaded" else "evicted"
            if mark[key] is None:
                mark[key] = {"entry": item["entry__entry_id"], "run": item["entry__run_id"]}
    badges: dict[int, list[PlacedRun]] = {}
    for r in runs:
        if r.badge is not None:
            badges.setdefault(r.commit_position, []).append(r)
    items: list[dict[str, Any]] = []
    for m in page:
        items.extend({"kind": "compaction", "run": r} for r in badges.get(m.position, []))
        items.append({"kind": "message", "m": m, "mark": marks.get(m.position),
                      "tool_name": names.get(m.raw.get("tool_call_id") or "", "") if m.role == "tool" else "",
                      "text": text_of(m.raw.get("content"))})
    if end >= total:
        for pos in sorted(p for p in badges if p >= end):
            items.extend({"kind": "compaction", "run": r} for r in badges[pos])
    return TranscriptPage(items=items, start=start, end=end, total=total,
                          next_start=end if end < total else None,
                          prev_start=max(0, start - limit) if start > 0 else None,
                          last_start=max(0, total - limit))


def message_at(session: Session, position: int) -> StoredMessage:
    m = StoredMessage.objects.filter(session_id=session.pk, position=position).first()
    if m is None:
        raise Http404("no such message")
    return m


@dataclass(frozen=True)
class MessageText:
    """One part of a stored message as the full-message view shows it: the message text
    (tool output, or the text parts), or one tool call's arguments indented."""

    text: str
    label: str      # "message" or "call-N", for the download's file name
    preformatted: bool


def message_part(m: StoredMessage, part: str, call: int) -> MessageText:
    if part == "call":
        calls = (m.raw.get("tool_calls") if isinstance(m.raw, dict) else None) or []
        if not 0 <= call < len(calls) or not isinstance(calls[call], dict):
            raise Http404("no such tool call")
        arguments = (calls[call].get("function") or {}).get("arguments")
        return MessageText(pretty_json(arguments if arguments is not None else ""), f"call-{call}", True)
    content = m.raw.get("content") if isinstance(m.raw, dict) else None
    return MessageText(text_of(content), "message", m.role == "tool")


@dataclass(frozen=True)
class TextPage:
    """``chars`` characters of a long text from ``offset``; the view pages through the rest."""

    text: str
    offset: int
    end: int
    total: int
    previous: int | None
    next: int | None

    @property
    def paged(self) -> bool:
        return self.previous is not None or self.next is not None


def text_page(text: str, offset: int, chars: int) -> TextPage:
    total = len(text)
    if chars <= 0 or total <= chars:
        return TextPage(text, 0, total, total, None, None)
    offset = min(max(0, offset), max(0, total - 1))
    end = min(total, offset + chars)
    return TextPage(text[offset:end], offset, end, total, max(0, offset - chars) if offset > 0 else None,
                    end if end < total else None)


def page_start_for(position: int) -> int:
    """Start of the transcript page that shows ``position`` a few rows from its top."""
    return max(0, position - 5)


def branch_context(session: Session, key: str | None) -> dict[str, Any]:
    """The branch summaries section: every stored key, and which one an agent asking for
    ``key`` is served (with the fallback used)."""
    data = summaries_of(session)
    try:
        served = retrieve_for(session, key, data)
        error = None
    except ServiceError as exc:
        served, error = retrieve_for(session, None, data), str(exc.detail)
    return {"branches": served, "branch_error": error, "summary_key": key or "",
            "branch_summaries": load_store(data)[0].all()}


def overview_context(session: Session, summary_key: str | None = None) -> dict[str, Any]:
    """Stats, timeline, runs and branch summaries: everything the run-finished refresh redraws."""
    policy, row = effective_policy(session)
    runs = session_runs(session)
    pending = next((r for r in reversed(runs) if r.status in (RunStatus.QUEUED, RunStatus.RUNNING)), None)
    return {
        "session": session, "policy": policy, "policy_row": row, "runs": runs,
        "recent_runs": list(reversed(runs[-RECENT_RUNS:])), "pending": pending,
        "timeline": timeline(session, runs, policy), "trigger": check_trigger(session, policy),
        "trigger_text": trigger_text(policy.trigger), "compacted_runs": sum(1 for r in runs if r.badge),
        "branch_policy": policy.branches, **branch_context(session, summary_key),
    }
