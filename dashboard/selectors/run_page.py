"""Reads of the run page: the ledger by fate and paged, tokens by category before and
after, the summary attempts, retention by identifier kind, and where the run sits in the
transcript, and whether its result held what the agent used next."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..models import CompactionRun, RunEvent
from .before_after import kept_tail
from .categories import category_rows
from .run_lookahead import run_lookahead, run_position
from .runs import run_badge, run_events

#: Ledger rows per page.
LEDGER_PAGE = 200
#: Rows each fate group of the ledger shows before pointing to its own paged list.
LEDGER_GROUP_ROWS = 50
#: Characters of one event datum shown.
EVENT_VALUE_CHARS = 300
#: Event data keys that hold a Unix time.
TIME_KEYS = ("at", "time", "ts", "timestamp")


def ledger_summary(ledger: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages and tokens per fate (kept, cleared, summarized…), the most common first."""
    counts: dict[str, dict[str, Any]] = {}
    for row in ledger:
        c = counts.setdefault(row.get("fate", "?"), {"fate": row.get("fate", "?"), "messages": 0,
                                                      "tokens_before": 0, "tokens_after": 0})
        c["messages"] += 1
        c["tokens_before"] += row.get("tokens_before") or 0
        c["tokens_after"] += row.get("tokens_after") or 0
    return sorted(counts.values(), key=lambda c: -c["messages"])


def ordinal_ranges(ordinals: list[int]) -> str:
    """Message positions as short ranges: ``#3–#40, #45``."""
    spans: list[list[int]] = []
    for o in sorted(set(ordinals)):
        if spans and o == spans[-1][1] + 1:
            spans[-1][1] = o
        else:
            spans.append([o, o])
    return ", ".join(f"#{a}" if a == b else f"#{a}–#{b}" for a, b in spans)


def ledger_groups(ledger: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledger grouped by fate (the most common first): counts, tokens, the positions as
    ranges, and the group's first rows (the fate filter pages through the rest)."""
    groups: dict[str, dict[str, Any]] = {}
    for row in ledger:
        fate = row.get("fate", "?")
        g = groups.setdefault(fate, {"fate": fate, "messages": 0, "tokens_before": 0, "tokens_after": 0,
                                     "rows": [], "ordinals": []})
        g["messages"] += 1
        g["tokens_before"] += row.get("tokens_before") or 0
        g["tokens_after"] += row.get("tokens_after") or 0
        if len(g["rows"]) < LEDGER_GROUP_ROWS:
            g["rows"].append(row)
        if row.get("ordinal") is not None:
            g["ordinals"].append(row["ordinal"])
    out = sorted(groups.values(), key=lambda g: -g["messages"])
    for g in out:
        g["ranges"] = ordinal_ranges(g.pop("ordinals"))
        g["more"] = g["messages"] - len(g["rows"])
    return out


def _readable(value: Any, key: str = "") -> str:
    if key in TIME_KEYS and isinstance(value, (int, float)) and value > 1e9:
        return datetime.fromtimestamp(value, tz=UTC).strftime("%H:%M:%S.%f")[:12] + " UTC"
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {_readable(v, str(k))}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_readable(v) for v in value)
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def event_items(events: list[RunEvent]) -> list[dict[str, Any]]:
    """Run events as a readable list: the kind in words and each datum as a labelled value
    (nested data compact, long values cut)."""
    items = []
    for e in events:
        data = e.data if isinstance(e.data, dict) else {"data": e.data}
        pairs = [(str(k).replace("_", " "), _readable(v, str(k))[:EVENT_VALUE_CHARS]) for k, v in data.items()
                 if v not in (None, "", [], {})]
        items.append({"created_at": e.created_at, "kind": str(e.kind).replace("_", " "), "pairs": pairs})
    return items


def attempt_rows(attempts: list[Any]) -> list[dict[str, Any]]:
    """Summary attempts as table rows (compaction.summarizer.llm.Attempt.to_dict(): number,
    phase, model, ok, error, latency_ms, usage)."""
    rows = []
    for i, a in enumerate(attempts or []):
        a = a if isinstance(a, dict) else {"error": str(a)}
        usage = a.get("usage") or {}
        usage_text = (", ".join(f"{k} {v}" for k, v in usage.items() if isinstance(v, (int, float)))
                      if isinstance(usage, dict) else "")
        rows.append({
            "n": a.get("number") or a.get("attempt") or i + 1, "model": a.get("model") or "",
            "role": a.get("phase") or ("failover" if a.get("failover") else "primary"),
            "ok": a.get("ok", not a.get("error")), "error": a.get("error") or "",
            "latency_ms": a.get("latency_ms"), "usage": usage_text,
        })
    return rows


def ledger_context(ledger: list[dict[str, Any]], offset: int, fate: str) -> dict[str, Any]:
    """One page of the ledger, only the rows of ``fate`` when it is given."""
    rows = [r for r in ledger if r.get("fate") == fate] if fate else ledger
    offset = max(0, min(offset, len(ledger) - 1))
    return {
        "ledger_rows": rows[offset: offset + LEDGER_PAGE], "ledger_total": len(rows), "ledger_offset": offset,
        "ledger_end": min(len(rows), offset + LEDGER_PAGE),
        "ledger_next": offset + LEDGER_PAGE if offset + LEDGER_PAGE < len(rows) else None,
        "ledger_prev": max(0, offset - LEDGER_PAGE) if offset > 0 else None, "fate": fate,
        "fates": ledger_summary(ledger), "ledger_groups": [] if fate else ledger_groups(ledger),
    }


def retention_context(retention: dict[str, Any]) -> dict[str, Any]:
    """Identifiers the summary kept, overall and by kind (kinds with none left out)."""
    by_kind = retention.get("by_kind") or {}
    return {
        "retention": retention, "referenced": retention.get("referenced") or {},
        "all_ids": retention.get("all") or {}, "missing": retention.get("missing") or [],
        "by_kind": sorted(((k, v) for k, v in by_kind.items()
                           if (v.get("referenced") or {}).get("total") or (v.get("all") or {}).get("total")),
                          key=lambda kv: kv[0]),
    }


def run_page_context(run: CompactionRun, ledger_offset: int, fate: str) -> dict[str, Any]:
    position = run_position(run)
    return {
        "run": run, "session": run.session, "badge": run_badge(run),
        **ledger_context(run.ledger or [], ledger_offset, fate),
        "categories": category_rows(run.tokens_before, run.tokens_after),
        "attempts": attempt_rows(run.attempts), "events": event_items(run_events(run)), "position": position,
        "lookahead": run_lookahead(run, position),
        **retention_context(run.retention or {}),
        "result": run.result or {}, "tail": kept_tail(run),
    }
