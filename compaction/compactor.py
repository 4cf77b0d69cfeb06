"""The compaction pipeline: trigger → reduce tool output → cut → summarize → finalize → tailor → archive.

The steps live in :mod:`compaction.steps`; this module runs them in order, builds the
:class:`Outcome` from their results and only then writes the archive. Nothing is written
(archive, caller state) until every step has succeeded; any failure raises and leaves the
caller's messages exactly as they were.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import tailoring
from .archive import ArchiveBackend, ArchiveEntry, MemoryArchive, write_entries
from .context import render_messages
from .cut import NoCut
from .hooks import resolve as resolve_hooks
from .landing import DEFAULT_MIN_FREED_SHARE
from .ledger import build_ledger, drop_reason
from .messages import Message
from .outcome import Outcome, Skipped
from .policy import Policy
from .presets import get_preset
from .run_context import (
    Event,
    EventSink,
    Hooks,
    HookSet,
    ProgressSink,
    RunContext,
    as_messages,
    since_last_summary,
    totals_of,
)
from .steps import (
    FinalizeStep,
    ReductionStep,
    SummaryDeclined,
    TailorStep,
    TooLittleFreed,
    check_trigger,
    finalize_context,
    measured_total,
    plan_eviction,
    reduce_tool_output,
    summarize_span,
    tailor_context,
)
from .tokens import MessageCounter, make_counter
from .triggers import ConditionResult, TriggerState, evaluate
from .windows import resolve_window

__all__ = ["Compactor", "Hooks", "SUMMARY_AVOIDED", "as_messages", "counter_for", "since_last_summary", "totals_of"]

SUMMARY_AVOIDED = "tool-output reduction brought the context down to the landing target; no summary needed"


_SHARED_COUNTERS: dict[tuple[str, str], MessageCounter] = {}


def counter_for(policy: Policy) -> MessageCounter:
    """The process-wide message counter for this policy's tokenizer: its cache is shared by
    every compactor, session and simulation using the same encoding."""
    base = make_counter(policy.counter, model=policy.model, encoding=policy.encoding,
                        chars_per_token=policy.chars_per_token)
    key = (policy.counter, base.name)
    counter = _SHARED_COUNTERS.get(key)
    if counter is None:
        counter = _SHARED_COUNTERS.setdefault(key, MessageCounter(base))
    return counter


@dataclass(frozen=True)
class Compaction:
    """What the steps before the final budget step produced; nothing is written yet."""
    trigger: dict[str, Any]
    reduction: ReductionStep
    notes: tuple[str, ...]
    events: list[Event] = field(default_factory=list)
    finalized: FinalizeStep | None = None

    @property
    def messages(self) -> list[Message]:
        return self.finalized.messages if self.finalized is not None else self.reduction.messages

    @property
    def entries(self) -> tuple[ArchiveEntry, ...]:
        return self.reduction.entries + (self.finalized.entries if self.finalized is not None else ())


def run_steps(run: RunContext) -> Compaction | Skipped:
    """Trigger, reduction, cut, summary and finalize, stopping at the first that says no."""
    policy = run.policy
    trig = check_trigger(run)
    reduced = reduce_tool_output(run)

    def reduction_only(note: str, trigger: dict[str, Any] = trig.trigger, wait: int = 0) -> Compaction | Skipped:
        if not reduced.reduced:
            return Skipped(note, trigger, wait_tokens=wait)
        return Compaction(trigger, reduced, (note,), list(run.events))

    if trig.condition is not None and not trig.condition.fired:
        freed = run.before.total - (sum(t.total for t in reduced.tokens) + run.tools_tokens)
        # Truncating outputs that never went through arrival (a one-shot call on plain dicts)
        # is what a session does at append time, so the minimum does not hold it back.
        arrival = run.unseen_arrivals and reduced.tokens_truncated > 0
        # A summarizing policy without a minimum of its own (a seed) gets the 10% one here:
        # its reduction thresholds are not its trigger, so this does not change when it fires.
        floor = _hysteresis(run) if policy.summarize else run.min_freed
        if reduced.reduced and freed < floor and not arrival:
            # Rewriting the prefix for a few tokens breaks the provider's prompt cache for little gain.
            return Skipped(f"tool-output reduction would free {freed:,} tokens, less than the minimum of "
                           f"{floor:,} (landing.min_freed); waiting for that many new tokens",
                           trig.trigger, wait_tokens=floor)
        if reduced.reduced:
            return reduction_only(trig.condition.reason,
                                  {"kind": "reduction", "fired": True, "reason": "tool-output reduction threshold"})
        return reduction_only(trig.condition.reason)
    # Hysteresis: reduction alone answers a fired trigger only when it lands at the landing
    # target, well below the trigger. Freeing just enough to slip under the trigger would
    # have it fire again a few calls later, a prompt-cache break each time (and guarding an
    # overflow, stopping just under the window would overflow again), so the summary runs too.
    if reduced.reduced and not run.force and _landed(run, reduced):
        return reduction_only(SUMMARY_AVOIDED)
    if not policy.summarize:
        return reduction_only("summarization is off in this policy")
    def without_summary(note: str, wait: int = 0) -> Compaction | Skipped:
        # The summary cannot run: a reduction too small to count on its own waits too, rather
        # than rewrite the prefix (a prompt-cache break) for a few tokens.
        if reduced.reduced and not run.force and not run.over_window and _freed(run, reduced) < _hysteresis(run):
            return Skipped(f"{note}; tool-output reduction alone would free only {max(_freed(run, reduced), 0):,} "
                           f"tokens, less than {_hysteresis(run):,}, so nothing changes now", trig.trigger,
                           wait_tokens=wait)
        return reduction_only(note, wait=wait)

    plan = plan_eviction(run, reduced)
    if isinstance(plan, NoCut):
        return without_summary(plan.reason)
    if isinstance(plan, TooLittleFreed):
        return without_summary(plan.reason, wait=plan.wait_tokens)
    summary = summarize_span(run, reduced, plan)
    if isinstance(summary, SummaryDeclined):
        return without_summary(summary.reason)
    finalized = finalize_context(run, reduced, summary)
    return Compaction(trig.trigger, reduced, tuple(plan.notes), list(run.events), finalized)


def _freed(run: RunContext, step: ReductionStep) -> int:
    return run.before.total - (sum(t.total for t in step.tokens) + run.tools_tokens)


def _hysteresis(run: RunContext) -> int:
    """What a reduction must free to stand in for the summary a trigger asked for: the
    policy's minimum, or 10% of the usable window for policies that set none (the seeds)."""
    return run.min_freed or int(DEFAULT_MIN_FREED_SHARE * run.usable_window)


