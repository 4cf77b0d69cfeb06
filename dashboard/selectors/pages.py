"""Reads that shape data for the dashboard pages.

The service's selectors answer the API; these build what templates and charts need. Each
function runs a fixed number of queries whatever the session length (the session page of
a 10,000-message session runs as many queries as that of a 10-message one), and anything
proportional to the session (timeline bars, table rows, transcript items) is bucketed or
paged so that pages stay small.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.http import Http404

from compaction import policy as P
from compaction.messages import Message as EngineMessage
from compaction.messages import Provenance, original_id, text_of
from compaction.tokens import CATEGORIES
from compaction.triggers import token_thresholds, usable_window
from compaction.windows import price_per_token, resolve_window

from ..models import ArchiveEntry, ArchiveItem, CompactionRun, Message, Policy, Project, RunStatus, Session
from ..services.common import now
from ..services.policies import apply_service_defaults, default_policy
from .pagination import decode_cursor, encode_cursor

#: Bars drawn on a session timeline at most; longer sessions are bucketed server-side.
MAX_BARS = 500
#: Rows of the timeline's data-table fallback at most.
MAX_TABLE_ROWS = 100
#: Transcript messages per page.
TRANSCRIPT_PAGE = 50
#: Sessions per page of the list.
SESSIONS_PAGE = 25
#: Runs a session page reads (markers, badges, run list).
MAX_RUNS = 500
#: Points of a tuning chart at most (model calls are bucketed beyond this).
MAX_SIM_POINTS = 1500

CATEGORY_LABELS = {
    "system": "system", "tools": "tool schemas", "user": "user", "assistant": "assistant text",
    "tool_calls": "tool calls", "tool_results": "tool results", "summary": "summary",
}

# Fields a page list or badge needs from a run; the big JSON columns (ledger, prompt,
# policy snapshot, attempts) are left out so a session page never loads them.
RUN_LIST_FIELDS = (
    "id", "session_id", "project_id", "trigger", "reason", "force", "status", "created_at", "started_at",
    "finished_at", "duration_ms", "tokens_before", "tokens_after", "messages_before", "messages_after",
    "appended_during_run", "model", "summary", "error", "error_kind", "progress_step", "progress_attempt",
    "result", "compression", "archive_refs", "inline", "request_mode", "filter_key",
)


# -- projects -----------------------------------------------------------------------------

def project_choices() -> list[Project]:
    return list(Project.objects.order_by("name").only("id", "name"))


def pick_project(projects: list[Project], wanted: Any) -> Project | None:
    """The project kept in the browser session, else the first one."""
    for p in projects:
        if str(p.pk) == str(wanted):
            return p
    return projects[0] if projects else None


# -- sessions list ------------------------------------------------------------------------

@dataclass
class SessionsPage:
    rows: list[dict]
    next_cursor: str | None
    prev_cursor: str | None
    policy_names: dict = field(default_factory=dict)


def _policy_for(project: Project, model: str, policy_row: Policy | None):
    base = P.Policy.load(policy_row.data) if policy_row is not None else (
        P.Policy.load(project.active_policy.data) if project.active_policy_id else default_policy())
    return apply_service_defaults(base, Session(project=project, model=model or ""))


def _policies_by_combo(project: Project) -> dict[tuple[str, int | None], Any]:
    """Effective policy of every (model, session policy) pair in a project: 2 queries."""
    combos = set(Session.objects.filter(project=project).values_list("model", "policy_id").distinct())
    rows = {p.pk: p for p in Policy.objects.filter(pk__in={pid for _, pid in combos if pid})}
    return {(m, pid): _policy_for(project, m, rows.get(pid)) for m, pid in combos}


def condition_q(cond, window: int, reserved: int) -> Q:
    """A trigger condition as a filter on the stored running totals (same rule as
    compaction.triggers.evaluate: value > threshold)."""
    usable = usable_window(window, reserved)
    if isinstance(cond, (P.AnyCondition, P.AllCondition)):
        parts = [condition_q(c, window, reserved) for c in cond.conditions]
        out = parts[0]
        for q in parts[1:]:
            out = (out | q) if isinstance(cond, P.AnyCondition) else (out & q)
        return out
    if isinstance(cond, P.TokensCondition):
        return Q(context_total__gt=cond.threshold)
    if isinstance(cond, P.WindowFractionCondition):
        return Q(context_total__gt=round(cond.fraction * usable, 3))
    if isinstance(cond, P.MessagesCondition):
        return Q(context_messages__gt=cond.threshold)
    if isinstance(cond, P.TokensSinceSummaryCondition):
        return Q(tokens_since_summary__gt=cond.threshold)
    if isinstance(cond, P.WindowFractionSinceSummaryCondition):
        return Q(tokens_since_summary__gt=round(cond.fraction * usable, 3))
    if isinstance(cond, P.MessagesSinceSummaryCondition):
        return Q(messages_since_summary__gt=cond.threshold)
    if isinstance(cond, P.IdleCondition):
        return Q(last_message_at__lt=now() - timedelta(seconds=cond.seconds))
    return Q(pk__in=[])


def over_threshold_q(policies: dict[tuple[str, int | None], Any]) -> Q:
    out = Q(pk__in=[])
    for (model, pid), policy in policies.items():
        window, _ = resolve_window(policy)
        out |= Q(model=model, policy_id=pid) & condition_q(policy.trigger, window, policy.reserved_output_tokens)
    return out


def sessions_page(project: Project, *, q: str = "", compacted: bool = False, over: bool = False,
                  cursor: str | None = None, prev: str | None = None, limit: int = SESSIONS_PAGE) -> SessionsPage:
    """Newest first. ``cursor`` pages to older sessions, ``prev`` back to newer ones
    (both opaque tokens holding the id at the page edge). Raises ServiceError on a bad cursor."""
    from ..services.sessions import trigger_state  # noqa: PLC0415
    from compaction.triggers import evaluate  # noqa: PLC0415

    qs = Session.objects.filter(project=project).select_related("policy")
    q = (q or "").strip()
    if q:
        match = Q(title__icontains=q) | Q(external_id__icontains=q)
        if q.isdigit():
            match |= Q(pk=int(q))
        qs = qs.filter(match)
    if compacted:
        qs = qs.filter(compaction_count__gt=0)
    policies = _policies_by_combo(project)
    if over:
        qs = qs.filter(over_threshold_q(policies))
    before, after = decode_cursor(cursor), decode_cursor(prev)
    if after is not None and before is None:
        items = list(qs.filter(pk__gt=after).order_by("id")[: limit + 1])
        more_newer = len(items) > limit
        items = list(reversed(items[:limit]))
        has_next, has_prev = True, more_newer
    else:
        if before is not None:
            qs = qs.filter(pk__lt=before)
        items = list(qs.order_by("-id")[: limit + 1])
        has_next = len(items) > limit
        items = items[:limit]
        has_prev = before is not None
    rows = []
    for s in items:
        policy = policies.get((s.model, s.policy_id)) or _policy_for(project, s.model, s.policy)
        fired = evaluate(policy.trigger, trigger_state(s, policy))
        rows.append({"session": s, "over": fired.fired, "reason": fired.reason, "policy": policy.name})
    return SessionsPage(
        rows=rows,
        next_cursor=encode_cursor(items[-1].pk) if items and has_next else None,
        prev_cursor=encode_cursor(items[0].pk) if items and has_prev else None,
    )


# -- session page ---------------------------------------------------------------------------

def load_session(pk: int) -> Session:
    s = (Session.objects.select_related("project", "policy", "project__active_policy").filter(pk=pk).first())
    if s is None:
        raise Http404("no such session")
    return s


def session_runs(session: Session, limit: int = MAX_RUNS) -> list[CompactionRun]:
    """The session's runs (oldest first, the newest ``limit``), each with ``snap_position``:
    how many original messages existed when it took its snapshot (the messages created
    before it started), and ``commit_position``: where its result applies in the history."""
    snap = (Message.objects.filter(session_id=OuterRef("session_id"), created_at__lte=OuterRef("started_at"))
            .order_by().values("session_id").annotate(c=Count("id")).values("c"))
    runs = list(CompactionRun.objects.filter(session_id=session.pk).only(*RUN_LIST_FIELDS)
                .annotate(snap_position=Subquery(snap, output_field=IntegerField())).order_by("-id")[:limit])
    runs.reverse()
    for r in runs:
        base = r.snap_position if r.snap_position is not None else session.message_count
        r.commit_position = min(session.message_count, base + (r.appended_during_run or 0))
        r.badge = run_badge(r)
    return runs


def run_badge(run: CompactionRun) -> dict | None:
    """Figures of the "Compacted 84 → 12 messages, 61k → 9k tokens" badge."""
    if run.status != RunStatus.SUCCEEDED or not run.tokens_before or not run.tokens_after:
        return None
    result = run.result or {}
    return {
        "messages_before": run.messages_before, "messages_after": run.messages_after,
        "tokens_before": run.tokens_before.get("total", 0), "tokens_after": run.tokens_after.get("total", 0),
        "evicted": result.get("evicted_messages") or 0, "summarized": bool(result.get("summarized")),
        "cleared": result.get("tokens_cleared") or 0, "truncated": result.get("tokens_truncated") or 0,
    }


def policy_lines(policy, window: int | None = None) -> list[dict]:
    """Horizontal lines for a chart: the trigger's token thresholds and the usable window."""
    if window is None:
        window, _ = resolve_window(policy)
    lines = []
    for kind, value in token_thresholds(policy.trigger, window, policy.reserved_output_tokens):
        label = {"tokens": "trigger", "window_fraction": "trigger"}.get(kind, kind)
        lines.append({"label": f"{label}: {value:,} tokens", "value": value, "kind": "trigger"})
    usable = usable_window(window, policy.reserved_output_tokens)
    lines.append({"label": f"usable window: {usable:,} tokens", "value": usable, "kind": "window"})
    return lines


