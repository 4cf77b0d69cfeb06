"""Entry points of tool-output reduction, as pure functions.

They compute and return; they never write the archive. The caller (the compactor or a
session) writes ``result.entries`` and installs ``result.messages`` together, after the
step succeeded, so a failure anywhere leaves both the context and the archive as they were.

    on_append(msg, policy=..., counter=..., session_id=..., tool_name=...)
        -> truncation of one arriving tool result
    before_call(messages, policy=..., counter=..., window=..., session_id=..., total_tokens=...)
        -> (with arrival=True: truncation of oversized results never seen on arrival),
           pass 0 (force-clean), passes 1 and 2 when enabled, then threshold clearing
"""
from __future__ import annotations

from typing import Any

from ..archive import EntryIds
from ..messages import Message, tool_name_index
from ..tokens import MessageCounter
from . import notices as N
from .clear import reducible, run_clearing
from .config import RECOVERY_TOOL_NAMES, ReductionPolicy
from .edits import Editor
from .hooks import ReductionHooks, Replacement, ToolDetail
from .marks import mark_of
from .passes import run_force_clean, run_pass1, run_pass2
from .result import (
    EVENT_ABANDONED,
    EVENT_CLEARED,
    EVENT_TRUNCATED,
    EVENT_WARNING,
    ReductionLedgerRow,
    ReductionResult,
)

__all__ = ["on_append", "before_call", "clearing_due", "ReductionResult", "ReductionLedgerRow", "ReductionHooks",
           "Replacement", "ToolDetail", "EVENT_TRUNCATED", "EVENT_CLEARED", "EVENT_WARNING", "EVENT_ABANDONED",
           "list_warnings"]


def _unchanged(messages: list[Message], reason: str, events: list[dict[str, Any]] | None = None) -> ReductionResult:
    return ReductionResult(messages, [], events or [], [], 0, 0, reason)


def on_append(msg: Message, *, policy: ReductionPolicy, counter: MessageCounter, session_id: str,
              tool_name: str | None, hooks: ReductionHooks | dict[str, Any] | None = None) -> ReductionResult:
    """Truncate one arriving tool result when it is over the size limit.

    ``result.messages`` is ``[msg]`` or ``[truncated copy]``; a truncated copy keeps the id,
    ordinal and provenance and carries ``meta["reduction"]`` naming the archive entry (in
    ``result.entries``) that holds the untouched message.
    """
    if not policy.enabled:
        return _unchanged([msg], "reduction is disabled")
    tc = policy.truncation
    if not tc.enabled:
        return _unchanged([msg], "truncation is disabled")
    if msg.role != "tool":
        return _unchanged([msg], "not a tool result")
    mark = mark_of(msg)
    if mark is not None:
        return _unchanged([msg], f"already {mark.kind}")
    if not reducible(msg):
        return _unchanged([msg], "not an original message")
    if tool_name in RECOVERY_TOOL_NAMES or policy.is_kept(tool_name):
        return _unchanged([msg], f"{tool_name} is a kept tool")
    if tool_name in tc.exclude_tools or policy.tool(tool_name).skip_truncation:
        return _unchanged([msg], f"{tool_name} is excluded from truncation")
    names = {msg.tool_call_id: tool_name} if (msg.tool_call_id and tool_name) else {}
    ed = Editor([msg], policy, counter, session_id, ReductionHooks.coerce(hooks), names)
    _truncate_arrived(ed, 0, tool_name)
    if not ed.records:
        return ed.result(abandoned="within the size limits")
    return ed.result()


def _truncate_arrived(ed: Editor, i: int, tool_name: str | None) -> None:
    limit = ed.policy.tool(tool_name).max_chars or ed.policy.truncation.max_chars
    label = N.render("limit_chars", ed.policy.language, n=N.num(limit))
    ed.truncate(i, phase="arrival", budget_chars=limit, limit_label=label,
                reason=f"tool output over the {limit:,}-character limit on arrival")


def run_arrival(ed: Editor) -> None:
    """Truncation on arrival for every tool result of the context that has not been through
    it: a one-shot compaction of messages the engine never saw arrive gets the same size
    limit (and the same per-tool handlers) as an agent loop appending them one by one."""
    tc = ed.policy.truncation
    if not tc.enabled:
        return
    for i, msg in enumerate(ed.messages):
        if msg.role != "tool" or mark_of(msg) is not None or not reducible(msg):
            continue
        name = ed.tool_name(msg)
        if name in RECOVERY_TOOL_NAMES or ed.policy.is_kept(name) or name in tc.exclude_tools:
            continue
        _truncate_arrived(ed, i, name)