def _landed(run: RunContext, step: ReductionStep) -> bool:
    return sum(t.total for t in step.tokens) + run.tools_tokens <= run.landing_target


def _still_over(run: RunContext, messages: list[Message]) -> bool:
    return sum(t.total for t in run.counter.count_many(messages)) + run.tools_tokens > run.usable_window


def build_outcome(run: RunContext, done: Compaction, tail: TailorStep | None) -> Outcome:
    """The one place an Outcome is made: from the step results, after every step ran."""
    dropped = tail if tail is not None and tail.dropped else None
    messages = dropped.result.messages if dropped is not None else done.messages
    after_tokens = run.counter.count_many(messages)
    entries = list(done.entries) + ([dropped.entry] if dropped is not None and dropped.entry is not None else [])
    events = done.events + ([dropped.event] if dropped is not None and dropped.event is not None else [])
    notes = list(done.notes)
    if tail is not None and (tail.dropped or tail.result.over_budget):
        notes.extend(tail.result.notes)
    drops = ({mid: drop_reason(cause, run.policy.history_runs) for mid, cause in dropped.result.dropped_by.items()}
             if dropped is not None else {})
    fin = done.finalized
    red = done.reduction
    rows = build_ledger(run.messages, run.tokens, {m.id: t.total for m, t in zip(messages, after_tokens)},
                        fates=fin.fates if fin is not None else {}, reduced=red.rows, dropped=drops)
    summary = fin.summary if fin is not None else None
    result = summary.result if summary is not None else None
    context = render_messages(messages)
    # Both counts are of the messages sent (the rendered context a client reads back), not of
    # the engine's: a summary's re-inserted user messages travel inside its turn.
    return Outcome(
        messages=list(messages), context=context,
        tokens_before=run.before.as_dict(), tokens_after=totals_of(after_tokens, run.tools_tokens).as_dict(),
        messages_before=len(render_messages(run.messages)), messages_after=len(context),
        archive_refs=[e.id for e in entries], ledger_rows=rows, events=events, trigger=done.trigger,
        tokens_cleared=red.tokens_cleared, tokens_truncated=red.tokens_truncated, reduction_events=red.edits,
        notes=notes,
        summarized=fin is not None,
        summary=summary.text if summary is not None else None,
        model=result.model if result is not None else None,
        extractive=result.extractive if result is not None else False,
        prompt=result.prompt_messages if result is not None else [],
        attempts=[a.to_dict() for a in result.attempts] if result is not None else [],
        clipped=list(result.clipped or []) if result is not None else [],
        evicted_messages=fin.evicted_originals if fin is not None else 0,
        summary_tokens=fin.summary_tokens if fin is not None else 0,
        compression=fin.compression if fin is not None else None,
        cut=fin.cut() if fin is not None else None,
        retention_of=fin.retention_of if fin is not None else None,
    )


