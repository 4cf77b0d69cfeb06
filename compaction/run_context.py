"""What one compaction run carries from step to step: the settings, the hooks, the clock,
the input context and its token counts, and the events the run reports.

Every step of :mod:`compaction.steps` takes a :class:`RunContext` instead of a long list of
positional parameters; what a step produces comes back as its own result object.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from .archive import ArchiveBackend, EntryIds, backend_has
from .errors import CompactionError
from .finalize import Finalizer
from .hooks import chain
from .messages import Message, validate_session, wrap_originals
from .policy import Policy
from .reduction.hooks import ReductionHooks
from .tokens import CategoryTotals, MessageCounter, MessageTokens
from .triggers import TriggerState, usable_window

Event = dict[str, Any]
EventSink = Callable[[Event], None]
ProgressSink = Callable[[str, dict[str, Any]], None]
TextHook = Callable[[str], str]
ToolFormatter = Callable[[str, str], str | None]
InputBuilder = Callable[[str | None, str, list[dict[str, Any]]], list[dict[str, Any]]]
SingleHookKind = Literal["tool_call_formatter", "tool_result_formatter", "input_builder"]
TextHookKind = Literal["pre_summary", "post_summary"]
UserMessageFilter = Callable[[dict[str, Any], list[dict[str, Any]]], bool]


@dataclass
class Hooks:
    """Python callables that customise a run (policies stay JSON; hooks are code).

    finalizer(inp, default) -> messages; pre_summary(text) -> text (the summarizer's
    transcript); post_summary(text) -> text; input_builder(system, user, span) -> messages;
    tool_call_formatter / tool_result_formatter for the summarizer input;
    reduction: the hooks passed to the reduction step (rewriter, post_process, handlers);
    user_message_filter(message, context) -> bool: False keeps an evicted user message from
    being re-inserted after the summary (replaces the filters the policy names).
    With abort_on_hook_error False (default) a failing hook is logged as an event and ignored.
    A hook set here wins over the name the policy's ``hooks`` section gives for that kind
    (names resolve through :mod:`compaction.hooks`).
    """
    finalizer: Finalizer | None = None
    pre_summary: TextHook | None = None
    post_summary: TextHook | None = None
    abort_on_hook_error: bool = False
    tool_call_formatter: ToolFormatter | None = None
    tool_result_formatter: ToolFormatter | None = None
    reduction: ReductionHooks | dict[str, Any] = field(default_factory=dict)
    input_builder: InputBuilder | None = None
    user_message_filter: UserMessageFilter | None = None


@dataclass(frozen=True)
class HookSet:
    """The hooks a run uses: each kind from :class:`Hooks` when given there, else what the
    policy names (``named``, resolved by :func:`compaction.hooks.resolve`)."""
    own: Hooks
    named: Mapping[str, Any]
    abort_on_error: bool

    def single(self, kind: SingleHookKind) -> Callable[..., Any] | None:
        own: Callable[..., Any] | None = getattr(self.own, kind)
        return own if own is not None else self.named.get(kind)

    def text_hooks(self, kind: TextHookKind) -> list[TextHook]:
        own: TextHook | None = getattr(self.own, kind)
        return [own] if own is not None else list(self.named.get(kind) or [])

    def user_message_filters(self) -> list[UserMessageFilter]:
        own = self.own.user_message_filter
        return [own] if own is not None else list(self.named.get("user_message_filter") or [])

    def summarize_kwargs(self) -> dict[str, Any]:
        """Hook keyword arguments for :func:`compaction.summarizer.summarize`."""
        kwargs: dict[str, Any] = {}
        kinds: tuple[SingleHookKind, ...] = ("tool_call_formatter", "tool_result_formatter", "input_builder")
        for kind in kinds:
            fn = self.single(kind)
            if fn is not None:
                kwargs[kind] = fn
        pre = self.text_hooks("pre_summary")
        if pre:
            kwargs["pre_summary"] = chain(pre)
        if self.abort_on_error:
            kwargs["abort_on_hook_error"] = True
        return kwargs

    def apply_post_summary(self, text: str, emit: EventSink) -> str:
        for hook in self.text_hooks("post_summary"):
            text = self._apply("post_summary", hook, text, emit)
        return text

    def _apply(self, name: str, hook: TextHook, value: str, emit: EventSink) -> str:
        try:
            out = hook(value)
        except Exception as exc:  # noqa: BLE001 - hooks are user code
            if self.abort_on_error:
                raise CompactionError(f"{name} hook failed: {exc}") from exc
            emit({"type": "hook_error", "hook": name, "error": repr(exc)})
            return value
        return out if isinstance(out, str) and out.strip() else value


def as_messages(messages: list[Any]) -> list[Message]:
    """The caller's context as Messages: OpenAI dicts are validated and wrapped as originals."""
    if all(isinstance(m, Message) for m in messages):
        return list(messages)
    if any(isinstance(m, Message) for m in messages):
        raise TypeError("pass either OpenAI dicts or Message objects, not a mix")
    validate_session(messages)
    return wrap_originals(messages)


