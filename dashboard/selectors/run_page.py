"""Reads of the run page: the ledger by fate and paged, tokens by category before and
after, the summary attempts, retention by identifier kind, and where the run sits in the
transcript, and whether its result held what the agent used next."""
from __future__ import annotations

from typing import Any

from ..models import CompactionRun
from .categories import category_rows
from .run_lookahead import run_lookahead
from .runs import run_badge, run_events

#: Ledger rows per page.
LEDGER_PAGE = 200


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


def run_position(run: CompactionRun) -> int | None:
    """Original messages the run's snapshot covered (exact, from its ledger)."""
    ords = [r.get("ordinal") for r in run.ledger or [] if r.get("ordinal") is not None]
    return max(ords) + 1 if ords else None


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
        "fates": ledger_summary(ledger),
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
        "attempts": attempt_rows(run.attempts), "events": run_events(run), "position": position,
        "lookahead": run_lookahead(run, position),
        **retention_context(run.retention or {}),
        "result": run.result or {},
    }