def trigger_text(cond) -> str:
    """A trigger condition in words, e.g. '80% of the usable window'."""
    if isinstance(cond, (P.AnyCondition, P.AllCondition)):
        joiner = " or " if isinstance(cond, P.AnyCondition) else " and "
        return "(" + joiner.join(trigger_text(c) for c in cond.conditions) + ")"
    return {
        "tokens": lambda c: f"context > {c.threshold:,} tokens",
        "window_fraction": lambda c: f"context > {c.fraction:.0%} of the usable window",
        "messages": lambda c: f"more than {c.threshold:,} messages",
        "tokens_since_summary": lambda c: f"> {c.threshold:,} tokens since the last summary",
        "window_fraction_since_summary": lambda c: f"> {c.fraction:.0%} of the window since the last summary",
        "messages_since_summary": lambda c: f"> {c.threshold:,} messages since the last summary",
        "idle_seconds": lambda c: f"idle for {c.seconds:g} s",
    }[cond.kind](cond)


def _buckets(n: int, max_buckets: int) -> int:
    return max(1, math.ceil(n / max_buckets)) if n else 1


def timeline(session: Session, runs: list[CompactionRun], policy) -> dict:
    """Chart data of the session page: per-message (or per-bucket) tokens by category, the
    context size sent at each model call after compactions, compaction markers and the
    policy's threshold lines. One query (the message rows' positions, roles and counts)."""
    rows = list(Message.objects.filter(session_id=session.pk).order_by("position")
                .values_list("role", "tokens", "tokens_by_category"))
    n = len(rows)
    prefix = [0] * (n + 1)
    for i, (_role, tok, _cats) in enumerate(rows):
        prefix[i + 1] = prefix[i] + tok

    # Context segments: before any compaction the context is the tool schemas plus every
    # message so far; after a run commits at position c it is the run's result plus the
    # messages added since its snapshot.
    segments = [(0, 0, session.tools_tokens or 0)]  # (from position, snapshot position, base tokens)
    markers = []
    for r in runs:
        if r.badge is None:
            continue
        snap = r.snap_position if r.snap_position is not None else r.commit_position
        segments.append((r.commit_position, snap, r.badge["tokens_after"]))
        markers.append({"x": r.commit_position - 0.5, "position": r.commit_position, "run": r.pk,
                        **r.badge})
    segments.sort(key=lambda s: s[0])
    starts = [s[0] for s in segments]

    def context_at(p: int) -> int:
        start, snap, base = segments[bisect_right(starts, p) - 1]
        return base + prefix[p] - prefix[min(snap, p)]

    size = _buckets(n, MAX_BARS)
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
            ctx[b] = value if ctx[b] is None else max(ctx[b], value)
    xs = [b * size + (min(size, n - b * size) - 1) / 2 for b in range(nb)]
    window, window_source = resolve_window(policy)

    # data-table fallback, coarser
    tsize = _buckets(n, MAX_TABLE_ROWS)
    table = []
    for start in range(0, n, tsize):
        end = min(n, start + tsize)
        cats_sum = {c: 0 for c in present}
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
    chart = {
        "n": n, "bucket": size, "x": xs, "starts": [b * size for b in range(nb)],
        "categories": present, "labels": [CATEGORY_LABELS.get(c, c) for c in present],
        "series": [series[c] for c in present], "context": ctx, "calls": calls,
        "markers": markers, "thresholds": policy_lines(policy, window),
    }
    return {"chart": chart, "n": n, "bucket": size, "labels": chart["labels"], "markers": markers,
            "thresholds": chart["thresholds"], "window": window, "window_source": window_source,
            "table": table, "table_bucket": tsize, "model_calls": sum(calls)}


