"""Replay a recorded session through a policy as an agent loop would have lived it.

Messages are fed one at a time. Before each assistant message (a model call) the loop
does what an integration would do: compact if anything is due, then "send" the context.
The report says where compactions fired, what they cost and whether integrity held.

``run_simulation`` gives the report as a ``SimulationReport``; ``simulate`` gives the
same report as the JSON object the CLI prints and the service's simulate endpoint returns.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from .archive import ArchiveBackend, MemoryArchive
from .context import tool_pairs_ok
from .errors import CompactionError, SummaryError
from .evaluation import LookAhead, LookAheadReport
from .evaluation.cache import choose_price_model
from .evaluation.needed import NeededMemo
from .evaluation.probes import ProbeReport
from .evaluation.probes import score as score_probes
from .landing import DEFAULT_MIN_FREED_SHARE
from .messages import canonical_json
from .outcome import Outcome
from .policy import Policy
from .session import CompactionSession


@dataclass(frozen=True)
class FiredCompaction:
    """One compaction the replay performed, before the model call at message ``at``."""

    at: int
    trigger: str | None
    summarized: bool
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    evicted_messages: int
    summary_tokens: int
    retention: float | None
    retention_all: float | None
    compression: float | None
    attempts: int
    model: str | None
    tokens_cleared: int
    tokens_truncated: int
    reduction_events: int
    archive_refs: list[str]
    notes: list[str]

    @classmethod
    def of(cls, at: int, out: Outcome) -> FiredCompaction:
        retention = out.retention or {}
        return cls(
            at=at,
            trigger=(out.trigger or {}).get("reason"),
            summarized=out.summarized,
            tokens_before=out.tokens_before["total"],
            tokens_after=out.tokens_after["total"],
            messages_before=out.messages_before,
            messages_after=out.messages_after,
            evicted_messages=out.evicted_messages,
            summary_tokens=out.summary_tokens,
            retention=(retention.get("referenced") or {}).get("score"),
            retention_all=(retention.get("all") or {}).get("score"),
            compression=out.compression,
            attempts=len(out.attempts),
            model=out.model,
            tokens_cleared=out.tokens_cleared,
            tokens_truncated=out.tokens_truncated,
            reduction_events=out.reduction_events,
            archive_refs=out.archive_refs,
            notes=out.notes,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FailedCompaction:
    """A compaction that raised; the replay goes on with the context uncompacted."""

    at: int
    error: str
    attempts: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Integrity:
    """Tool calls still paired with their results, and archive + context replaying the
    original history exactly (``error`` says what differed)."""

    tool_pairs_ok: bool
    replay_exact: bool
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.tool_pairs_ok and self.replay_exact

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_pairs_ok": self.tool_pairs_ok, "replay_exact": self.replay_exact}
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class KeptContexts:
    """What ``keep_contexts`` adds: the context size sent at each model call, the final
    context, and the replayed history (None when it did not replay exactly)."""

    per_call: list[int]
    context: list[dict[str, Any]]
    replay: list[dict[str, Any]] | None


@dataclass(frozen=True)
class SimulationReport:
    session: str
    policy: str
    window: int
    window_source: str
    counter: str
    messages: int
    model_calls: int
    compactions: list[FiredCompaction]
    failed_compactions: list[FailedCompaction]
    peak_context_tokens: int
    final_context_tokens: int
    final_context_messages: int
    overflow_calls: int
    llm_calls: int
    tokens_cleared: int
    tokens_truncated: int
    reduction_events: int
    summaries_avoided_by_reduction: int
    integrity: Integrity
    #: model calls over the usable window only because one message is itself larger than it
    oversized_calls: int = 0
    #: compactions of any kind (clearing, truncation, summary, tailoring) that freed less than
    #: 10% of the usable window: each breaks the prompt cache for little room
    thrash: int = 0
    usable_window: int = 0
    #: settings that cannot work as written at this window (the overflow guard stands in)
    warnings: tuple[str, ...] = ()
    #: LLM summaries the same replay makes without reduction (counterfactual runs only).
    summaries_without_reduction: int | None = None
    kept: KeptContexts | None = None
    #: Needed-context recall, baselines and prompt-cache figures (None when not asked for).
    lookahead: LookAheadReport | None = None
    #: Summary probes (:mod:`compaction.evaluation.probes`), with the look-ahead.
    probes: ProbeReport | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``python -m compaction replay --json``)."""
        out: dict[str, Any] = {
            "session": self.session,
            "policy": self.policy,
            "window": self.window,
            "window_source": self.window_source,
            "counter": self.counter,
            "messages": self.messages,
            "model_calls": self.model_calls,
            "compactions": [c.to_dict() for c in self.compactions],
            "failed_compactions": [f.to_dict() for f in self.failed_compactions],
            "peak_context_tokens": self.peak_context_tokens,
            "final_context_tokens": self.final_context_tokens,
            "final_context_messages": self.final_context_messages,
            "usable_window": self.usable_window,
            "overflow_calls": self.overflow_calls,
            "oversized_calls": self.oversized_calls,
            "thrash": self.thrash,
            "warnings": list(self.warnings),
            "llm_calls": self.llm_calls,
            "tokens_cleared": self.tokens_cleared,
            "tokens_truncated": self.tokens_truncated,
            "reduction_events": self.reduction_events,
            "summaries_avoided_by_reduction": self.summaries_avoided_by_reduction,
            "integrity": self.integrity.to_dict(),
        }
        if self.summaries_without_reduction is not None:
            out["summaries_without_reduction"] = self.summaries_without_reduction
        if self.lookahead is not None:
            out["lookahead"] = self.lookahead.to_dict()
        if self.probes is not None:
            out["probes"] = self.probes.to_dict()
        if self.kept is not None:
            out["context_per_call"] = self.kept.per_call
            out["context"] = self.kept.context
            out["replay"] = self.kept.replay
        return out


