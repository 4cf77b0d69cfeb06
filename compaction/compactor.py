"""The compaction pipeline: trigger → reduce tool output → cut → summarize → finalize → archive.

Nothing is written (archive, caller state) until every step has succeeded; any failure
raises and leaves the caller's messages exactly as they were.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .archive import ArchiveBackend, ArchiveEntry, MemoryArchive, item_for, new_entry_id
from .context import check_tool_pairs, render_messages
from .cut import plan_cut
from .errors import CompactionError, SessionValidationError, SummaryError
from .finalize import FinalizeInput, Finalizer, run_finalizer
from .messages import Message, Provenance, text_of, wrap_originals
from .outcome import Outcome, Skipped
from .policy import Policy
from .tokens import CategoryTotals, MessageCounter, MessageTokens, make_counter
from .triggers import ConditionResult, TriggerState, evaluate, usable_window
from .windows import resolve_window


@dataclass
class Hooks:
    """Python callables that customise a run (policies stay JSON; hooks are code).

    finalizer(inp, default) -> messages; pre_summary(text) -> text (the summarizer's
    transcript); post_summary(text) -> text; input_builder(system, user, span) -> messages;
    tool_call_formatter / tool_result_formatter for the summarizer input;
    reduction: dict of hooks passed to the reduction step (rewriter, post_process).
    With abort_on_hook_error False (default) a failing hook is logged as an event and ignored.
    A hook set here wins over the name the policy's ``hooks`` section gives for that kind
    (names resolve through :mod:`compaction.hooks`).
    """
    finalizer: Finalizer | None = None
    pre_summary: Callable[[str], str] | None = None
    post_summary: Callable[[str], str] | None = None
    abort_on_hook_error: bool = False
    tool_call_formatter: Callable | None = None
    tool_result_formatter: Callable | None = None
    reduction: dict = field(default_factory=dict)
    input_builder: Callable | None = None


SUMMARY_AVOIDED = "tool-output reduction brought the context under the trigger; no summary needed"


_SHARED_COUNTERS: dict[tuple, MessageCounter] = {}


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


def as_messages(messages: list) -> list[Message]:
    if all(isinstance(m, Message) for m in messages):
        return list(messages)
    if any(isinstance(m, Message) for m in messages):
        raise TypeError("pass either OpenAI dicts or Message objects, not a mix")
    from .messages import validate_session  # noqa: PLC0415

    validate_session(messages)
    return wrap_originals(messages)


def totals_of(tokens: list[MessageTokens], tools_tokens: int) -> CategoryTotals:
    t = CategoryTotals()
    for x in tokens:
        t.add(x)
    t.set("tools", tools_tokens)
    return t


def since_last_summary(messages: list[Message], tokens: list[MessageTokens]) -> tuple[int, int]:
    last = max((i for i, m in enumerate(messages) if m.is_engine_written), default=-1)
    tail = [(m, t) for m, t in zip(messages[last + 1:], tokens[last + 1:]) if m.is_original]
    return sum(t.total for _, t in tail), len(tail)


class Compactor:
    def __init__(self, policy: Policy | str | dict = "default", *, archive: ArchiveBackend | None = None,
                 session_id: str = "session", hooks: Hooks | None = None, counter: MessageCounter | None = None):
        if isinstance(policy, str):
            from .presets import get_preset  # noqa: PLC0415

            policy = get_preset(policy)
        self.policy = Policy.load(policy)
        self.archive = archive if archive is not None else MemoryArchive()
        self.session_id = session_id
        self.hooks = hooks or Hooks()
        self.counter = counter or counter_for(self.policy)
        self.window, self.window_source = resolve_window(self.policy)
        # hooks named by the policy, resolved through compaction.hooks
        from .hooks import resolve as resolve_hooks  # noqa: PLC0415

        self.policy_hooks = resolve_hooks(self.policy.hooks)
        # the agent's last model request, for cache-safe summaries when
        # compact() is not given one (e.g. through CompactionSession)
        self.parent_request: dict | None = None

    # -- trigger -------------------------------------------------------------------
    def trigger_state(self, total: int, n: int, since_tokens: int, since_messages: int,
                      last_message_at: float | None, now: float | None = None) -> TriggerState:
        return TriggerState(total, n, since_tokens, since_messages, last_message_at, self.window,
                            self.policy.reserved_output_tokens, now)

    def check(self, messages: list, tools: list | None = None, last_message_at: float | None = None) -> ConditionResult:
        msgs = as_messages(messages)
        tokens = self.counter.count_many(msgs)
        totals = totals_of(tokens, self.counter.count_tools(tools))
        st, sm = since_last_summary(msgs, tokens)
        return evaluate(self.policy.trigger, self.trigger_state(totals.total, len(msgs), st, sm, last_message_at))

    # -- compaction ----------------------------------------------------------------
    def compact(self, messages: list, tools: list | None = None, force: bool = False, run_id: str | None = None,
                on_event: Callable[[dict], None] | None = None,
                progress: Callable[[str, dict], None] | None = None,
                last_message_at: float | None = None, parent_request: dict | None = None) -> Outcome | Skipped:
        """Compact ``messages``. ``parent_request`` (``{"messages", "tools"}`` of the agent's last
        model request, else ``self.parent_request``) enables cache-safe summary requests when the
        policy's ``summarizer.cache_safe`` is on. With tailoring or a history-runs limit in the
        policy, :mod:`compaction.tailoring` runs last, on whatever the other steps produced."""
        parent = parent_request if parent_request is not None else self.parent_request
        result = self._compact(messages, tools, force, run_id, on_event, progress, last_message_at, parent)
        from . import tailoring  # noqa: PLC0415  final budget step

        if not tailoring.active(self.policy):
            return result
        return self._tailor(messages, tools, result, run_id, on_event, progress)

    def _compact(self, messages: list, tools: list | None, force: bool, run_id: str | None,
                 on_event: Callable[[dict], None] | None, progress: Callable[[str, dict], None] | None,
                 last_message_at: float | None, parent_request: dict | None) -> Outcome | Skipped:
        policy = self.policy
        msgs = as_messages(messages)
        tokens = self.counter.count_many(msgs)
        tools_tokens = self.counter.count_tools(tools)
        before = totals_of(tokens, tools_tokens)
        events: list[dict] = []

        def emit(event: dict) -> None:
            event.setdefault("at", time.time())
            events.append(event)
            if on_event is not None:
                on_event(event)

        def step(name: str, **detail: Any) -> None:
            if progress is not None:
                progress(name, detail)

        summary_trigger = None
        if force:
            trig = {"kind": "manual", "fired": True, "reason": "forced"}
        else:
            st, sm = since_last_summary(msgs, tokens)
            summary_trigger = evaluate(policy.trigger, self.trigger_state(before.total, len(msgs), st, sm, last_message_at))
            trig = summary_trigger.to_dict() | {"reason": summary_trigger.reason}

        # Tool-output reduction has thresholds of its own and runs whether or not the
        # summary trigger fired: it is cheap and needs no LLM.
        working, entries, red_ledger = msgs, [], {}
        cleared = truncated = 0
        reduction_events = 0
        if policy.reduction.enabled:
            step("reduce")
            from .reduction.pipeline import before_call  # noqa: PLC0415

            rr = before_call(working, policy=policy.reduction, counter=self.counter,
                             window=usable_window(self.window, policy.reserved_output_tokens),
                             session_id=self.session_id, total_tokens=before.total,
                             **({"hooks": self.hooks.reduction} if self.hooks.reduction else {}))
            for e in rr.events:
                emit(e)
            if not rr.abandoned and (rr.entries or rr.ledger):
                working = rr.messages
                entries.extend(rr.entries)
                cleared, truncated = rr.tokens_cleared, rr.tokens_truncated
                reduction_events = len(rr.ledger)
                red_ledger = {row["message_id"]: row for row in rr.ledger}
                tokens = self.counter.count_many(working)
        reduced = bool(entries) or bool(red_ledger)

        def reduction_only(note: str) -> Outcome | Skipped:
            if not reduced:
                return Skipped(note, trig)
            return self._finish(msgs, working, before, tools_tokens, entries, red_ledger, events, trig,
                                cleared, truncated, reduction_events, notes=[note])

        if summary_trigger is not None and not summary_trigger.fired:
            if reduced:
                trig = {"kind": "reduction", "fired": True, "reason": "tool-output reduction threshold"}
            return reduction_only(summary_trigger.reason)
        if reduced and not force:
            after_total = sum(t.total for t in tokens) + tools_tokens
            st, sm = since_last_summary(working, tokens)
            again = evaluate(policy.trigger, self.trigger_state(after_total, len(working), st, sm, last_message_at))
            if not again.fired:
                return reduction_only(SUMMARY_AVOIDED)
        if not policy.summarize:
            return reduction_only("summarization is off in this policy")

        step("cut")
        plan = plan_cut(working, tokens, policy.cut, self.window, policy.pin_first_user_message)
        if not plan:
            return reduction_only(plan.reason)
        span = [working[i] for i in plan.evicted]
        replaced_tokens = sum(tokens[i].total for i in plan.evicted)
        previous = [m for m in span if m.provenance is Provenance.SUMMARY]
        previous_summary = "\n\n".join(m.meta.get("summary") or text_of(m.raw.get("content")) for m in previous) or None
        emit({"type": "before_summarize", "evicted": len(span), "tokens": replaced_tokens,
              "message_ids": [m.id for m in span]})

        step("summarize", messages=len(span), tokens=replaced_tokens)
        from .summarizer import summarize  # noqa: PLC0415

        kwargs = self.summarize_kwargs()
        if parent_request is not None:
            kwargs["parent_request"] = parent_request
        try:
            result = summarize(span, self._summarizer_settings(), previous_summary=previous_summary,
                               counter=self.counter, fallback_window=policy.fallback_context_window,
                               replaced_tokens=replaced_tokens, on_event=emit, language=policy.finalize.language,
                               **kwargs)
        except SummaryError as exc:
            if exc.attempts and all((a.error or "").startswith("summary is not smaller") for a in exc.attempts):
                # Not a fault: the span is already as small as a summary of it would be.
                return reduction_only(f"a summary would not be smaller than the {replaced_tokens} tokens it "
                                      f"replaces ({len(span)} messages); kept them verbatim")
            raise
        text = self.apply_post_summary(result.text, emit)

        step("finalize")
        archive_ref = new_entry_id()
        number = 1 + max((m.meta.get("number", 0) for m in working if m.provenance is Provenance.SUMMARY), default=0)
        inp = FinalizeInput(head=[working[i] for i in plan.head], evicted=span,
                            pinned=[working[i] for i in plan.pinned], tail=working[plan.tail_start:],
                            summary=text, model=result.model, extractive=result.extractive,
                            archive_ref=archive_ref, number=number, policy=policy, counter=self.counter,
                            window=self.window)
        new_messages = run_finalizer(inp, self.hooks.finalizer)
        for m in new_messages:
            if m.provenance is Provenance.SUMMARY:
                m.meta.setdefault("summary", text)
                m.meta.setdefault("model", result.model)
        try:
            check_tool_pairs(render_messages(new_messages))
        except SessionValidationError as exc:
            raise CompactionError(f"the finalized context would break a tool call/result pair ({exc}); nothing was changed") from exc

        if previous:
            entries.append(ArchiveEntry(new_entry_id(), self.session_id, "previous_summary",
                                        [item_for(m) for m in previous], run_id, note="folded into a new summary"))
        originals = [m for m in span if m.is_original]
        entries.append(ArchiveEntry(archive_ref, self.session_id, "evicted", [item_for(m) for m in originals],
                                    run_id, note=f"summarized by {result.model}"))
        emit({"type": "after_summarize", "archive_ref": archive_ref, "messages_after": len(new_messages)})

        summary_ids = {m.meta.get("source_id") for m in new_messages if m.provenance is Provenance.PRESERVED}
        ledger_fate = {}
        for m in span:
            ledger_fate[m.id] = ("preserved" if m.id in summary_ids else
                                 "folded" if m.provenance is Provenance.SUMMARY else "summarized")
        for i in plan.pinned:
            ledger_fate[working[i].id] = "pinned"

        outcome = self._finish(msgs, new_messages, before, tools_tokens, entries, red_ledger, events, trig,
                               cleared, truncated, reduction_events, fates=ledger_fate)
        outcome.summarized = True
        outcome.summary = text
        outcome.model = result.model
        outcome.extractive = result.extractive
        outcome.prompt = result.prompt_messages
        outcome.attempts = [a.to_dict() for a in result.attempts]
        outcome.evicted_messages = len(originals)
        summary_msgs = [m for m in new_messages if m.provenance is Provenance.SUMMARY]
        outcome.summary_tokens = sum(self.counter.count(m).total for m in summary_msgs)
        outcome.compression = round(replaced_tokens / outcome.summary_tokens, 3) if outcome.summary_tokens else None
        outcome.cut = {"evicted": len(span), "pinned": len(plan.pinned), "tail_start": plan.tail_start,
                       "target": plan.target, "boundary": plan.boundary, "notes": plan.notes}
        outcome.notes.extend(plan.notes)
        outcome.clipped = list(getattr(result, "clipped", []) or [])
        outcome.retention = self._retention(span, outcome.context)
        return outcome

    # -- helpers -------------------------------------------------------------------
    def _summarizer_settings(self):
        """The summarizer section with the word budget capped at ~10% of the usable window
        (about 1.35 tokens a word), so a summary never refills a small window by itself."""
        settings = self.policy.summarizer
        cap = max(50, int(0.10 * usable_window(self.window, self.policy.reserved_output_tokens) / 1.35))
        if settings.max_summary_words == 0 or settings.max_summary_words > cap:
            return settings.model_copy(update={"max_summary_words": cap})
        return settings

    # -- hooks ---------------------------------------------------------
    @property
    def abort_on_hook_error(self) -> bool:
        return self.hooks.abort_on_hook_error or self.policy.hooks.abort_on_error

    def _hook(self, kind: str):
        """The Python hook of ``kind`` if one was given, else what the policy names (pre/post: a list)."""
        own = getattr(self.hooks, kind, None)
        if kind in ("pre_summary", "post_summary"):
            return [own] if own is not None else list(self.policy_hooks.get(kind) or [])
        return own if own is not None else self.policy_hooks.get(kind)

    def summarize_kwargs(self) -> dict:
        """Hook keyword arguments for :func:`compaction.summarizer.summarize`."""
        from .hooks import chain  # noqa: PLC0415

        kwargs: dict[str, Any] = {}
        for kind in ("tool_call_formatter", "tool_result_formatter", "input_builder"):
            fn = self._hook(kind)
            if fn is not None:
                kwargs[kind] = fn
        pre = self._hook("pre_summary")
        if pre:
            kwargs["pre_summary"] = chain(pre)
        if self.abort_on_hook_error:
            kwargs["abort_on_hook_error"] = True
        return kwargs

    def apply_post_summary(self, text: str, emit) -> str:
        for hook in self._hook("post_summary"):
            text = self._apply_hook("post_summary", hook, text, emit)
        return text

    # -- tailoring ------------------------------------------------------
    def _tailor(self, messages: list, tools: list | None, result: Outcome | Skipped, run_id: str | None,
                on_event: Callable[[dict], None] | None, progress: Callable[[str, dict], None] | None):
        """Final budget step on the result of the other steps (see :mod:`compaction.tailoring`)."""
        from . import tailoring  # noqa: PLC0415

        current = result.messages if result else as_messages(messages)
        tools_tokens = self.counter.count_tools(tools)
        if progress is not None:
            progress("tailor", {"messages": len(current)})
        tr = tailoring.apply(current, self.counter, self.policy, self.window, tools_tokens=tools_tokens)
        if not tr.dropped:
            if tr.over_budget and result:
                result.notes.extend(tr.notes)
            return result
        originals = [m for m in tr.dropped if m.is_original]
        entry = ArchiveEntry(new_entry_id(), self.session_id, "evicted", [item_for(m) for m in originals], run_id,
                             note="dropped by " + " and ".join(sorted(set(tr.dropped_by.values()))).replace("_", " "))
        event = {"type": "tailor", "at": time.time(), "archive_ref": entry.id, **tr.to_dict()}
        reasons = {"history_runs": f"older than the last {self.policy.history_runs} run(s) (history-runs limit)",
                   "tailoring": "oldest round over the token budget (token tailoring)"}
        if not result:
            msgs = as_messages(messages)
            before = totals_of(self.counter.count_many(msgs), tools_tokens)
            trigger = {"kind": "tailoring", "fired": True, "reason": "; ".join(tr.notes)}
            out = self._finish(msgs, tr.messages, before, tools_tokens, [entry], {}, [event], trigger, 0, 0, 0,
                               fates={i: "dropped" for i in tr.dropped_by}, notes=[result.reason] + tr.notes)
            for row in out.ledger:
                if row["fate"] == "dropped":
                    row["reason"] = "dropped: " + reasons[tr.dropped_by[row["message_id"]]]
            if on_event is not None:
                on_event(event)
            return out
        # An Outcome: its archive entries are written already; add the tailoring entry and
        # bring the numbers and the ledger up to date.
        self.archive.write(entry)
        result.messages = tr.messages
        result.context = render_messages(tr.messages)
        result.messages_after = len(tr.messages)
        result.tokens_after = totals_of(self.counter.count_many(tr.messages), tools_tokens).as_dict()
        result.archive_refs.append(entry.id)
        result.events.append(event)
        result.notes.extend(tr.notes)
        for row in result.ledger:
            why = tr.dropped_by.get(row["message_id"])
            if why is not None:
                row["fate"], row["tokens_after"] = "dropped", 0
                row["reason"] = "dropped: " + reasons[why]
        if on_event is not None:
            on_event(event)
        return result

    def _apply_hook(self, name: str, hook: Callable | None, value: str, emit) -> str:
        if hook is None:
            return value
        try:
            out = hook(value)
        except Exception as exc:  # noqa: BLE001 - hooks are user code
            if self.abort_on_hook_error:
                raise CompactionError(f"{name} hook failed: {exc}") from exc
            emit({"type": "hook_error", "hook": name, "error": repr(exc)})
            return value
        return out if isinstance(out, str) and out.strip() else value

    def _retention(self, span: list[Message], context: list[dict]) -> dict | None:
        try:
            from .retention import retention  # noqa: PLC0415
        except ImportError:
            return None
        return retention([m.raw for m in span], context)

    def _finish(self, before_msgs, after_msgs, before, tools_tokens, entries, red_ledger, events, trig,
                cleared, truncated, reduction_events, fates=None, notes=None) -> Outcome:
        fates = fates or {}
        after_tokens = self.counter.count_many(after_msgs)
        after = totals_of(after_tokens, tools_tokens)
        for entry in entries:  # only now, after every step succeeded
            self.archive.write(entry)
        after_by_id = {m.id: t.total for m, t in zip(after_msgs, after_tokens)}
        before_tokens = self.counter.count_many(before_msgs)
        ledger = []
        for m, t in zip(before_msgs, before_tokens):
            fate = fates.get(m.id)
            row = red_ledger.get(m.id)
            if fate is None:
                fate = row["fate"] if row else ("kept" if m.id in after_by_id else "summarized")
            reason = {
                "summarized": "in the evicted span; replaced by the summary (original archived)",
                "preserved": "evicted, and re-inserted verbatim as a recent user message",
                "pinned": "pinned: never evicted",
                "folded": "previous summary folded into the new one",
                "kept": "in the kept head or tail",
            }.get(fate, row["reason"] if row else "")
            if row and fate not in ("cleared", "truncated"):
                reason += f"; earlier {row['fate']} ({row['reason']})"
            ledger.append({"message_id": m.id, "ordinal": m.ordinal, "role": m.role, "provenance": m.provenance.value,
                           "fate": fate, "tokens_before": t.total, "tokens_after": after_by_id.get(m.id, 0),
                           "reason": reason})
        return Outcome(messages=list(after_msgs), context=render_messages(after_msgs),
                       tokens_before=before.as_dict(), tokens_after=after.as_dict(),
                       messages_before=len(before_msgs), messages_after=len(after_msgs),
                       archive_refs=[e.id for e in entries], ledger=ledger, events=events, trigger=trig,
                       tokens_cleared=cleared, tokens_truncated=truncated, reduction_events=reduction_events,
                       notes=list(notes or []))
