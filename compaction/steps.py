"""The steps of one compaction run, each a function of the :class:`RunContext` (and of the
results of earlier steps) returning a typed result.

    check_trigger -> TriggerStep        did the summary trigger fire (or was the run forced)
    reduce_tool_output -> ReductionStep tool-output reduction, whatever the trigger says
    plan_eviction -> CutPlan | NoCut    which messages a summary would replace
    summarize_span -> SummaryStep       the summary of the evicted span (or why none is worth it)
    finalize_context -> FinalizeStep   the new context around the summary, and what to archive
    tailor_context -> TailorStep        the final budget step (token tailoring, history runs)

No step writes to the archive or to the caller's state: archive entries travel in the
results, and :class:`compaction.Compactor` writes them once every step has succeeded.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import tailoring
from .archive import ArchiveEntry, item_for, new_entry_id
from .context import check_tool_pairs, render_messages
from .cut import CutPlan, NoCut, plan_cut
from .errors import CompactionError, SessionValidationError, SummaryError
from .finalize import FinalizeInput, run_finalizer
from .ledger import Fate
from .messages import Message, Provenance, text_of
from .policy import Policy, SummarizerPolicy
from .reduction.pipeline import before_call
from .reduction.result import ReductionLedgerRow
from .retention import retention
from .run_context import Event, RunContext, since_last_summary
from .summarizer import SummaryResult, summarize
from .tailoring import TailorResult
from .tokens import MessageTokens
from .triggers import ConditionResult, evaluate, usable_window

# -- trigger ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TriggerStep:
    trigger: dict[str, Any]              # as the outcome reports it
    condition: ConditionResult | None    # None when the run was forced


def check_trigger(run: RunContext) -> TriggerStep:
    if run.force:
        return TriggerStep({"kind": "manual", "fired": True, "reason": "forced"}, None)
    st, sm = since_last_summary(run.messages, run.tokens)
    cond = evaluate(run.policy.trigger, run.trigger_state(run.before.total, len(run.messages), st, sm))
    return TriggerStep(cond.to_dict() | {"reason": cond.reason}, cond)


def fires_again(run: RunContext, messages: list[Message], tokens: list[MessageTokens]) -> bool:
    """Whether the summary trigger still fires on ``messages`` (the context after reduction)."""
    total = sum(t.total for t in tokens) + run.tools_tokens
    st, sm = since_last_summary(messages, tokens)
    return evaluate(run.policy.trigger, run.trigger_state(total, len(messages), st, sm)).fired


# -- tool-output reduction -------------------------------------------------------------------------

@dataclass(frozen=True)
class ReductionStep:
    messages: list[Message]                   # the context after reduction (the input when nothing changed)
    tokens: list[MessageTokens]
    entries: tuple[ArchiveEntry, ...] = ()    # originals of the reduced messages
    rows: Mapping[str, ReductionLedgerRow] = field(default_factory=dict)   # message id -> its latest edit
    tokens_cleared: int = 0
    tokens_truncated: int = 0
    edits: int = 0                            # ledger rows of the reduction (one per edit)

    @property
    def reduced(self) -> bool:
        return bool(self.entries) or bool(self.rows)


def reduce_tool_output(run: RunContext) -> ReductionStep:
    """Tool-output reduction has thresholds of its own and runs whether or not the summary
    trigger fired: it is cheap and needs no LLM."""
    unchanged = ReductionStep(run.messages, run.tokens)
    policy = run.policy
    if not policy.reduction.enabled:
        return unchanged
    run.step("reduce")
    rr = before_call(run.messages, policy=policy.reduction, counter=run.counter, window=run.usable_window,
                     session_id=run.session_id, total_tokens=run.before.total, hooks=run.hooks.own.reduction or None)
    for e in rr.events:
        run.emit(e)
    if rr.abandoned or not (rr.entries or rr.ledger_rows):
        return unchanged
    return ReductionStep(rr.messages, run.counter.count_many(rr.messages), tuple(rr.entries),
                         {row.message_id: row for row in rr.ledger_rows}, rr.tokens_cleared, rr.tokens_truncated,
                         len(rr.ledger_rows))


# -- cut ---------------------------------------------------------------------------------------------

def plan_eviction(run: RunContext, reduced: ReductionStep) -> CutPlan | NoCut:
    run.step("cut")
    return plan_cut(reduced.messages, reduced.tokens, run.policy.cut, run.window, run.policy.pin_first_user_message)


# -- summary -----------------------------------------------------------------------------------------

def summarizer_settings(policy: Policy, window: int) -> SummarizerPolicy:
    """The summarizer section with the word budget capped at ~10% of the usable window
    (about 1.35 tokens a word), so a summary never refills a small window by itself."""
    settings = policy.summarizer
    cap = max(50, int(0.10 * usable_window(window, policy.reserved_output_tokens) / 1.35))
    if settings.max_summary_words == 0 or settings.max_summary_words > cap:
        return settings.model_copy(update={"max_summary_words": cap})
    return settings


@dataclass(frozen=True)
class SummaryStep:
    plan: CutPlan
    span: list[Message]                  # the evicted messages, in order
    previous: list[Message]              # earlier summaries in the span, folded into this one
    replaced_tokens: int
    result: SummaryResult
    text: str                            # the summary after the post-summary hooks


@dataclass(frozen=True)
class SummaryDeclined:
    """The span stays verbatim: a summary of it would not be smaller."""
    reason: str


def summarize_span(run: RunContext, reduced: ReductionStep, plan: CutPlan) -> SummaryStep | SummaryDeclined:
    policy = run.policy
    span = [reduced.messages[i] for i in plan.evicted]
    replaced_tokens = sum(reduced.tokens[i].total for i in plan.evicted)
    previous = [m for m in span if m.provenance is Provenance.SUMMARY]
    previous_summary = "\n\n".join(m.meta.get("summary") or text_of(m.raw.get("content")) for m in previous) or None
    run.emit({"type": "before_summarize", "evicted": len(span), "tokens": replaced_tokens,
              "message_ids": [m.id for m in span]})

    run.step("summarize", messages=len(span), tokens=replaced_tokens)
    kwargs = run.hooks.summarize_kwargs()
    if run.parent_request is not None:
        kwargs["parent_request"] = run.parent_request
    try:
        result = summarize(span, summarizer_settings(policy, run.window), previous_summary=previous_summary,
                           counter=run.counter, fallback_window=policy.fallback_context_window,
                           replaced_tokens=replaced_tokens, on_event=run.emit, language=policy.finalize.language,
                           **kwargs)
    except SummaryError as exc:
        if exc.attempts and all((a.error or "").startswith("summary is not smaller") for a in exc.attempts):
            # Not a fault: the span is already as small as a summary of it would be.
            return SummaryDeclined(f"a summary would not be smaller than the {replaced_tokens} tokens it "
                                   f"replaces ({len(span)} messages); kept them verbatim")
        raise
    text = run.hooks.apply_post_summary(result.text, run.emit)
    return SummaryStep(plan, span, previous, replaced_tokens, result, text)


# -- finalize ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FinalizeStep:
    summary: SummaryStep
    messages: list[Message]              # the new context
    archive_ref: str                     # entry holding the evicted originals
    entries: tuple[ArchiveEntry, ...]    # folded previous summaries (if any), then the evicted originals
    fates: Mapping[str, Fate]            # message id -> fate, for the span and the pinned messages
    evicted_originals: int
    summary_tokens: int
    retention: dict[str, Any] | None

    @property
    def compression(self) -> float | None:
        if not self.summary_tokens:
            return None
        return round(self.summary.replaced_tokens / self.summary_tokens, 3)

    def cut(self) -> dict[str, Any]:
        plan = self.summary.plan
        return {"evicted": len(self.summary.span), "pinned": len(plan.pinned), "tail_start": plan.tail_start,
                "target": plan.target, "boundary": plan.boundary, "notes": plan.notes}


def covered_entries(previous: list[Message], archive_ref: str) -> tuple[str, ...]:
    """The archive entries a new summary stands for, oldest first: those of the summaries it
    folds in (each names its own chain, or at least its own entry), then ``archive_ref``."""
    refs: list[str] = []
    for m in previous:
        chain = m.meta.get("archive_refs")
        if not isinstance(chain, list):
            own = m.meta.get("archive_ref")
            chain = [own] if own else []
        refs.extend(r for r in chain if isinstance(r, str) and r not in refs)
    if archive_ref not in refs:
        refs.append(archive_ref)
    return tuple(refs)


def finalize_context(run: RunContext, reduced: ReductionStep, summary: SummaryStep) -> FinalizeStep:
    run.step("finalize")
    working, plan, result, text = reduced.messages, summary.plan, summary.result, summary.text
    archive_ref = new_entry_id()
    number = 1 + max((m.meta.get("number", 0) for m in working if m.provenance is Provenance.SUMMARY), default=0)
    covered = covered_entries(summary.previous, archive_ref)
    inp = FinalizeInput(head=[working[i] for i in plan.head], evicted=summary.span,
                        pinned=[working[i] for i in plan.pinned], tail=working[plan.tail_start:],
                        summary=text, model=result.model, extractive=result.extractive,
                        archive_ref=archive_ref, number=number, policy=run.policy, counter=run.counter,
                        window=run.window, covered_refs=covered)
    new_messages = run_finalizer(inp, run.hooks.own.finalizer)
    for m in new_messages:
        if m.provenance is Provenance.SUMMARY:
            m.meta.setdefault("summary", text)
            m.meta.setdefault("model", result.model)
            m.meta.setdefault("archive_refs", list(covered))
    context = render_messages(new_messages)
    try:
        check_tool_pairs(context)
    except SessionValidationError as exc:
        raise CompactionError(f"the finalized context would break a tool call/result pair ({exc}); nothing was changed") from exc

    entries: list[ArchiveEntry] = []
    if summary.previous:
        entries.append(ArchiveEntry(new_entry_id(), run.session_id, "previous_summary",
                                    [item_for(m) for m in summary.previous], run.run_id,
                                    note="folded into a new summary"))
    originals = [m for m in summary.span if m.is_original]
    entries.append(ArchiveEntry(archive_ref, run.session_id, "evicted", [item_for(m) for m in originals],
                                run.run_id, note=f"summarized by {result.model}"))
    run.emit({"type": "after_summarize", "archive_ref": archive_ref, "messages_after": len(new_messages)})

    preserved_ids = {m.meta.get("source_id") for m in new_messages if m.provenance is Provenance.PRESERVED}
    fates: dict[str, Fate] = {}
    for m in summary.span:
        fates[m.id] = ("preserved" if m.id in preserved_ids else
                       "folded" if m.provenance is Provenance.SUMMARY else "summarized")
    for i in plan.pinned:
        fates[working[i].id] = "pinned"
    summary_tokens = sum(run.counter.count(m).total for m in new_messages if m.provenance is Provenance.SUMMARY)
    return FinalizeStep(summary, new_messages, archive_ref, tuple(entries), fates, len(originals), summary_tokens,
                        retention([m.raw for m in summary.span], context))


# -- final budget step -----------------------------------------------------------------------------

@dataclass(frozen=True)
class TailorStep:
    result: TailorResult
    entry: ArchiveEntry | None = None    # the dropped originals; None when nothing was dropped
    event: Event | None = None

    @property
    def dropped(self) -> bool:
        return self.entry is not None


def tailor_context(run: RunContext, messages: list[Message]) -> TailorStep:
    """Token tailoring and the history-runs limit on what the other steps produced."""
    run.step("tailor", messages=len(messages))
    tr = tailoring.apply(messages, run.counter, run.policy, run.window, tools_tokens=run.tools_tokens)
    if not tr.dropped:
        return TailorStep(tr)
    originals = [m for m in tr.dropped if m.is_original]
    entry = ArchiveEntry(new_entry_id(), run.session_id, "evicted", [item_for(m) for m in originals], run.run_id,
                         note="dropped by " + " and ".join(sorted(set(tr.dropped_by.values()))).replace("_", " "))
    event = {"type": "tailor", "at": run.clock(), "archive_ref": entry.id, **tr.to_dict()}
    return TailorStep(tr, entry, event)
