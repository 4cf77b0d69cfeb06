"""Replay a directory of sessions through several policies and put the results in one table.

``python -m compaction compare DIR --preset default --preset deepagents --policy mine.json``

One row per policy, pooled over every session of the directory: over-window calls, thrash
(compactions of any kind that freed less than 10% of the usable window), compactions,
summarizer LLM calls, mean and peak context, tokens sent over all calls, mean identifier
retention and compression of the summaries, needed-context recall, the summary probe score
(:mod:`compaction.evaluation.probes`: share of the probes drawn from evicted spans that the
next context answers) and how many sessions kept their integrity (tool pairs valid, replay
exact). Two more rows give the
baselines of :mod:`compaction.evaluation.baselines` replayed beside the first policy.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .figures import recall as pooled_recall
from .messages import JSONObject, RawMessage
from .policy import Policy
from .simulate import simulate

#: Shown where a figure does not exist (no summary made, no recall measurable, not reported).
NONE = "–"


@dataclass(frozen=True)
class CorpusSession:
    name: str
    messages: list[RawMessage]
    tools: list[JSONObject]


@dataclass
class PolicyTotals:
    """One row of the comparison, built up one session report at a time."""

    label: str
    sessions: int = 0
    model_calls: int = 0
    overflow_calls: int = 0
    thrash: int | None = 0
    compactions: int = 0
    llm_calls: int = 0
    tokens_sent: int = 0
    peak_context_tokens: int = 0
    needed: int = 0
    kept: int = 0
    cache_breaks: int = 0
    cost_usd: float | None = 0.0
    retention: list[float] = field(default_factory=list)
    compression: list[float] = field(default_factory=list)
    intact: int = 0
    broken: list[str] = field(default_factory=list)
    probes_held: int = 0
    probes_total: int = 0
    #: None for the baselines, which never summarize
    probe_kinds: dict[str, dict[str, int]] | None = field(default_factory=dict)

    def add(self, session: str, report: dict[str, Any]) -> None:
        self.sessions += 1
        self.model_calls += report["model_calls"]
        self.overflow_calls += report["overflow_calls"]
        thrash = report.get("thrash")
        self.thrash = None if self.thrash is None or thrash is None else self.thrash + int(thrash)
        self.compactions += len(report["compactions"])
        self.llm_calls += report["llm_calls"]
        self.retention += [c["retention"] for c in report["compactions"] if c.get("retention") is not None]
        self.compression += [c["compression"] for c in report["compactions"] if c.get("compression") is not None]
        lookahead = report.get("lookahead") or {}
        self.tokens_sent += lookahead.get("input_tokens", 0)
        self.peak_context_tokens = max(self.peak_context_tokens, report["peak_context_tokens"])
        self.needed += lookahead.get("needed", 0)
        self.kept += lookahead.get("kept", 0)
        self.cache_breaks += lookahead.get("cache_breaks", 0)
        cost = lookahead.get("cost_usd")
        self.cost_usd = None if self.cost_usd is None or cost is None else self.cost_usd + cost
        probes = report.get("probes") or {}
        self.probes_held += probes.get("held", 0)
        self.probes_total += probes.get("total", 0)
        if self.probe_kinds is not None:
            for kind, figures in (probes.get("by_kind") or {}).items():
                mine = self.probe_kinds.setdefault(kind, {"held": 0, "total": 0})
                mine["held"] += figures["held"]
                mine["total"] += figures["total"]
        integrity = report["integrity"]
        if integrity["tool_pairs_ok"] and integrity["replay_exact"]:
            self.intact += 1
        else:
            self.broken.append(session)

    def add_baseline(self, figures: dict[str, Any], calls: int) -> None:
        self.sessions += 1
        self.model_calls += calls
        self.overflow_calls += figures["overflow_calls"]
        self.tokens_sent += figures["input_tokens"]
        self.peak_context_tokens = max(self.peak_context_tokens, figures["peak_context_tokens"])
        self.needed += figures["needed"]
        self.kept += figures["kept"]
        self.cache_breaks += figures["cache_breaks"]
        cost = figures.get("cost_usd")
        self.cost_usd = None if self.cost_usd is None or cost is None else self.cost_usd + cost
        self.thrash = None
        self.probe_kinds = None
        self.intact += 1

    @property
    def mean_context_tokens(self) -> int:
        return round(self.tokens_sent / self.model_calls) if self.model_calls else 0

    @property
    def recall(self) -> float | None:
        share = pooled_recall(self.kept, self.needed)  # the tuning page's computation (compaction.figures)
        return None if share is None else round(share, 4)

    @property
    def probe_score(self) -> float | None:
        return round(self.probes_held / self.probes_total, 4) if self.probes_total else None

    @property
    def retention_mean(self) -> float | None:
        return round(sum(self.retention) / len(self.retention), 4) if self.retention else None

    @property
    def compression_mean(self) -> float | None:
        return round(sum(self.compression) / len(self.compression), 2) if self.compression else None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "sessions": self.sessions, "model_calls": self.model_calls,
                "overflow_calls": self.overflow_calls, "thrash": self.thrash, "compactions": self.compactions,
                "llm_calls": self.llm_calls, "mean_context_tokens": self.mean_context_tokens,
                "peak_context_tokens": self.peak_context_tokens, "tokens_sent": self.tokens_sent,
                "retention": self.retention_mean, "compression": self.compression_mean,
                "recall": self.recall, "needed": self.needed, "kept": self.kept,
                "probes": self.probe_score, "probes_held": self.probes_held, "probes_total": self.probes_total,
                "probes_by_kind": self.probe_kinds,
                "cache_breaks": self.cache_breaks,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4),
                "integrity_ok": self.intact, "integrity_broken": self.broken}


BASELINE_LABELS = {"sliding_window": "baseline: sliding window", "observation_masking": "baseline: observation masking"}


def compare(sessions: list[CorpusSession], policies: list[tuple[str, Policy]], *, price_model: str | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Replay every session through every policy; ``{"sessions", "rows", "baselines"}``."""
    rows = [PolicyTotals(label) for label, _ in policies]
    baselines = {name: PolicyTotals(label) for name, label in BASELINE_LABELS.items()}
    total = len(sessions) * len(policies)
    done = 0
    for p_index, ((label, policy), row) in enumerate(zip(policies, rows)):
        for s in sessions:
            done += 1
            if progress is not None:
                progress(f"[{done}/{total}] {label}: {s.name} ({len(s.messages)} messages)")
            report = simulate(s.messages, policy, tools=s.tools or None, session_id=s.name, price_model=price_model)
            row.add(s.name, report)
            if p_index == 0:
                for name, figures in report["lookahead"]["baselines"].items():
                    baselines[name].add_baseline(figures, report["model_calls"])
    return {"sessions": [s.name for s in sessions], "rows": [r.to_dict() for r in rows],
            "baselines": [b.to_dict() for b in baselines.values()] if rows else []}