class ReplayClock:
    """The time a replay stamps on events and archive entries: the position of the message
    being replayed, not the wall clock, so that three replays write the same bytes."""

    def __init__(self) -> None:
        self.position = 0

    def __call__(self) -> float:
        return float(self.position)


def simulate(messages: list[dict[str, Any]], policy: Policy | str | dict[str, Any] = "default", *,
             tools: list[dict[str, Any]] | None = None, archive: ArchiveBackend | None = None,
             session_id: str = "replay", keep_contexts: bool = False,
             progress: Callable[[int, int], None] | None = None, counterfactual: bool = False,
             lookahead: bool = True, price_model: str | None = None) -> dict[str, Any]:
    """Replay ``messages`` through ``policy``; the report as JSON (see ``run_simulation``)."""
    return run_simulation(messages, policy, tools=tools, archive=archive, session_id=session_id,
                          keep_contexts=keep_contexts, progress=progress, counterfactual=counterfactual,
                          lookahead=lookahead, price_model=price_model).to_dict()


def run_simulation(messages: list[dict[str, Any]], policy: Policy | str | dict[str, Any] = "default", *,
                   tools: list[dict[str, Any]] | None = None, archive: ArchiveBackend | None = None,
                   session_id: str = "replay", keep_contexts: bool = False,
                   progress: Callable[[int, int], None] | None = None,
                   counterfactual: bool = False, lookahead: bool = True,
                   price_model: str | None = None, needed_memo: NeededMemo | None = None) -> SimulationReport:
    """Replay ``messages`` through ``policy``. With ``counterfactual`` and reduction enabled, the
    session is replayed a second time without reduction (offline summarizer, in memory) to
    count the LLM summaries the reduction made unnecessary. With ``lookahead`` each model
    call is scored against the assistant message that followed it
    (:mod:`compaction.evaluation`); costs are priced for ``price_model``, else the agent's
    model, else a common default."""
    clock = ReplayClock()
    session = CompactionSession(policy, archive=archive or MemoryArchive(), session_id=session_id, tools=tools,
                                clock=clock)
    window = session.compactor.window
    usable = session.usable_window
    # one yardstick for every policy, whatever its own minimum: a compaction that frees less
    # than this breaks the prompt cache for too little room
    thrash_floor = int(DEFAULT_MIN_FREED_SHARE * usable)
    thrash = oversized = 0
    model_calls = overflow = llm_calls = 0
    peak = 0
    pairs_ok = True
    compactions: list[FiredCompaction] = []
    failures: list[FailedCompaction] = []
    contexts: list[int] = []
    summaries_avoided = 0
    total = len(messages)
    live = session.live
    evaluator = None
    probes = ProbeReport() if lookahead else None
    gone: set[int] = set()   # ordinals of originals no longer in the context
    if lookahead:
        evaluator = LookAhead(session.compactor.counter, tools_tokens=live.tools_tokens,
                              usable_window=usable, price_model=choose_price_model(price_model, session.policy.model),
                              overflow_above=usable, memo=needed_memo)
    for index, raw in enumerate(messages):
        clock.position = index
        if raw.get("role") == "assistant":
            try:
                out = session.before_model_call()
            except (SummaryError, CompactionError) as exc:
                attempts = getattr(exc, "attempts", [])
                llm_calls += len(attempts)
                failures.append(FailedCompaction(at=index, error=str(exc), attempts=len(attempts)))
                out = None
            if isinstance(out, Outcome):
                llm_calls += len(out.attempts)
                if not out.summarized and any("no summary needed" in n for n in out.notes):
                    summaries_avoided += 1
                compactions.append(FiredCompaction.of(index, out))
                if out.tokens_before["total"] - out.tokens_after["total"] < thrash_floor:
                    thrash += 1
                if not tool_pairs_ok(out.context):
                    pairs_ok = False
                if probes is not None:
                    present = {m.ordinal for m in live.messages if m.is_original}
                    span = [i for i in range(index) if i not in present and i not in gone]
                    gone.update(span)
                    if span:
                        probes.compactions.append(score_probes(index, [messages[i] for i in span],
                                                               messages[:index], session.context()))
            model_calls += 1
            size = session.total_tokens
            contexts.append(size)
            peak = max(peak, size)
            if size > usable:
                overflow += 1
                if max((t.total for t in session.live.tokens), default=0) > usable:
                    oversized += 1
            if evaluator is not None:
                evaluator.call(index, raw, live.messages, live.tokens, size)
        if evaluator is not None:
            evaluator.append(raw)
        session.append(raw)
        if progress is not None:
            progress(index + 1, total)
    context = session.context()
    # the final context may end with calls still waiting for results; that is legal
    pairs_ok = pairs_ok and tool_pairs_ok(context)
    try:
        replayed = session.replay()
        replay_exact = canonical_json(replayed) == canonical_json(messages)
        replay_error = None if replay_exact else "replayed sequence differs from the original"
    except CompactionError as exc:
        replay_exact, replay_error = False, str(exc)
    summaries_without: int | None = None
    if counterfactual and session.policy.reduction.enabled:
        without = session.policy.model_copy(deep=True)
        without.reduction.enabled = False
        without.summarizer.model = None
        alt = run_simulation(messages, without, tools=tools, session_id=session_id + "-without-reduction",
                             lookahead=False)
        summaries_with = sum(1 for c in compactions if c.summarized)
        summaries_without = sum(1 for c in alt.compactions if c.summarized)
        summaries_avoided = max(0, summaries_without - summaries_with)
    # the history can grow after the last model call (tool results, a user turn): the peak is
    # the largest context the session held, so it is never below the final one
    peak = max(peak, session.total_tokens)
    kept = None
    if keep_contexts:
        kept = KeptContexts(per_call=contexts, context=context, replay=session.replay() if replay_exact else None)
    return SimulationReport(
        session=session_id,
        policy=session.policy.name,
        window=window,
        window_source=session.compactor.window_source,
        counter=session.compactor.counter.name,
        messages=len(messages),
        model_calls=model_calls,
        compactions=compactions,
        failed_compactions=failures,
        peak_context_tokens=peak,
        final_context_tokens=session.total_tokens,
        final_context_messages=len(context),
        overflow_calls=overflow,
        oversized_calls=oversized,
        thrash=thrash,
        usable_window=usable,
        warnings=tuple(session.policy.warnings()),
        llm_calls=llm_calls,
        tokens_cleared=sum(c.tokens_cleared for c in compactions),
        tokens_truncated=sum(c.tokens_truncated for c in compactions) + _arrival_truncated(session),
        reduction_events=sum(c.reduction_events for c in compactions) + len(session.truncation_events),
        summaries_avoided_by_reduction=summaries_avoided,
        integrity=Integrity(tool_pairs_ok=pairs_ok, replay_exact=replay_exact, error=replay_error),
        summaries_without_reduction=summaries_without,
        kept=kept,
        lookahead=evaluator.report() if evaluator is not None else None,
        probes=probes,
    )


def _arrival_truncated(session: CompactionSession) -> int:
    return sum(max(0, (e.get("tokens_before") or 0) - (e.get("tokens_after") or 0)) for e in session.truncation_events)
