"""Incremental use from an agent loop: append as messages arrive, check cheaply, compact.

    session = CompactionSession("default", archive=FileArchive("archive"), session_id="run-42")
    for message in agent_messages:
        session.append(message)
        if session.should_compact():          # O(1): reads running totals
            session.compact()
    send(session.context())
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .archive import ArchiveBackend, MemoryArchive, replay
from .compactor import Compactor, Hooks
from .context import LiveContext
from .messages import Message, tool_name_index
from .outcome import Outcome, Skipped
from .policy import Policy
from .reduction.pipeline import clearing_due, on_append
from .tailoring import near_window_line, tailoring_due
from .triggers import LazyTrigger, TriggerState, compile_condition, usable_window


def reduction_due(policy: Policy, total_tokens: int, window: int) -> bool:
    """O(1): whether tool-output reduction has anything to consider before the next call."""
    return clearing_due(policy.reduction, total_tokens, usable_window(window, policy.reserved_output_tokens))


class CompactionSession:
    def __init__(self, policy: Policy | str | dict[str, Any] = "default", *, archive: ArchiveBackend | None = None,
                 session_id: str = "session", tools: list[dict[str, Any]] | None = None, hooks: Hooks | None = None,
                 clock: Callable[[], float] = time.time):
        self.archive = archive if archive is not None else MemoryArchive()
        self.compactor = Compactor(policy, archive=self.archive, session_id=session_id, hooks=hooks, clock=clock)
        self.policy = self.compactor.policy
        self.session_id = session_id
        self.live = LiveContext(self.compactor.counter, tools, session_id)
        self._fast_trigger = compile_condition(self.policy.trigger, self.compactor.window,
                                               self.policy.reserved_output_tokens)
        self.outcomes: list[Outcome] = []
        self._tool_names: dict[str, str] = {}
        self.truncation_events: list[dict[str, Any]] = []
        self.usable_window = usable_window(self.compactor.window, self.policy.reserved_output_tokens)
        self.landing_target, self.min_freed = self.policy.landing_numbers(self.compactor.window)
        self.near_window_at = near_window_line(self.policy, self.compactor.window)
        # Hysteresis: tokens that arrived so far, and the count at which the trigger re-arms
        # (after a compaction, or after one that would have freed too little).
        self.arrived_tokens = 0
        self.rearm_at = 0

    # -- feeding -------------------------------------------------------------------
    def append(self, raw: dict[str, Any], at: float | None = None, *, pinned: bool = False) -> Message:
        """Add one message as it arrives. A tool result over the size limit is truncated at
        once (per-tool ``truncate_handlers`` of the session's hooks decide first); ``pinned``
        keeps the message verbatim through every compaction."""
        msg = self.live.append(raw, at, pinned=pinned)
        if msg.tool_calls:
            self._tool_names.update(tool_name_index([msg]))
        if msg.role == "tool" and self.policy.reduction.enabled:
            msg = self._truncate_on_arrival(msg)
        self.arrived_tokens += self.live.tokens[-1].total
        return msg

    def extend(self, raws: list[dict[str, Any]]) -> None:
        for raw in raws:
            self.append(raw)

    def _truncate_on_arrival(self, msg: Message) -> Message:
        rr = on_append(msg, policy=self.policy.reduction, counter=self.live.counter, session_id=self.session_id,
                       tool_name=self._tool_names.get(msg.tool_call_id or ""),
                       hooks=self.compactor.hooks.reduction or None)
        if rr.abandoned or not rr.entries:
            return msg
        for entry in rr.entries:
            self.archive.write(entry)
        new = rr.messages[-1]
        self.live.replace_last(new)
        self.truncation_events.extend(rr.events)
        return new

    # -- checking ------------------------------------------------------------------
    def trigger_state(self, now: float | None = None) -> TriggerState:
        live = self.live
        return self.compactor.trigger_state(self._measured_total(), len(live.messages), live.since_summary_tokens,
                                            live.since_summary_messages, live.last_message_at, now)

    def should_compact(self, now: float | None = None) -> LazyTrigger:
        """Summary trigger over running totals: a few comparisons, whatever the session
        length. The result is truthy when it fired; ``.reason`` explains it."""
        live = self.live
        numbers = (self._measured_total(), len(live.messages), live.since_summary_tokens,
                   live.since_summary_messages, live.last_message_at)
        fired = self._fast_trigger(*numbers, now)
        return LazyTrigger(fired, self.policy.trigger,
                           numbers + (self.compactor.window, self.policy.reserved_output_tokens, now))

    def _measured_total(self) -> int:
        """What the trigger compares: the running estimate, or with ``count_from_usage`` the
        latest usage report since the last compaction plus the estimate of what followed."""
        if self.policy.count_from_usage:
            reported = self.live.reported_total
            if reported is not None:
                return reported
        return self.live.totals.total

    def reduction_due(self) -> bool:
        """Whether tool-output clearing has work to consider before the next model call."""
        return reduction_due(self.policy, self.live.total_tokens, self.compactor.window)

    # -- compacting ----------------------------------------------------------------
    def compact(self, force: bool = False, run_id: str | None = None,
                on_event: Callable[[dict[str, Any]], None] | None = None,
                progress: Callable[[str, dict[str, Any]], None] | None = None) -> Outcome | Skipped:
        out = self.compactor.compact(self.live.messages, self.live.tools, force=force, run_id=run_id,
                                     on_event=on_event, progress=progress, last_message_at=self.live.last_message_at)
        if isinstance(out, Outcome):
            self.live.replace(out.messages, summarized=out.summarized)
            self.outcomes.append(out)
            self.rearm_at = self.arrived_tokens + self.min_freed
        elif out.wait_tokens:
            self.rearm_at = self.arrived_tokens + out.wait_tokens
        return out

    def before_model_call(self, **kwargs: Any) -> Outcome | Skipped | None:
        """What an agent loop calls before each model call. A context over the usable window is
        always compacted (the overflow guard); otherwise it compacts when anything is due and
        the trigger is armed, i.e. at least ``min_freed`` tokens arrived since the last
        compaction (or since one that would have freed too little)."""
        if self.over_window():
            return self.compact(**kwargs)
        if not self.armed():
            return None
        if self.should_compact().fired or self.reduction_due() or self.tailoring_due() or self.near_window():
            return self.compact(**kwargs)
        return None

    def near_window(self) -> bool:
        """O(1): the context has reached the policy's near-window line (cut.any_boundary_near_window)."""
        return self.near_window_at is not None and self.live.total_tokens >= self.near_window_at

    def over_window(self) -> bool:
        """O(1): the context would not fit the usable window (window minus reserved output)."""
        return self.live.total_tokens > self.usable_window

    def armed(self) -> bool:
        return self.arrived_tokens >= self.rearm_at

    def tailoring_due(self) -> bool:
        return tailoring_due(self.policy, self.live.total_tokens, self.compactor.window)

    # -- reading -------------------------------------------------------------------
    def context(self) -> list[dict[str, Any]]:
        return self.live.render()

    @property
    def total_tokens(self) -> int:
        return self.live.total_tokens

    def replay(self) -> list[dict[str, Any]]:
        return replay(self.archive.entries(self.session_id), self.live.messages)