def _num(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def _pct(value: float | None) -> str:
    return NONE if value is None else f"{value:.1%}"


COLUMNS = ("policy", "over", "thrash", "compact", "LLM", "mean ctx", "peak ctx", "tokens sent", "retain", "ratio",
           "recall", "probes", "breaks", "cost $", "intact")


def table(result: dict[str, Any]) -> str:
    """The comparison as a plain-text table (baselines below a rule)."""
    def cells(r: dict[str, Any], baseline: bool) -> list[str]:
        return [r["label"], _num(r["overflow_calls"]), _num(r["thrash"]),
                NONE if baseline else _num(r["compactions"]), NONE if baseline else _num(r["llm_calls"]),
                _num(r["mean_context_tokens"]), _num(r["peak_context_tokens"]), _num(r["tokens_sent"]),
                _pct(r["retention"]), NONE if r["compression"] is None else f"{r['compression']:.1f}x",
                _pct(r["recall"]), NONE if r["probes"] is None else f"{r['probes']:.3f}", _num(r["cache_breaks"]),
                NONE if r["cost_usd"] is None else f"{r['cost_usd']:.2f}",
                NONE if baseline else f"{r['integrity_ok']}/{r['sessions']}"]

    body = [cells(r, False) for r in result["rows"]]
    extra = [cells(r, True) for r in result["baselines"]]
    grid = [list(COLUMNS)] + body + extra
    widths = [max(len(row[i]) for row in grid) for i in range(len(COLUMNS))]

    def line(row: Iterable[str]) -> str:
        parts = list(row)
        return "  ".join([parts[0].ljust(widths[0])] + [p.rjust(w) for p, w in zip(parts[1:], widths[1:])]).rstrip()

    out = [line(COLUMNS), line("-" * w for w in widths)]
    out += [line(r) for r in body]
    if extra:
        out.append(line("-" * w for w in widths))
        out += [line(r) for r in extra]
    return "\n".join(out)


def session_files(directory: Path) -> list[Path]:
    """The ``*.json`` files of a directory, by name."""
    return sorted(p for p in directory.glob("*.json") if p.is_file())