@dataclass
class TranscriptPage:
    items: list[dict]
    start: int
    end: int
    total: int
    next_start: int | None
    prev_start: int | None
    last_start: int = 0


def transcript_page(session: Session, runs: list[CompactionRun], start: int = 0,
                    limit: int = TRANSCRIPT_PAGE) -> TranscriptPage:
    """One page of the original history with compaction badges where runs applied, each
    message marked when its original now lives in the archive. Two queries."""
    total = session.message_count
    start = max(0, min(start, max(0, total - 1)))
    look_back = 30  # tool results name their tool from the call, usually a few messages earlier
    rows = list(Message.objects.filter(session_id=session.pk, position__gte=max(0, start - look_back),
                                       position__lt=start + limit).order_by("position")
                .only("position", "role", "raw", "tokens", "tokens_by_category", "created_at"))
    names: dict[str, str] = {}
    for m in rows:
        for call in m.raw.get("tool_calls") or []:
            if isinstance(call, dict):
                names[call.get("id", "")] = ((call.get("function") or {}).get("name") or "")
    page = [m for m in rows if m.position >= start]
    end = page[-1].position + 1 if page else start
    marks: dict[int, dict] = {}
    if page:
        for item in (ArchiveItem.objects.filter(entry__session_id=session.pk, ordinal__gte=start, ordinal__lt=end)
                     .values("ordinal", "entry__entry_id", "entry__kind", "entry__run_id").order_by("entry_id")):
            mark = marks.setdefault(item["ordinal"], {"evicted": None, "offloaded": None})
            key = "offloaded" if item["entry__kind"] == "offloaded" else "evicted"
            if mark[key] is None:
                mark[key] = {"entry": item["entry__entry_id"], "run": item["entry__run_id"]}
    badges: dict[int, list] = {}
    for r in runs:
        if r.badge is not None:
            badges.setdefault(r.commit_position, []).append(r)
    items: list[dict] = []
    is_last = end >= total
    for m in page:
        for r in badges.get(m.position, []):
            items.append({"kind": "compaction", "run": r})
        items.append({"kind": "message", "m": m, "mark": marks.get(m.position),
                      "tool_name": names.get(m.raw.get("tool_call_id") or "", "") if m.role == "tool" else "",
                      "text": text_of(m.raw.get("content"))})
    if is_last:
        for pos in sorted(p for p in badges if p >= end):
            for r in badges[pos]:
                items.append({"kind": "compaction", "run": r})
    return TranscriptPage(items=items, start=start, end=end, total=total,
                          next_start=end if end < total else None,
                          prev_start=max(0, start - limit) if start > 0 else None,
                          last_start=max(0, total - limit))


