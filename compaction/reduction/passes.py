"""tRPC-style compaction passes, run before every model call (no threshold).

- pass 0: results of ``force_clean_tools`` in history become placeholders, whatever their size;
- pass 1: historical results over ``historical_max_tokens`` become placeholders;
- pass 2: any result over ``oversized_max_tokens`` (the current request included) is cut to
  head + tail, except the output of the recovery tools, so a loaded slice stays whole.

"History" is everything before the protected recent units: the current request (from the
last user message on) plus ``keep_recent_requests`` completed requests, or the same count of
tool rounds with ``recent_unit="rounds"``; ``skip_recent_messages`` widens it to the units
owning the last N messages.
"""
from __future__ import annotations

from ..messages import Message
from . import notices as N
from .clear import protected_from as clearing_protected_from
from .clear import reducible
from .config import RECOVERY_TOOL_NAMES
from .edits import Editor
from .marks import mark_of
from .measure import tokens_many


def recent_start(messages: list[Message], unit: str, keep_recent: int, skip_recent_messages: int = 0) -> int:
    """Index where the protected recent units begin (0 = everything is recent)."""
    if unit == "requests":
        starts = [i for i, m in enumerate(messages) if m.role == "user"]
    else:
        starts = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls]
    if not starts:
        return 0
    begin = starts[-(keep_recent + 1)] if len(starts) > keep_recent else 0
    if skip_recent_messages:
        edge = max(0, len(messages) - skip_recent_messages)
        owning = max((s for s in starts if s <= edge), default=0)
        begin = min(begin, owning)
    return begin


def history_end(ed: Editor) -> int:
    """Where history ends for pass 0: the passes' recency when passes are on, otherwise the
    clearing's protected window."""
    p = ed.policy
    if p.passes.enabled or not p.clearing.enabled:
        pc = p.passes
        return recent_start(ed.messages, pc.recent_unit, pc.keep_recent_requests, pc.skip_recent_messages)
    return clearing_protected_from(ed.messages, p.clearing.keep, p.clearing.keep_unit)


def _tool_results(ed: Editor, end: int) -> list[int]:
    return [i for i in range(end) if ed.messages[i].role == "tool" and reducible(ed.messages[i])]


def run_force_clean(ed: Editor) -> None:
    p = ed.policy
    wanted = set(p.force_clean_tools) - set(p.keep_tools) - set(p.clearing.exclude_tools)
    if not wanted:
        return
    end = history_end(ed)
    for i in _tool_results(ed, end):
        m = ed.current(i)
        if m is None:
            continue
        name = ed.tool_name(m)
        if name in wanted and not p.tool(name).skip_clearing:
            ed.clear(i, phase="pass0", forced=True,
                     reason=f"{name} is a force-clean tool and this result is outside the protected recent activity")


def run_pass1(ed: Editor) -> None:
    p = ed.policy
    pc = p.passes
    end = recent_start(ed.messages, pc.recent_unit, pc.keep_recent_requests, pc.skip_recent_messages)
    idx = _tool_results(ed, end)
    ed.prefill(dict(zip(idx, tokens_many(ed.counter, [ed.messages[i] for i in idx]))))
    for i in idx:
        m = ed.current(i)
        if m is None:
            continue
        mark = mark_of(m)
        if mark is not None and mark.kind != "truncated":
            continue
        name = ed.tool_name(m)
        if p.is_kept(name) or p.tool(name).skip_clearing:
            continue
        tokens = ed.tokens(i, m)
        if tokens > pc.historical_max_tokens:
            ed.clear(i, phase="pass1",
                     reason=f"historical result of {tokens:,} tokens over the {pc.historical_max_tokens:,}-token pass-1 limit")


def run_pass2(ed: Editor) -> None:
    p = ed.policy
    limit = p.passes.oversized_max_tokens
    if not limit:
        return
    idx = _tool_results(ed, len(ed.messages))
    ed.prefill(dict(zip(idx, tokens_many(ed.counter, [ed.messages[i] for i in idx]))))
    label = N.render("limit_tokens", p.language, n=N.num(limit))
    for i in idx:
        m = ed.current(i)
        if m is None or mark_of(m) is not None:
            continue
        name = ed.tool_name(m)
        if name in RECOVERY_TOOL_NAMES or p.is_kept(name):
            continue
        tokens = ed.tokens(i, m)
        if tokens > limit:
            ed.truncate(i, phase="pass2", max_tokens=limit, limit_label=label,
                        reason=f"result of {tokens:,} tokens over the {limit:,}-token pass-2 limit")
