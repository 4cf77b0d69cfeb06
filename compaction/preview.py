"""What a policy would have done to a recorded session, against the same session without
compaction: context per model call, tokens sent and saved, estimated cost, mean retention.

A preview replays with the offline extractive summarizer, so it never calls a model, costs
nothing and needs no network; costs are estimated at litellm's prices (compaction.windows)
for the agent model and the summarizer model the policy names.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .compactor import counter_for
from .evaluation.needed import NeededMemo
from .figures import ReplayFigures, append_only_costs
from .messages import Message, Provenance, original_id
from .policy import Policy
from .simulate import SimulationReport, run_simulation
from .windows import price_per_token


def offline(policy: Policy) -> Policy:
    """The same policy with the offline extractive summarizer."""
    return policy.with_overrides({"summarizer.model": None, "summarizer.failover_models": [],
                                  "summarizer.api_base": None})


@dataclass(frozen=True)
class PolicyPreview:
    report: SimulationReport
    #: Index (in the history) of each model call, i.e. of each assistant message.
    calls: list[int]
    #: Context tokens sent at each model call with the policy, and without compaction.
    per_call: list[int]
    baseline: list[int]
    #: Context after the last message without compaction.
    baseline_final: int
    #: The agent model the policy or the session names (None: neither does).
    agent_model: str | None
    summarizer_model: str | None
    #: USD of the summaries at the summarizer's price; 0 without a summarizer model, None
    #: when litellm does not know its price.
    summarizer_cost: float | None
    retention_mean: float | None

    @property
    def tokens_sent(self) -> int:
        return sum(self.per_call)

    @property
    def tokens_sent_baseline(self) -> int:
        return sum(self.baseline)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_sent_baseline - self.tokens_sent

    @property
    def saved_share(self) -> float | None:
        baseline = self.tokens_sent_baseline
        return self.tokens_saved / baseline if baseline else None

    @property
    def baseline_mean(self) -> int:
        """Mean context per model call without compaction."""
        return round(self.tokens_sent_baseline / len(self.baseline)) if self.baseline else 0

    @property
    def baseline_peak(self) -> int:
        """Largest context without compaction: at a model call, or after the last message."""
        return max(max(self.baseline, default=0), self.baseline_final)

    @property
    def baseline_overflow_calls(self) -> int:
        return sum(1 for v in self.baseline if v > self.report.usable_window)

    @property
    def figures(self) -> ReplayFigures:
        """The replay's numbers as the preview, the sweep and ``compare`` show them
        (compaction.figures): cache-priced and uncached cost, pooled recall."""
        report = self.report
        lookahead = report.lookahead
        prices = lookahead.prices if lookahead is not None else None
        meter = lookahead.policy.cache if lookahead is not None else None
        base_cached, base_full = append_only_costs(self.baseline, prices)
        scores = [c.retention for c in report.compactions if c.retention is not None]
        return ReplayFigures(
            calls=len(self.calls), tokens_sent=self.tokens_sent, tokens_baseline=self.tokens_sent_baseline,
            needed=lookahead.policy.needed if lookahead is not None else 0,
            kept=lookahead.policy.kept if lookahead is not None else 0,
            cost_usd=meter.cost(prices) if meter is not None else None,
            cost_without_cache_usd=None if prices is None else self.tokens_sent * prices.input,
            baseline_cost_usd=base_cached, baseline_cost_without_cache_usd=base_full,
            summary_cost_usd=self.summarizer_cost, cache_breaks=meter.breaks if meter is not None else 0,
            overflow_calls=report.overflow_calls, compactions=len(report.compactions),
            summaries=sum(1 for c in report.compactions if c.summarized),
            retention_sum=sum(scores), retention_count=len(scores))

    @property
    def price_model(self) -> str | None:
        """The model the agent's input is priced at (the look-ahead's choice)."""
        return self.report.lookahead.price_model if self.report.lookahead is not None else self.agent_model


#: The session id every preview replays under. Archive entry ids are a hash of the session id
#: and the context quotes them (the summary's archive references), so a replay named after the
#: stored session (its database key) would count different tokens for the same history and
#: policy: a sweep's figures and its recommendation would change with the key.
PREVIEW_SESSION_ID = "preview"


def preview_policy(messages: list[dict[str, Any]], policy: Policy, *, tools: list[dict[str, Any]] | None = None,
                   fallback_model: str | None = None, session_id: str = PREVIEW_SESSION_ID,
                   needed_memo: NeededMemo | None = None,
                   progress: Callable[[int, int], None] | None = None) -> PolicyPreview:
    """Replay ``messages`` through ``policy`` (offline) and price it against no compaction.
    ``fallback_model`` prices the agent's calls when the policy names no model;
    ``needed_memo``, shared by previews of the same messages, saves rescanning what each call
    needed (it does not depend on the policy). ``progress`` is called after each message
    (done, total); an exception it raises stops the replay there and reaches the caller (a
    live preview stops work nobody waits for any more)."""
    report = run_simulation(messages, offline(policy), tools=tools, session_id=session_id, keep_contexts=True,
                            price_model=policy.model or fallback_model, needed_memo=needed_memo, progress=progress)
    counter = counter_for(policy)
    counts = counter.count_many([Message(raw, original_id(i), Provenance.ORIGINAL, i)
                                 for i, raw in enumerate(messages)])
    running = counter.count_tools(tools) if tools else 0
    calls: list[int] = []
    baseline: list[int] = []
    for i, (raw, tokens) in enumerate(zip(messages, counts)):
        if raw.get("role") == "assistant":
            calls.append(i)
            baseline.append(running)
        running += tokens.total
    model = policy.model or fallback_model or None
    summarizer_model = policy.summarizer.model
    summarizer_cost: float | None = 0.0
    if summarizer_model:
        price = price_per_token(summarizer_model)
        summarizer_cost = None if price is None else sum(
            c.tokens_before * price[0] + c.summary_tokens * price[1] for c in report.compactions if c.summarized)
    scores = [c.retention for c in report.compactions if c.retention is not None]
    return PolicyPreview(
        report=report, calls=calls, per_call=report.kept.per_call if report.kept else [], baseline=baseline,
        baseline_final=running, agent_model=model,
        summarizer_model=summarizer_model, summarizer_cost=summarizer_cost,
        retention_mean=sum(scores) / len(scores) if scores else None,
    )