class Compactor:
    def __init__(self, policy: Policy | str | dict[str, Any] = "default", *, archive: ArchiveBackend | None = None,
                 session_id: str = "session", hooks: Hooks | None = None, counter: MessageCounter | None = None,
                 clock: Callable[[], float] = time.time):
        """``clock`` stamps events and archive entries; a replay passes a logical clock so that
        the same session through the same policy writes the same bytes."""
        if isinstance(policy, str):
            policy = get_preset(policy)
        self.policy = Policy.load(policy)
        self.archive = archive if archive is not None else MemoryArchive()
        self.session_id = session_id
        self.hooks = hooks or Hooks()
        self.clock = clock
        self.counter = counter or counter_for(self.policy)
        self.window, self.window_source = resolve_window(self.policy)
        # hooks named by the policy, resolved through compaction.hooks
        self.policy_hooks = resolve_hooks(self.policy.hooks)
        # the agent's last model request, for cache-safe summaries when
        # compact() is not given one (e.g. through CompactionSession)
        self.parent_request: dict[str, Any] | None = None

    # -- trigger -------------------------------------------------------------------
    def trigger_state(self, total: int, n: int, since_tokens: int, since_messages: int,
                      last_message_at: float | None, now: float | None = None) -> TriggerState:
        return TriggerState(total, n, since_tokens, since_messages, last_message_at, self.window,
                            self.policy.reserved_output_tokens, now)

    def check(self, messages: list[Any], tools: list[dict[str, Any]] | None = None,
              last_message_at: float | None = None) -> ConditionResult:
        msgs = as_messages(messages)
        tokens = self.counter.count_many(msgs)
        totals = totals_of(tokens, self.counter.count_tools(tools))
        st, sm = since_last_summary(msgs, tokens)
        total = measured_total(self.policy, msgs, tokens, totals.total)
        return evaluate(self.policy.trigger, self.trigger_state(total, len(msgs), st, sm, last_message_at))

    # -- compaction ----------------------------------------------------------------
    def compact(self, messages: list[Any], tools: list[dict[str, Any]] | None = None, force: bool = False,
                run_id: str | None = None, on_event: EventSink | None = None, progress: ProgressSink | None = None,
                last_message_at: float | None = None, parent_request: dict[str, Any] | None = None) -> Outcome | Skipped:
        """Compact ``messages``. ``parent_request`` (``{"messages", "tools"}`` of the agent's last
        model request, else ``self.parent_request``) enables cache-safe summary requests when the
        policy's ``summarizer.cache_safe`` is on. With tailoring or a history-runs limit in the
        policy, :mod:`compaction.tailoring` runs last, on whatever the other steps produced."""
        run = self._start(messages, tools, force=force, run_id=run_id, on_event=on_event, progress=progress,
                          last_message_at=last_message_at,
                          parent_request=parent_request if parent_request is not None else self.parent_request)
        done = run_steps(run)
        tail = None
        current = done.messages if isinstance(done, Compaction) else run.messages
        if tailoring.active(self.policy):
            tail = tailor_context(run, current)
        elif run.over_window and _still_over(run, current):
            # The overflow guard's last resort: drop whole oldest rounds until the call fits.
            tail = tailor_context(run, current, guard=True)
        if isinstance(done, Skipped):
            if tail is None or not tail.dropped:
                return done
            # Nothing else to do, but the final budget step dropped old history.
            done = Compaction({"kind": "tailoring", "fired": True, "reason": "; ".join(tail.result.notes)},
                              ReductionStep(run.messages, run.tokens), (done.reason,))
        outcome = build_outcome(run, done, tail)
        # only now, after every step succeeded; all together (one fsync or one transaction)
        entries = list(done.entries)
        if tail is not None and tail.entry is not None:
            entries.append(tail.entry)
        stamp = run.clock()
        for entry in entries:
            entry.created_at = stamp
        write_entries(self.archive, entries)
        if tail is not None and tail.entry is not None and tail.event is not None and on_event is not None:
            on_event(tail.event)
        return outcome

    def _start(self, messages: list[Any], tools: list[dict[str, Any]] | None, *, force: bool, run_id: str | None,
               on_event: EventSink | None, progress: ProgressSink | None, last_message_at: float | None,
               parent_request: dict[str, Any] | None) -> RunContext:
        msgs = as_messages(messages)
        tokens = self.counter.count_many(msgs)
        tools_tokens = self.counter.count_tools(tools)
        return RunContext(policy=self.policy, counter=self.counter, window=self.window, session_id=self.session_id,
                          archive=self.archive, hooks=self.hook_set(), messages=msgs, tokens=tokens,
                          tools_tokens=tools_tokens, before=totals_of(tokens, tools_tokens), run_id=run_id,
                          force=force, last_message_at=last_message_at, parent_request=parent_request,
                          on_event=on_event, progress=progress, clock=self.clock,
                          unseen_arrivals=bool(messages) and not isinstance(messages[0], Message))

    # -- summarizer settings and hooks --------------------------------------------------
    @property
    def abort_on_hook_error(self) -> bool:
        return self.hooks.abort_on_hook_error or self.policy.hooks.abort_on_error

    def hook_set(self) -> HookSet:
        """The hooks a run uses: those given in code win over the names the policy gives."""
        return HookSet(self.hooks, self.policy_hooks, self.abort_on_hook_error)

    def summarize_kwargs(self) -> dict[str, Any]:
        """Hook keyword arguments for :func:`compaction.summarizer.summarize`."""
        return self.hook_set().summarize_kwargs()

    def apply_post_summary(self, text: str, emit: EventSink) -> str:
        return self.hook_set().apply_post_summary(text, emit)
