"""Replay a recorded session through a policy as an agent loop would have lived it.

Messages are fed one at a time. Before each assistant message (a model call) the loop
does what an integration would do: compact if anything is due, then "send" the context.
The report says where compactions fired, what they cost and whether integrity held.
"""
from __future__ import annotations

import time
from typing import Callable

from .archive import ArchiveBackend, MemoryArchive
from .context import tool_pairs_ok
from .errors import CompactionError, SummaryError
from .messages import canonical_json
from .policy import Policy
from .session import CompactionSession


def simulate(messages: list[dict], policy: Policy | str | dict = "default", *, tools: list[dict] | None = None,
             archive: ArchiveBackend | None = None, session_id: str = "replay",
             keep_contexts: bool = False, progress: Callable[[int, int], None] | None = None,
             counterfactual: bool = False) -> dict:
    """Replay ``messages`` through ``policy``. With ``counterfactual`` and reduction enabled, the
    session is replayed a second time without reduction (offline summarizer, in memory) to
    count the LLM summaries the reduction made unnecessary."""
    started = time.perf_counter()
    session = CompactionSession(policy, archive=archive or MemoryArchive(), session_id=session_id, tools=tools)
    window = session.compactor.window
    model_calls = overflow = llm_calls = 0
    peak = 0
    pairs_ok = True
    compactions: list[dict] = []
    failures: list[dict] = []
    contexts: list[int] = []
    summaries_avoided = 0
    total = len(messages)
    for index, raw in enumerate(messages):
        if raw.get("role") == "assistant":
            try:
                out = session.before_model_call()
            except (SummaryError, CompactionError) as exc:
                attempts = [a.to_dict() if hasattr(a, "to_dict") else a for a in getattr(exc, "attempts", [])]
                llm_calls += len(attempts)
                failures.append({"at": index, "error": str(exc), "attempts": len(attempts)})
                out = None
            if out:
                llm_calls += len(out.attempts)
                if not out.summarized and any("no summary needed" in n for n in out.notes):
                    summaries_avoided += 1
                compactions.append(_compaction_row(index, out))
                if not tool_pairs_ok(out.context):
                    pairs_ok = False
            model_calls += 1
            size = session.total_tokens
            contexts.append(size)
            peak = max(peak, size)
            if size > window:
                overflow += 1
        session.append(raw)
        if progress is not None:
            progress(index + 1, total)
    context = session.context()
    # the final context may end with calls still waiting for results; that is legal
    pairs_ok = pairs_ok and _pairs_ok_allowing_trailing(context)
    try:
        replayed = session.replay()
        replay_exact = canonical_json(replayed) == canonical_json(messages)
        replay_error = None if replay_exact else "replayed sequence differs from the original"
    except CompactionError as exc:
        replay_exact, replay_error = False, str(exc)
    report = {
        "session": session_id,
        "policy": session.policy.name,
        "window": window,
        "window_source": session.compactor.window_source,
        "counter": session.compactor.counter.name,
        "messages": len(messages),
        "model_calls": model_calls,
        "compactions": compactions,
        "failed_compactions": failures,
        "peak_context_tokens": peak,
        "final_context_tokens": session.total_tokens,
        "final_context_messages": len(context),
        "overflow_calls": overflow,
        "llm_calls": llm_calls,
        "tokens_cleared": sum(c["tokens_cleared"] for c in compactions),
        "tokens_truncated": sum(c["tokens_truncated"] for c in compactions) + _arrival_truncated(session),
        "reduction_events": sum(c["reduction_events"] for c in compactions) + len(session.truncation_events),
        "summaries_avoided_by_reduction": summaries_avoided,
        "integrity": {"tool_pairs_ok": pairs_ok, "replay_exact": replay_exact},
        "elapsed_s": round(time.perf_counter() - started, 3),
    }
    if replay_error:
        report["integrity"]["error"] = replay_error
    if counterfactual and session.policy.reduction.enabled:
        without = session.policy.model_copy(deep=True)
        without.reduction.enabled = False
        without.summarizer.model = None
        alt = simulate(messages, without, tools=tools, session_id=session_id + "-without-reduction")
        summaries_with = sum(1 for c in compactions if c["summarized"])
        summaries_without = sum(1 for c in alt["compactions"] if c["summarized"])
        report["summaries_without_reduction"] = summaries_without
        report["summaries_avoided_by_reduction"] = max(0, summaries_without - summaries_with)
    if keep_contexts:
        report["context_per_call"] = contexts
        report["context"] = context
        report["replay"] = session.replay() if replay_exact else None
    return report


def _arrival_truncated(session: CompactionSession) -> int:
    return sum(max(0, (e.get("tokens_before") or 0) - (e.get("tokens_after") or 0)) for e in session.truncation_events)


def _compaction_row(index: int, out) -> dict:
    retention = (out.retention or {}).get("referenced", {}) if out.retention else {}
    return {
        "at": index,
        "trigger": (out.trigger or {}).get("reason"),
        "summarized": out.summarized,
        "tokens_before": out.tokens_before["total"],
        "tokens_after": out.tokens_after["total"],
        "messages_before": out.messages_before,
        "messages_after": out.messages_after,
        "evicted_messages": out.evicted_messages,
        "summary_tokens": out.summary_tokens,
        "retention": retention.get("score"),
        "retention_all": ((out.retention or {}).get("all") or {}).get("score") if out.retention else None,
        "compression": out.compression,
        "attempts": len(out.attempts),
        "model": out.model,
        "tokens_cleared": out.tokens_cleared,
        "tokens_truncated": out.tokens_truncated,
        "reduction_events": out.reduction_events,
        "archive_refs": out.archive_refs,
        "notes": out.notes,
    }


def _pairs_ok_allowing_trailing(context: list[dict]) -> bool:
    return tool_pairs_ok(context)