def before_call(messages: list[Message], *, policy: ReductionPolicy, counter: MessageCounter, window: int,
                session_id: str, total_tokens: int,
                hooks: ReductionHooks | dict[str, Any] | None = None, arrival: bool = False,
                ids: EntryIds | None = None) -> ReductionResult:
    """Reduce the live context before a model call.

    ``arrival``: the messages never went through truncation on arrival (a one-shot
    compaction of plain dicts), so that runs first, on every tool result.

    ``total_tokens`` is the context's current total (messages, system and tool schemas), as
    the caller keeps it; ``window`` the usable window that fractions refer to. Runs pass 0
    (``force_clean_tools``), passes 1 and 2 when ``passes.enabled``, then threshold clearing
    when ``clearing.enabled`` and the total (minus what the passes reclaimed) is over the
    threshold. Clearing is all-or-nothing under ``clear_at_least_tokens`` in guard mode.
    ``ids`` hands out archive handles (a run passes one that knows the archive's handles).
    """
    hooks = ReductionHooks.coerce(hooks)
    if not policy.enabled:
        return _unchanged(messages, "reduction is disabled")
    names = tool_name_index(messages)
    ed = Editor(messages, policy, counter, session_id, hooks, names, ids)
    ed.events.extend(list_warnings(policy, set(names.values())))
    notes: list[str] = []
    if arrival:
        run_arrival(ed)
    if policy.force_clean_tools:
        run_force_clean(ed)
    if policy.passes.enabled:
        run_pass1(ed)
        run_pass2(ed)
    if policy.clearing.enabled:
        note = run_clearing(ed, total_tokens=total_tokens - ed.gained(), window=window)
        if note:
            notes.append(note)
    if not ed.records:
        return ed.result(abandoned="; ".join(notes) or "nothing to reduce")
    result = ed.result()
    if hooks.post_process is not None:
        replaced = hooks.post_process(result)
        if replaced is not None:
            result = replaced
    return result


def clearing_due(policy: ReductionPolicy, total_tokens: int, window: int | None, *,
                 every_call_passes: bool = True) -> bool:
    """O(1): whether :func:`before_call` has anything to consider before the next model call.

    True when passes or force-clean are configured (they run on every call, as in tRPC) or
    when the context is over the clearing threshold. It may still find nothing to do (all
    old results already cleared, or the clear-at-least guard abandons). With
    ``every_call_passes=False`` only the threshold counts: a service that runs reduction
    inside each compaction run schedules a run for the threshold, not for the passes."""
    if not policy.enabled:
        return False
    if every_call_passes and (policy.passes.enabled or policy.force_clean_tools):
        return True
    cc = policy.clearing
    if not cc.enabled:
        return False
    limits: list[int] = []
    if cc.trigger_tokens is not None:
        limits.append(cc.trigger_tokens)
    if cc.trigger_fraction is not None and window:
        limits.append(int(cc.trigger_fraction * window))
    return bool(limits) and total_tokens > min(limits)


def list_warnings(policy: ReductionPolicy, seen_tools: set[str]) -> list[dict[str, Any]]:
    """Warnings about tool lists: names no call in the context uses (a typo, or a tool not
    called yet), and names in both a keep and a clean list (keep wins)."""
    out: list[dict[str, Any]] = []
    lists = {"keep_tools": [n for n in policy.keep_tools if n not in RECOVERY_TOOL_NAMES],
             "force_clean_tools": policy.force_clean_tools,
             "truncation.exclude_tools": policy.truncation.exclude_tools,
             "clearing.exclude_tools": policy.clearing.exclude_tools,
             "tools": list(policy.tools)}
    for setting, names in lists.items():
        for name in names:
            if name not in seen_tools:
                out.append({"type": EVENT_WARNING, "code": "unknown_tool_name", "tool_name": name, "setting": setting,
                            "message": f"{setting} names {name!r}, but no call in the context uses that tool; "
                                       "the setting has no effect until it does"})
    for name in policy.force_clean_tools:
        if name in policy.keep_tools:
            out.append({"type": EVENT_WARNING, "code": "keep_wins", "tool_name": name, "setting": "force_clean_tools",
                        "message": f"{name!r} is in both keep_tools and force_clean_tools; keep wins"})
    return out
