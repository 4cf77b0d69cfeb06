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

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from . import tailoring
from .archive import ArchiveEntry, item_for
from .context import check_tool_pairs, render_messages
from .cut import LATEST_ROUND_NOTE, NO_TAIL_NOTE, CutPlan, NoCut, latest_round_start, plan_cut
from .errors import CompactionError, SessionValidationError, SummaryError
from .finalize import (
    FinalizeInput,
    plain_text,
    preserve_budget,
    preserved_user_messages,
    run_finalizer,
    summary_text,
)
from .ledger import Fate
from .locales import texts
from .messages import Message, Provenance, text_of
from .policy import Policy, SummarizerPolicy
from .reduction.config import (
    RECOVERY_TOOL_NAMES,
    ClearingConfig,
    PassesConfig,
    ReductionPolicy,
    TruncationConfig,
)
from .reduction.pipeline import before_call
from .reduction.result import ReductionLedgerRow
from .retention import retention
from .run_context import Event, RunContext, since_last_summary
from .summarizer import EXTRACTIVE_MODEL, SummaryResult, extractive_again, summarize, task_kept
from .summarizer.extractive import count_words
from .summarizer.llm import is_extractive
from .tailoring import TailorResult
from .tokens import USAGE_HORIZON, MessageTokens, usage_total
from .triggers import ConditionResult, evaluate, usable_window

log = logging.getLogger("compaction")

# -- trigger ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TriggerStep:
    trigger: dict[str, Any]              # as the outcome reports it
    condition: ConditionResult | None    # None when the run was forced


def check_trigger(run: RunContext) -> TriggerStep:
    if run.force:
        return TriggerStep({"kind": "manual", "fired": True, "reason": "forced"}, None)
    if run.over_window:
        # The overflow guard: the call would not fit, whatever the policy's trigger says.
        return TriggerStep({"kind": "overflow_guard", "fired": True,
                            "reason": f"overflow guard: context {run.before.total:,} tokens > usable window "
                                      f"{run.usable_window:,}"}, None)
    st, sm = since_last_summary(run.messages, run.tokens)
    total = measured_total(run.policy, run.messages, run.tokens, run.before.total)
    cond = evaluate(run.policy.trigger, run.trigger_state(total, len(run.messages), st, sm))
    line = tailoring.near_window_line(run.policy, run.window)
    if not cond.fired and line is not None and run.before.total >= line:
        # tRPC refreshes the summary before a call whose request nears the window, whatever
        # its own trigger says (cut.any_boundary_near_window)
        return TriggerStep({"kind": "near_window", "fired": True,
                            "reason": f"near the window: context {run.before.total:,} tokens >= {line:,} "
                                      f"(cut.any_boundary_near_window)"}, None)
    return TriggerStep(cond.to_dict() | {"reason": cond.reason}, cond)


def measured_total(policy: Policy, messages: list[Message], tokens: list[MessageTokens], estimate: int) -> int:
    """The context size the trigger compares: the estimate, or with ``count_from_usage`` the
    latest provider-reported usage plus the estimate of what came after it."""
    if policy.count_from_usage:
        reported = usage_total(messages, tokens)
        if reported is not None:
            return reported
    return estimate


def fires_again(run: RunContext, messages: list[Message], tokens: list[MessageTokens]) -> bool:
    """Whether the summary trigger still fires on ``messages`` (the context after reduction)."""
    total = measured_total(run.policy, messages, tokens, sum(t.total for t in tokens) + run.tools_tokens)
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
    step = unchanged
    if policy.reduction.enabled:
        run.step("reduce")
        step = _reduce(run, unchanged, policy.reduction, run.before.total, arrival=run.unseen_arrivals)
    if run.over_window:
        total = sum(t.total for t in step.tokens) + run.tools_tokens
        if total > run.usable_window:
            step = _reduce(run, step, guard_truncation(policy.reduction, run.landing_target), total)
    return step