def totals_of(tokens: list[MessageTokens], tools_tokens: int) -> CategoryTotals:
    t = CategoryTotals()
    for x in tokens:
        t.add(x)
    t.set("tools", tools_tokens)
    return t


def since_last_summary(messages: list[Message], tokens: list[MessageTokens]) -> tuple[int, int]:
    """(tokens, messages) of the originals after the last message a compaction wrote."""
    last = max((i for i, m in enumerate(messages) if m.is_engine_written), default=-1)
    tail = [(m, t) for m, t in zip(messages[last + 1:], tokens[last + 1:]) if m.is_original]
    return sum(t.total for _, t in tail), len(tail)


@dataclass(frozen=True)
class RunContext:
    """One run of :meth:`compaction.Compactor.compact`: its settings, its input, its sinks.

    ``messages``/``tokens``/``before`` describe the context as the caller passed it; steps
    never change them. ``events`` collects what :meth:`emit` reported, in order.
    """
    policy: Policy
    counter: MessageCounter
    window: int
    session_id: str
    archive: ArchiveBackend
    hooks: HookSet
    messages: list[Message]
    tokens: list[MessageTokens]
    tools_tokens: int
    before: CategoryTotals
    run_id: str | None = None
    force: bool = False
    last_message_at: float | None = None
    parent_request: dict[str, Any] | None = None
    on_event: EventSink | None = None
    progress: ProgressSink | None = None
    clock: Callable[[], float] = time.time
    events: list[Event] = field(default_factory=list)
    # The caller passed plain dicts: their tool results never went through truncation on
    # arrival (an agent loop's CompactionSession and the service truncate as messages come).
    unseen_arrivals: bool = False

    @property
    def usable_window(self) -> int:
        return usable_window(self.window, self.policy.reserved_output_tokens)

    @property
    def over_window(self) -> bool:
        """The overflow guard's test: the context as passed would not fit the usable window."""
        return self.before.total > self.usable_window

    @property
    def landing_target(self) -> int:
        return self.policy.landing_numbers(self.window)[0]

    @property
    def min_freed(self) -> int:
        """What a compaction must free to be worth running; 0 when forced or guarding."""
        if self.force or self.over_window:
            return 0
        return self.policy.landing_numbers(self.window)[1]

    @cached_property
    def entry_ids(self) -> EntryIds:
        """Handles for the entries this run writes: derived from their content, unique in the archive."""
        return EntryIds(self.session_id, backend_has(self.archive, self.session_id))

    def emit(self, event: Event) -> None:
        event.setdefault("at", self.clock())
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def step(self, name: str, **detail: Any) -> None:
        if self.progress is not None:
            self.progress(name, detail)

    def trigger_state(self, total: int, n: int, since_tokens: int, since_messages: int) -> TriggerState:
        return TriggerState(total, n, since_tokens, since_messages, self.last_message_at, self.window,
                            self.policy.reserved_output_tokens, None)