def message_at(session: Session, position: int) -> Message:
    m = Message.objects.filter(session_id=session.pk, position=position).first()
    if m is None:
        raise Http404("no such message")
    return m


def page_start_for(position: int) -> int:
    """Start of the transcript page that shows ``position`` a few rows from its top."""
    return max(0, position - 5)


# -- runs -------------------------------------------------------------------------------------

def load_run(pk: int) -> CompactionRun:
    run = (CompactionRun.objects.select_related("session", "project", "policy").filter(pk=pk).first())
    if run is None:
        raise Http404("no such run")
    return run


def load_run_status(pk: int) -> CompactionRun:
    run = CompactionRun.objects.only(*RUN_LIST_FIELDS, "progress_detail", "deliveries", "heartbeat_at",
                                     "enqueued_at").filter(pk=pk).first()
    if run is None:
        raise Http404("no such run")
    return run


def ledger_summary(ledger: list[dict]) -> list[dict]:
    counts: dict[str, dict] = {}
    for row in ledger:
        c = counts.setdefault(row.get("fate", "?"), {"fate": row.get("fate", "?"), "messages": 0,
                                                      "tokens_before": 0, "tokens_after": 0})
        c["messages"] += 1
        c["tokens_before"] += row.get("tokens_before") or 0
        c["tokens_after"] += row.get("tokens_after") or 0
    return sorted(counts.values(), key=lambda c: -c["messages"])