def guard_truncation(reduction: ReductionPolicy, landing_target: int) -> ReductionPolicy:
    """The overflow guard's reduction: every tool result over half the landing target is cut
    to head + tail (original archived), whether or not the policy reduces tool output, so
    that only a message that is not a tool result can stay larger than the window."""
    return ReductionPolicy(
        enabled=True, language=reduction.language, keep_tools=list(RECOVERY_TOOL_NAMES),
        truncation=TruncationConfig(enabled=False), clearing=ClearingConfig(enabled=False),
        passes=PassesConfig(enabled=True, historical_max_tokens=1 << 40,
                            oversized_max_tokens=max(256, landing_target // 2)))


def _reduce(run: RunContext, step: ReductionStep, settings: ReductionPolicy, total: int,
            arrival: bool = False) -> ReductionStep:
    rr = before_call(step.messages, policy=settings, counter=run.counter, window=run.usable_window,
                     session_id=run.session_id, total_tokens=total, hooks=run.hooks.own.reduction or None,
                     arrival=arrival, ids=run.entry_ids)
    for e in rr.events:
        run.emit(e)
    if rr.abandoned or not (rr.entries or rr.ledger_rows):
        return step
    rows = dict(step.rows) | {row.message_id: row for row in rr.ledger_rows}
    return ReductionStep(rr.messages, run.counter.count_many(rr.messages), step.entries + tuple(rr.entries), rows,
                         step.tokens_cleared + rr.tokens_cleared, step.tokens_truncated + rr.tokens_truncated,
                         step.edits + len(rr.ledger_rows))


# -- cut ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TooLittleFreed:
    """The best cut would free less than the policy's minimum: no summary now, and the
    trigger waits until ``wait_tokens`` new tokens arrived."""
    reason: str
    wait_tokens: int


def plan_eviction(run: RunContext, reduced: ReductionStep) -> CutPlan | NoCut | TooLittleFreed:
    """The cut, moved back past the tail bounds when the context would not land at the target
    (policy ``landing``; always when guarding an overflow), and refused when the summary would
    free less than the minimum. Whatever moves it, the latest round stays (``cut.keep_latest_round``):
    when the summary and that round do not fit the target, the context lands above it."""
    run.step("cut")
    policy = run.policy
    keep_from = latest_round_start(reduced.messages) if policy.cut.keep_latest_round else None
    too_large = None
    if keep_from is not None and run.over_window and not latest_round_fits(run, reduced, keep_from):
        too_large = sum(t.total for t in reduced.tokens[keep_from:])
        keep_from = None
    plan = plan_cut(reduced.messages, reduced.tokens, policy.cut, run.window, policy.pin_first_user_message,
                    keep_from)
    total = sum(t.total for t in reduced.tokens) + run.tools_tokens
    if isinstance(plan, NoCut) and policy.cut.user_turn == "require":
        plan = relaxed_cut(run, reduced, total, keep_from) or plan
    if isinstance(plan, NoCut):
        return plan
    if too_large is not None:
        plan.notes.append(f"the latest round ({too_large:,} tokens) does not fit the usable window of "
                          f"{run.usable_window:,} tokens beside a summary, so the overflow guard summarizes "
                          f"it too (cut.keep_latest_round yields only then)")
    target = run.landing_target
    landing = landing_estimate(run, reduced, plan, total)
    if landing > target and (policy.landing.move_cut or run.over_window):
        moved = False
        # A few rounds: each evicts more, which makes the summary estimate larger too. The cut
        # stops at the latest round (plan_cut's keep_from) however far the target asks.
        for _ in range(4):
            tail = sum(t.total for t in reduced.tokens[plan.tail_start:])
            room = max(0, target - (landing - tail))
            tighter_policy = policy.cut.model_copy(update={"keep_fraction": min(policy.cut.keep_fraction,
                                                                                 room / run.window)})
            tighter = plan_cut(reduced.messages, reduced.tokens, tighter_policy, run.window,
                               policy.pin_first_user_message, keep_from)
            if not isinstance(tighter, CutPlan) or len(tighter.evicted) <= len(plan.evicted):
                break
            plan, moved = tighter, True
            landing = landing_estimate(run, reduced, plan, total)
            if landing <= target:
                break
        if moved:
            # the empty tail is the landing target's doing, not the policy's tail bounds
            plan.notes[:] = [n for n in plan.notes if not n.startswith((NO_TAIL_NOTE, LATEST_ROUND_NOTE))]
            plan.notes.append(f"moved the cut back past the tail bounds so the context lands near the target of "
                              f"{target:,} tokens (about {landing:,} expected)")
        if landing > target and plan.tail_start == keep_from:
            plan.notes.append(f"the latest round stays verbatim (cut.keep_latest_round), so the context lands "
                              f"above the target of {target:,} tokens (about {landing:,} expected)")
    freed = total - landing
    if freed < run.min_freed and policy.cut.user_turn == "require" and plan.boundary == "user_turn":
        # The user turn that starts the tail holds nearly everything since the last summary:
        # near the window the latest round is the tail instead (as for a single-request run)
        relaxed = relaxed_cut(run, reduced, total, keep_from, past_user_turn=True)
        if relaxed is not None and total - landing_estimate(run, reduced, relaxed, total) > freed:
            plan = relaxed
            landing = landing_estimate(run, reduced, plan, total)
            freed = total - landing
    if freed < run.min_freed:
        return TooLittleFreed(f"a summary now would free about {max(freed, 0):,} tokens, less than the minimum of "
                              f"{run.min_freed:,} (landing.min_freed); waiting for that many new tokens",
                              run.min_freed)
    return plan


def relaxed_cut(run: RunContext, reduced: ReductionStep, total: int, keep_from: int | None = None, *,
                past_user_turn: bool = False) -> CutPlan | None:
    """A cut at the nearest safe boundary when no user turn can start the kept tail: for a
    forced run (``cut.forced_any_boundary``), or before a model call whose context nears the
    window (``cut.any_boundary_near_window``; the latest round then stays verbatim). With
    ``past_user_turn`` the user turn that could start the tail is passed over too (it holds
    nearly the whole context) and the tail is the latest round, however large."""
    policy = run.policy
    cut = policy.cut
    forced = run.force and cut.forced_any_boundary
    line = tailoring.near_window_line(policy, run.window)
    near_window = not run.force and line is not None and (run.over_window or total >= line)
    if not (forced or near_window):
        return None
    update: dict[str, Any] = {"user_turn": "ignore" if past_user_turn else "prefer"}
    if near_window:
        last = max((i for i, m in enumerate(reduced.messages) if m.role == "assistant"), default=None)
        if last is not None:
            update["keep_messages"] = max(cut.keep_messages, len(reduced.messages) - last)
            update["keep_fraction"] = max(cut.keep_fraction, 0.25)
            if past_user_turn:
                round_tokens = sum(t.total for t in reduced.tokens[last:])
                update["keep_fraction"] = min(1.0, max(update["keep_fraction"], (round_tokens + 1) / run.window))
    elif past_user_turn:
        return None
    relaxed = plan_cut(reduced.messages, reduced.tokens, cut.model_copy(update=update), run.window,
                       policy.pin_first_user_message, keep_from)
    if not isinstance(relaxed, CutPlan):
        return None
    if forced:
        relaxed.notes.append("forced: no user turn can start the kept tail, so the cut falls at the "
                             "nearest safe boundary (cut.forced_any_boundary)")
    else:
        why = ("the turn a user message would start holds nearly all of it" if past_user_turn
               else "no user turn can start the kept tail")
        relaxed.notes.append(f"the context ({total:,} tokens) is past {line:,} tokens, near the window, and "
                             f"{why}, so the summary runs now, keeping the latest round (cut.any_boundary_near_window)")
    return relaxed


def landing_estimate(run: RunContext, reduced: ReductionStep, plan: CutPlan, total: int,
                     body: int | None = None) -> int:
    """The context's expected size after summarizing ``plan.evicted``: what stays, plus the
    summary in its frame (see :func:`summary_frame`; ``body`` tokens of text, by default
    :func:`summary_estimate`) and the re-inserted user messages at their budget, neither more
    than the span they come from."""
    policy = run.policy
    evicted = sum(reduced.tokens[i].total for i in plan.evicted)
    if body is None:
        body = summary_estimate(run, reduced, evicted)
    summary = body + summary_frame(run, [reduced.messages[i] for i in plan.evicted])
    preserved = 0
    fin = policy.finalize
    if fin.preserve_user_messages and fin.preserve_user_max_messages:
        users = [reduced.tokens[i].total for i in plan.evicted if reduced.messages[i].role == "user"]
        budget = preserve_budget(policy, run.window)
        preserved = min(sum(users[-fin.preserve_user_max_messages:]), budget)
    return total - evicted + min(evicted, summary + preserved)


def summary_estimate(run: RunContext, reduced: ReductionStep, evicted_tokens: int) -> int:
    """Tokens of a summary's text: its word budget at :func:`tokens_per_word`; an offline
    summary also takes at most half the words it reads (``extractive.budget.word_budget``),
    so of a short span about half its tokens."""
    settings = summarizer_settings(run.policy, run.window, reduced.messages)
    body = int(settings.max_summary_words * tokens_per_word(settings))
    if is_extractive(settings.model or EXTRACTIVE_MODEL):
        body = min(body, evicted_tokens // 2)
    return body


def summary_limit(run: RunContext, reduced: ReductionStep, plan: CutPlan, words: int) -> int:
    """Tokens the offline summary's text may take: its word budget at
    ``EXTRACTIVE_TOKENS_PER_WORD``; guarding an overflow, no more than the usable window
    leaves beside what stays (the latest round among it), down to ``MIN_SUMMARY_WORDS``."""
    ceiling = int(words * EXTRACTIVE_TOKENS_PER_WORD)
    if not run.over_window:
        return ceiling
    total = sum(t.total for t in reduced.tokens) + run.tools_tokens
    room = run.usable_window - landing_estimate(run, reduced, plan, total, body=0)
    return max(int(MIN_SUMMARY_WORDS * EXTRACTIVE_TOKENS_PER_WORD), min(ceiling, room))


def latest_round_fits(run: RunContext, reduced: ReductionStep, keep_from: int) -> bool:
    """Whether the latest round can go out verbatim at all: the leading system messages, the
    tools, the round and a summary of the fewest words fit the usable window. Only then does
    the overflow guard keep it; a round larger than that is summarized too, the one way to
    serve the call (its originals are archived, as every evicted message's are)."""
    messages, tokens = reduced.messages, reduced.tokens
    head = 0
    while head < keep_from and messages[head].role in ("system", "developer") and messages[head].is_original:
        head += 1
    kept = sum(t.total for t in tokens[:head]) + sum(t.total for t in tokens[keep_from:]) + run.tools_tokens
    smallest = int(MIN_SUMMARY_WORDS * TOKENS_PER_WORD) + summary_frame(run, list(messages[head:keep_from]))
    return kept + smallest <= run.usable_window


#: The shape of an archive handle, to count a handle the summary will name before it exists
_HANDLE_SHAPE = "ar_" + "0" * 16


def summary_frame(run: RunContext, span: list[Message]) -> int:
    """Tokens the default finalizer writes around a summary of ``span``: its opening and
    closing lines, the handles of the archive entries it covers (a rolling summary names
    them up to ``finalize.archive_refs_max``, so the frame grows by one handle a compaction
    until then; twenty took a few hundred tokens, which a fixed allowance missed and a
    compaction then freed less than it expected) and the acknowledgement."""
    policy = run.policy
    previous = [m for m in span if m.provenance is Provenance.SUMMARY]
    refs = covered_entries(previous, _HANDLE_SHAPE)
    settings = policy.summarizer
    probe = FinalizeInput(head=[], evicted=span, pinned=[], tail=[], summary="",
                          model=settings.model or EXTRACTIVE_MODEL, extractive=not settings.model,
                          archive_ref=_HANDLE_SHAPE, number=len(refs), policy=policy, counter=run.counter,
                          window=run.window, covered_refs=refs)
    frame = run.counter.count(Message({"role": "user", "content": summary_text(probe)}, "frame",
                                      Provenance.SUMMARY)).total
    fin = policy.finalize
    if fin.injection == "user" and fin.acknowledgement:
        ack = texts(fin.language)["acknowledgement"]
        frame += run.counter.count(Message({"role": "assistant", "content": ack}, "ack",
                                           Provenance.ACKNOWLEDGEMENT)).total
    return frame


# -- summary -----------------------------------------------------------------------------------------

#: Tokens a word of a model's summary is counted at (prose): the word budget's cap and the
#: landing estimate of a model-written summary use this rate.
TOKENS_PER_WORD = 1.35
#: Tokens a word of the offline extractive summary may take. Its words are paths, code names,
#: commands and outcome lines: on the dev corpus about two tokens a word (1.5 to 2.7 at an 8k
#: window). A summary whose words run longer (a list of names such as helper_12_3, hex ids)
#: is written again in fewer words until it fits its word budget at this rate, and the landing
#: estimate counts an offline summary at it. 2.5 leaves the usual summaries as written: at
#: 2.0 the default's recall at an 8k window fell from 95.0% to 92.8%, at 1.35 to 88.3%.
EXTRACTIVE_TOKENS_PER_WORD = 2.5
#: The offline summary is never cut below this many words to meet its token budget.
MIN_SUMMARY_WORDS = 40

#: A summary's word budget never asks for more than this share of the usable window (in a
#: model's prose, ``TOKENS_PER_WORD``; an offline summary of the same words may take up to
#: ``EXTRACTIVE_TOKENS_PER_WORD``, about 28% of the window). 15%: at an 8k window the default
#: then recalls more of what the agent used next on the dev corpus (94.6% against 93.2% at
#: 10%). The extractive summary cuts an outcome line that is one long run of characters
#: (base64, a minified line) to its words' worth.
SUMMARY_MAX_SHARE = 0.15


def tokens_per_word(settings: SummarizerPolicy) -> float:
    """The rate a summary's word budget is counted at: the offline summarizer's, else prose."""
    return EXTRACTIVE_TOKENS_PER_WORD if is_extractive(settings.model or EXTRACTIVE_MODEL) else TOKENS_PER_WORD


def summarizer_settings(policy: Policy, window: int, messages: Sequence[Message] = ()) -> SummarizerPolicy:
    """The summarizer section with the word budget capped at ``SUMMARY_MAX_SHARE`` of the usable
    window (at ``TOKENS_PER_WORD``), so a summary never refills a small window by itself, and
    with the agent's own model filled in when ``use_agent_model`` asks for it."""
    settings = policy.summarizer
    update: dict[str, Any] = {}
    cap = max(50, int(SUMMARY_MAX_SHARE * usable_window(window, policy.reserved_output_tokens) / TOKENS_PER_WORD))
    if settings.max_summary_words == 0 or settings.max_summary_words > cap:
        update["max_summary_words"] = cap
    if settings.use_agent_model and not settings.model:
        model = agent_model(policy, messages)
        if model:
            update["model"] = model
    return settings.model_copy(update=update) if update else settings


def agent_model(policy: Policy, messages: Sequence[Message]) -> str | None:
    """The agent's own model: the policy's ``model``, else the ``model`` string recorded on
    the latest assistant message (agents that log the provider's response keep it there)."""
    if policy.model:
        return policy.model
    for m in reversed(messages):
        if m.role == "assistant":
            recorded = m.raw.get("model")
            if isinstance(recorded, str) and recorded.strip():
                return recorded.strip()
    return None


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
    settings = summarizer_settings(policy, run.window, reduced.messages)
    kept = kept_after_summary(run, reduced, plan, span)
    try:
        result = summarize(span, settings, previous_summary=previous_summary,
                           counter=run.counter, fallback_window=policy.fallback_context_window,
                           replaced_tokens=replaced_tokens, on_event=run.emit, language=policy.finalize.language,
                           kept_verbatim=kept or (), **kwargs)
    except SummaryError as exc:
        if exc.attempts and all((a.error or "").startswith("summary is not smaller") for a in exc.attempts):
            # Not a fault: the span is already as small as a summary of it would be.
            return SummaryDeclined(f"a summary would not be smaller than the {replaced_tokens} tokens it "
                                   f"replaces ({len(span)} messages); kept them verbatim")
        if policy.summarizer.on_failure == "keep":
            return summary_failed(run, exc, len(span))
        raise
    # The offline summary can be written again from the same request, at no model call
    again = result.extractive and result.request_mode == "standalone" and kwargs.get("input_builder") is None
    used = kept or ()
    if again and kept is not None:
        # A summary that quotes a recent request whole leaves room for an older message,
        # the task among them: then the offline summary points to it too (same input, same text).
        final = kept_after_summary(run, reduced, plan, span, result.text)
        if final is not None and task_kept(span, final) and not task_kept(span, kept):
            used = final
            result.text = extractive_again(result.prompt_messages, final, settings.max_summary_words,
                                           policy.finalize.language)
    if again:
        hold_to_token_budget(run, plan, result, used, summary_limit(run, reduced, plan, settings.max_summary_words))
    text = run.hooks.apply_post_summary(result.text, run.emit)
    return SummaryStep(plan, span, previous, replaced_tokens, result, text)


def hold_to_token_budget(run: RunContext, plan: CutPlan, result: SummaryResult, kept: tuple[str, ...],
                         limit: int) -> None:
    """Hold an offline summary to ``limit`` tokens (:func:`summary_limit`: its word budget at
    ``EXTRACTIVE_TOKENS_PER_WORD``, the rate the landing estimate counts it at, or less when
    guarding an overflow): a name such as ``helper_12_3`` or a hex id is one word and several
    tokens, and a summary made of them outgrew the window's share many times over (a 500-word
    budget, 3,700 tokens, in a 4,500-token window), so the summary and the latest round no
    longer fitted. Written again from the same request with fewer words, so the text stays
    what the extractive summarizer answers for that budget. Short of an overflow, a summary
    and latest round that do not fit the landing target land above it: holding the summary to
    what the target leaves (down to the word budget at ``TOKENS_PER_WORD``) took the default's
    recall at an 8k window from 95.0% to 90.2% on the dev corpus."""
    size = first = run.counter.count_text(result.text)
    budget = count_words(result.text)
    for _ in range(4):  # each pass scales the words written by the tokens still over; two nearly always do
        if size <= limit or budget <= MIN_SUMMARY_WORDS:
            break
        # from the words it wrote, which can be fewer than its budget (a short span)
        budget = max(MIN_SUMMARY_WORDS, min(budget - 1, int(count_words(result.text) * limit / size)))
        result.text = extractive_again(result.prompt_messages, kept, budget, run.policy.finalize.language)
        size = run.counter.count_text(result.text)
    if size < first:
        plan.notes.append(f"the offline summary took {first:,} tokens, over its limit of {limit:,} (long words, or "
                          f"the room an overflow leaves); written again in {budget:,} words ({size:,} tokens)")


def kept_after_summary(run: RunContext, reduced: ReductionStep, plan: CutPlan, span: list[Message],
                       summary: str = "") -> tuple[str, ...] | None:
    """The user messages of ``span`` the default finalizer will re-insert word for word after
    ``summary`` (their beginning, when one is too long to keep whole), so the summary can
    point to them instead of repeating them. Before the summary exists (``summary=""``) this
    is a subset of the final choice: a summary only drops a message it quotes whole, which
    leaves room for older ones. None with a custom finalizer (its choice is unknown)."""
    if run.hooks.own.finalizer is not None:
        return None
    if not run.policy.finalize.preserve_user_messages:
        return ()
    working = reduced.messages
    probe = FinalizeInput(head=[working[i] for i in plan.head], evicted=span, pinned=[working[i] for i in plan.pinned],
                          tail=working[plan.tail_start:], summary=summary, model="", extractive=False, archive_ref=None,
                          number=0, policy=run.policy, counter=run.counter, window=run.window,
                          user_filter=user_message_filter(run, working))
    language = run.policy.finalize.language
    return tuple(plain_text(m, language) for m in preserved_user_messages(probe))


def summary_failed(run: RunContext, exc: SummaryError, evicted: int) -> SummaryDeclined:
    """``on_failure = "keep"``: report the failure and go on with the messages as they are."""
    reason = f"the summary failed ({exc}); kept all {evicted} messages verbatim (summarizer.on_failure=keep)"
    log.warning("compaction %s: %s", run.session_id, reason)
    run.emit({"type": "summary_failed", "error": str(exc), "attempts": len(exc.attempts),
              "models": sorted({a.model for a in exc.attempts if getattr(a, "model", None)}), "evicted": evicted})
    return SummaryDeclined(reason)


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
    retention_of: Callable[[], dict[str, Any] | None]  # scored when first asked (Outcome.retention)

    @property
    def compression(self) -> float | None:
        if not self.summary_tokens:
            return None
        return round(self.summary.replaced_tokens / self.summary_tokens, 3)

    def cut(self) -> dict[str, Any]:
        plan = self.summary.plan
        return {"evicted": len(self.summary.span), "pinned": len(plan.pinned), "tail_start": plan.tail_start,
                "target": plan.target, "boundary": plan.boundary, "notes": plan.notes}


def user_message_filter(run: RunContext, context: list[Message]) -> Callable[[Message], bool] | None:
    """The policy's user message filters as one test. A filter that raises is reported and
    skipped (the message stays eligible), unless hooks must abort the run."""
    filters = run.hooks.user_message_filters()
    if not filters:
        return None
    raws = [m.raw for m in context]

    def accept(message: Message) -> bool:
        for f in filters:
            try:
                if not f(message.raw, raws):
                    return False
            except Exception as exc:  # noqa: BLE001 - hooks are user code
                if run.hooks.abort_on_error:
                    raise CompactionError(f"user_message_filter hook failed: {exc}") from exc
                run.emit({"type": "hook_error", "hook": "user_message_filter", "error": repr(exc)})
        return True
    return accept


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
    originals = [m for m in summary.span if m.is_original]
    archive_ref = run.entry_ids.new("evicted", [item_for(m) for m in originals],
                                    salt=" ".join(m.id for m in summary.span))
    number = 1 + max((m.meta.get("number", 0) for m in working if m.provenance is Provenance.SUMMARY), default=0)
    covered = covered_entries(summary.previous, archive_ref)
    inp = FinalizeInput(head=[working[i] for i in plan.head], evicted=summary.span,
                        pinned=[working[i] for i in plan.pinned], tail=working[plan.tail_start:],
                        summary=text, model=result.model, extractive=result.extractive,
                        archive_ref=archive_ref, number=number, policy=run.policy, counter=run.counter,
                        window=run.window, user_filter=user_message_filter(run, working), covered_refs=covered)
    new_messages = run_finalizer(inp, run.hooks.own.finalizer)
    horizon = 1 + max((m.ordinal for m in run.messages if m.ordinal is not None), default=-1)
    for m in new_messages:
        if m.provenance is Provenance.SUMMARY:
            m.meta.setdefault("summary", text)
            m.meta.setdefault("model", result.model)
            m.meta.setdefault(USAGE_HORIZON, horizon)
            m.meta.setdefault("archive_refs", list(covered))
    context = render_messages(new_messages)
    try:
        check_tool_pairs(context)
    except SessionValidationError as exc:
        raise CompactionError(f"the finalized context would break a tool call/result pair ({exc}); nothing was changed") from exc

    entries: list[ArchiveEntry] = []
    if summary.previous:
        folded = [item_for(m) for m in summary.previous]
        entries.append(ArchiveEntry(run.entry_ids.new("previous_summary", folded, salt=archive_ref),
                                    run.session_id, "previous_summary", folded, run.run_id,
                                    note="folded into a new summary"))
    entries.append(ArchiveEntry(archive_ref, run.session_id, "evicted", [item_for(m) for m in originals],
                                run.run_id, note=f"summarized by {result.model}"))
    run.emit({"type": "after_summarize", "archive_ref": archive_ref, "messages_after": len(new_messages)})

    preserved_ids = {m.meta.get("source_id") for m in new_messages if m.provenance is Provenance.PRESERVED}
    preserved_ids.update(inp.preserved_sources)
    fates: dict[str, Fate] = {}
    for m in summary.span:
        fates[m.id] = ("preserved" if m.id in preserved_ids else
                       "folded" if m.provenance is Provenance.SUMMARY else "summarized")
    for i in plan.pinned:
        fates[working[i].id] = "pinned"
    summary_tokens = sum(run.counter.count(m).total for m in new_messages if m.provenance is Provenance.SUMMARY)
    return FinalizeStep(summary, new_messages, archive_ref, tuple(entries), fates, len(originals), summary_tokens,
                        partial(retention, [m.raw for m in summary.span], context))


# -- final budget step -----------------------------------------------------------------------------

@dataclass(frozen=True)
class TailorStep:
    result: TailorResult
    entry: ArchiveEntry | None = None    # the dropped originals; None when nothing was dropped
    event: Event | None = None

    @property
    def dropped(self) -> bool:
        return self.entry is not None


def tailor_context(run: RunContext, messages: list[Message], *, guard: bool = False) -> TailorStep:
    """Token tailoring and the history-runs limit on what the other steps produced. With
    ``guard`` (the overflow guard, when the policy has no tailoring of its own) the budget
    is the landing target, so the next call does not overflow again at once."""
    run.step("tailor", messages=len(messages))
    budget = min(run.landing_target, run.usable_window) if guard else None
    tr = tailoring.apply(messages, run.counter, run.policy, run.window, tools_tokens=run.tools_tokens, budget=budget)
    if not tr.dropped:
        return TailorStep(tr)
    originals = [m for m in tr.dropped if m.is_original]
    items = [item_for(m) for m in originals]
    handle = run.entry_ids.new("evicted", items, salt=" ".join(m.id for m in tr.dropped))
    entry = ArchiveEntry(handle, run.session_id, "evicted", items, run.run_id,
                         note="dropped by " + " and ".join(sorted(set(tr.dropped_by.values()))).replace("_", " "))
    event = {"type": "tailor", "at": run.clock(), "archive_ref": entry.id, **tr.to_dict()}
    return TailorStep(tr, entry, event)
