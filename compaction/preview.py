"""What a policy would have done to a recorded session, against the same session without
compaction: context per model call, tokens sent and saved, estimated cost, mean retention.

A preview replays with the offline extractive summarizer, so it never calls a model, costs
nothing and needs no network; costs are estimated at litellm's prices (compaction.windows)
for the agent model and the summarizer model the policy names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .compactor import counter_for
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
    #: Agent model the costs are priced for, and its (input, output) USD per token.
    price_model: str | None
    price: tuple[float, float] | None
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
    def cost(self) -> float | None:
        return self.tokens_sent * self.price[0] if self.price is not None else None

    @property
    def cost_baseline(self) -> float | None:
        return self.tokens_sent_baseline * self.price[0] if self.price is not None else None


def preview_policy(messages: list[dict[str, Any]], policy: Policy, *, tools: list[dict[str, Any]] | None = None,
                   fallback_model: str | None = None, session_id: str = "preview") -> PolicyPreview:
    """Replay ``messages`` through ``policy`` (offline) and price it against no compaction.
    ``fallback_model`` prices the agent's calls when the policy names no model."""
    report = run_simulation(messages, offline(policy), tools=tools, session_id=session_id, keep_contexts=True,
                            price_model=policy.model or fallback_model)
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
        baseline_final=running, price_model=model, price=price_per_token(model),
        summarizer_model=summarizer_model, summarizer_cost=summarizer_cost,
        retention_mean=sum(scores) / len(scores) if scores else None,
    )