def run_position(run: CompactionRun) -> int | None:
    """Original messages the run's snapshot covered (exact, from its ledger)."""
    ords = [r.get("ordinal") for r in run.ledger or [] if r.get("ordinal") is not None]
    return max(ords) + 1 if ords else None


def category_rows(before: dict | None, after: dict | None) -> list[dict]:
    before, after = before or {}, after or {}
    rows = []
    for c in list(CATEGORIES) + ["total"]:
        b, a = before.get(c, 0) or 0, after.get(c, 0) or 0
        if b or a or c == "total":
            rows.append({"category": CATEGORY_LABELS.get(c, c), "before": b, "after": a, "delta": a - b,
                         "total": c == "total"})
    return rows


def attempt_rows(attempts: list) -> list[dict]:
    """Summary attempts as table rows (compaction.summarizer.llm.Attempt.to_dict(): number,
    phase, model, ok, error, latency_ms, usage)."""
    rows = []
    for i, a in enumerate(attempts or []):
        a = a if isinstance(a, dict) else {"error": str(a)}
        usage = a.get("usage") or {}
        rows.append({
            "n": a.get("number") or a.get("attempt") or i + 1, "model": a.get("model") or "",
            "role": a.get("phase") or ("failover" if a.get("failover") else "primary"),
            "ok": a.get("ok", not a.get("error")), "error": a.get("error") or "",
            "latency_ms": a.get("latency_ms"),
            "usage": ", ".join(f"{k} {v}" for k, v in usage.items() if isinstance(v, (int, float))) if isinstance(usage, dict) else "",
        })
    return rows


def archive_refs_by_message(run: CompactionRun) -> dict[str, dict]:
    """message id -> {entry, kind} for what this run archived."""
    out: dict[str, dict] = {}
    for item in (ArchiveItem.objects.filter(entry__run_id=run.pk)
                 .values("message_id", "index", "entry__entry_id", "entry__kind")):
        out.setdefault(item["message_id"], {"entry": item["entry__entry_id"], "kind": item["entry__kind"],
                                            "index": item["index"]})
    return out


def before_after(run: CompactionRun, offset: int = 0, limit: int = 200) -> dict:
    """Rows aligning the context before the run with the context after it, by message.

    Left: each message of the snapshot (originals from the history, earlier summaries from
    the archive). Right: what became of it (kept, cleared/truncated with sizes, evicted,
    re-inserted), with the summary block where it replaced the evicted span."""
    ledger = run.ledger or []
    window = ledger[offset: offset + limit]
    refs = archive_refs_by_message(run)
    ordinals = [r["ordinal"] for r in window if r.get("ordinal") is not None]
    originals = {m.position: m for m in Message.objects.filter(session_id=run.session_id, position__in=ordinals)
                 .only("position", "role", "raw", "tokens")}
    prev_texts: dict[str, str] = {}
    prev_ids = [r["message_id"] for r in window if r.get("provenance") == Provenance.SUMMARY.value]
    if prev_ids:
        for item in ArchiveItem.objects.filter(entry__run_id=run.pk, message_id__in=prev_ids).only("message_id", "raw"):
            prev_texts[item.message_id] = text_of(item.raw.get("content"))
    first_evicted = next((i for i, r in enumerate(ledger) if r.get("fate") in ("summarized", "folded", "preserved")),
                         None)
    rows = []
    for k, r in enumerate(window):
        i = offset + k
        if first_evicted is not None and i == first_evicted and run.summary:
            rows.append({"kind": "summary"})
        m = originals.get(r.get("ordinal")) if r.get("ordinal") is not None else None
        text = text_of(m.raw.get("content")) if m is not None else prev_texts.get(r["message_id"], "")
        calls = [((c.get("function") or {}).get("name") or "") for c in (m.raw.get("tool_calls") or [])] if m else []
        fate = r.get("fate", "")
        rows.append({"kind": "message", "row": r, "text": text, "calls": calls, "fate": fate,
                     "ref": refs.get(r["message_id"]),
                     "reduced": fate in ("cleared", "truncated") or (
                         fate == "kept" and (r.get("tokens_after") or 0) < (r.get("tokens_before") or 0))})
    return {"rows": rows, "offset": offset, "limit": limit, "total": len(ledger),
            "next": offset + limit if offset + limit < len(ledger) else None,
            "prev": max(0, offset - limit) if offset > 0 else None}


# -- archive ------------------------------------------------------------------------------------

def archive_groups(session: Session, run_id: int | None = None, limit: int = 500) -> list[dict]:
    """Archive entries grouped by the run that wrote them (newest run first)."""
    qs = ArchiveEntry.objects.filter(session_id=session.pk).select_related("run").only(
        "id", "entry_id", "kind", "note", "item_count", "size_chars", "created_at", "run_id",
        "run__id", "run__status", "run__trigger", "run__created_at")
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    groups: dict[Any, dict] = {}
    for e in qs.order_by("-id")[:limit]:
        g = groups.setdefault(e.run_id, {"run": e.run, "entries": [], "items": 0, "size": 0})
        g["entries"].append(e)
        g["items"] += e.item_count
        g["size"] += e.size_chars
    return list(groups.values())


def load_entry(session: Session, entry_id: str) -> ArchiveEntry:
    e = ArchiveEntry.objects.filter(session_id=session.pk, entry_id=entry_id).first()
    if e is None:
        raise Http404("no such archive entry")
    return e


# -- tuning --------------------------------------------------------------------------------------

def session_raws(session: Session) -> list[dict]:
    return list(Message.objects.filter(session_id=session.pk).order_by("position").values_list("raw", flat=True))


def offline(policy):
    """The same policy with the offline extractive summarizer, so a preview never calls a
    model (nor costs anything, nor needs the network)."""
    return policy.with_overrides({"summarizer.model": None, "summarizer.failover_models": [],
                                  "summarizer.api_base": None})


def simulate_policy(session: Session, raws: list[dict], policy) -> dict:
    """The replay report (compaction.simulate) of ``policy`` over the stored history, plus
    what the tuning page shows: where compactions fire, context per model call against no
    compaction, tokens saved, estimated cost at litellm's prices, mean retention."""
    from compaction import simulate  # noqa: PLC0415
    from ..services.common import counter_for  # noqa: PLC0415

    report = simulate(raws, offline(policy), tools=session.tools or None, session_id=f"preview-{session.pk}",
                      keep_contexts=True)
    for key in ("_session", "context", "replay"):
        report.pop(key, None)
    per_call = report.pop("context_per_call", [])
    counter = counter_for(policy)
    engine_msgs = [EngineMessage(raw, original_id(i), Provenance.ORIGINAL, i) for i, raw in enumerate(raws)]
    counts = counter.count_many(engine_msgs)
    base = counter.count_tools(session.tools or None) if session.tools else 0
    calls, baseline = [], []
    running = base
    for i, (raw, t) in enumerate(zip(raws, counts)):
        if raw.get("role") == "assistant":
            calls.append(i)
            baseline.append(running)
        running += t.total
    model = policy.model or session.model or None
    price = price_per_token(model)
    sent, sent_baseline = sum(per_call), sum(baseline)
    cost = cost_baseline = None
    if price is not None:
        cost, cost_baseline = sent * price[0], sent_baseline * price[0]
    summ_model = policy.summarizer.model
    summ_price = price_per_token(summ_model) if summ_model else None
    summ_cost = 0.0 if not summ_model else None
    if summ_price is not None:
        summ_cost = sum(c["tokens_before"] * summ_price[0] + c.get("summary_tokens", 0) * summ_price[1]
                        for c in report["compactions"] if c.get("summarized"))
    scores = [c["retention"] for c in report["compactions"] if c.get("retention") is not None]
    report.update({
        "calls": calls, "per_call": per_call, "baseline": baseline,
        "tokens_sent": sent, "tokens_sent_baseline": sent_baseline, "tokens_saved": sent_baseline - sent,
        "baseline_peak": max(baseline, default=0), "baseline_final": running,
        "price_model": model, "price": price, "cost": cost, "cost_baseline": cost_baseline,
        "summarizer_model": summ_model, "summarizer_cost": summ_cost,
        "retention_mean": sum(scores) / len(scores) if scores else None,
        "lines": policy_lines(policy, report["window"]),
    })
    return report


def simulation_chart(reports: list[tuple[str, dict]]) -> dict:
    """One chart for one or two simulations: context per model call for each policy and
    without compaction, compaction markers and threshold lines; bucketed past MAX_SIM_POINTS."""
    if not reports:
        return {}
    first = reports[0][1]
    calls = first["calls"]
    n = len(calls)
    size = _buckets(n, MAX_SIM_POINTS)
    idx = [list(range(s, min(n, s + size))) for s in range(0, n, size)]

    def reduce(values: list[int]) -> list[int | None]:
        return [max(values[i] for i in group) if group else None for group in idx]

    out = {"x": [calls[g[0]] for g in idx], "bucket": size, "lines": [], "series": [], "markers": []}
    out["series"].append({"label": "no compaction", "values": reduce(first["baseline"]), "kind": "baseline"})
    for label, rep in reports:
        out["series"].append({"label": label, "values": reduce(rep["per_call"]), "kind": "policy"})
        for c in rep["compactions"]:
            out["markers"].append({"x": c["at"] - 0.5, "policy": label, "position": c["at"],
                                   "tokens_before": c["tokens_before"], "tokens_after": c["tokens_after"],
                                   "messages_before": c["messages_before"], "messages_after": c["messages_after"],
                                   "evicted": c.get("evicted_messages", 0), "summarized": c.get("summarized")})
        for line in rep["lines"]:
            out["lines"].append({**line, "label": f"{label} {line['label']}" if len(reports) > 1 else line["label"],
                                 "policy": label})
    return out
