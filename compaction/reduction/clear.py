"""Clearing before a model call: old tool results outside the protected recent activity become
placeholders once the context is over a threshold (Eino clear phase, Anthropic
``clear_tool_uses``, LangChain ``ClearToolUsesEdit``)."""
from __future__ import annotations

from ..messages import Message, Provenance
from .edits import Editor
from .marks import mark_of
from .measure import tokens_many
from .result import EVENT_ABANDONED


def reducible(m: Message) -> bool:
    """Only originals the agent produced are reduced; summaries, re-inserted copies and
    pinned messages are the engine's or the user's choice and stay as they are."""
    return m.provenance is Provenance.ORIGINAL and m.ordinal is not None and not m.meta.get("pinned")


def tool_groups(messages: list[Message]) -> list[tuple[int, list[int]]]:
    """(index of an assistant message with tool calls, indices of its results that follow)."""
    groups = []
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        if m.role == "assistant" and m.tool_calls:
            ids = {c.get("id") for c in m.tool_calls}
            j = i + 1
            results = []
            while j < n and messages[j].role == "tool":
                if messages[j].tool_call_id in ids:
                    results.append(j)
                j += 1
            groups.append((i, results))
            i = j
        else:
            i += 1
    return groups


def call_owners(messages: list[Message]) -> dict[str, int]:
    owners = {}
    for i, m in enumerate(messages):
        for call in m.tool_calls:
            owners[call.get("id", "")] = i
    return owners


def threshold_for(ed: Editor, window: int | None) -> int | None:
    """The lower of the configured thresholds (None when only a fraction is set and the
    window is unknown)."""
    cc = ed.policy.clearing
    limits = []
    if cc.trigger_tokens is not None:
        limits.append(cc.trigger_tokens)
    if cc.trigger_fraction is not None and window:
        limits.append(int(cc.trigger_fraction * window))
    return min(limits) if limits else None


def protected_from(messages: list[Message], keep: int, unit: str) -> int:
    """Index from which the recent activity is protected (len(messages) when nothing is)."""
    if unit == "rounds":
        marks = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls]
    else:
        marks = [i for i, m in enumerate(messages) if m.role == "tool"]
    if keep == 0:
        return len(messages)
    if len(marks) < keep:
        return 0
    return marks[-keep]


def run_clearing(ed: Editor, *, total_tokens: int, window: int) -> str | None:
    """Clear old results; returns why nothing was cleared (None when something was)."""
    policy = ed.policy
    cc = policy.clearing
    msgs = ed.messages
    threshold = threshold_for(ed, window)
    if threshold is None:
        return "clearing.trigger_fraction needs the window size, and none was given"
    if total_tokens <= threshold:
        return f"context {total_tokens:,} tokens is not over the clear threshold {threshold:,}"
    limit = protected_from(msgs, cc.keep, cc.keep_unit)
    unit = "round(s)" if cc.keep_unit == "rounds" else "tool use(s)"
    skip = set(policy.keep_tools) | set(cc.exclude_tools)
    candidates: list[int] = []
    for i in range(limit):
        m = msgs[i]
        if m.role != "tool" or not reducible(m):
            continue
        mark = mark_of(m)
        if mark is not None and mark.kind != "truncated":
            continue
        name = ed.tool_name(m)
        if name in skip or policy.tool(name).skip_clearing:
            continue
        candidates.append(i)
    base = len(ed.records)
    cp = ed.checkpoint()
    reason = (f"context {total_tokens:,} tokens over the clear threshold {threshold:,}; "
              f"older than the last {cc.keep} {unit}")

    if ed.hooks.rewrite is not None:
        cand = set(candidates)
        for a, results in tool_groups(msgs[:limit]):
            if not results or not reducible(msgs[a]) or any(k not in cand for k in results):
                continue
            if any(policy.is_kept(c.get("function", {}).get("name")) for c in msgs[a].tool_calls):
                continue
            ed.rewrite_group(a, results, phase="clearing", reason=reason)

    ed.prefill(dict(zip(candidates, tokens_many(ed.counter, [msgs[i] for i in candidates]))))
    owners = call_owners(msgs)
    stop = cc.at_least_mode == "stop" and cc.clear_at_least_tokens > 0
    for i in candidates:
        now = ed.current(i)
        if now is None:
            continue  # replaced by the rewrite hook
        if cc.min_result_tokens and ed.tokens(i, now) <= cc.min_result_tokens:
            continue
        name = ed.tool_name(now)
        override = policy.tool(name).clear_inputs
        inputs = cc.clear_tool_inputs if override is None else override
        ed.clear(i, phase="clearing", reason=reason, owner=owners.get(now.tool_call_id or ""), clear_inputs=inputs)
        if stop and ed.gained(base) >= cc.clear_at_least_tokens:
            break

    gained = ed.gained(base)
    if len(ed.records) == base:
        return f"nothing to clear older than the last {cc.keep} {unit}"
    if cc.at_least_mode == "guard" and cc.clear_at_least_tokens and gained < cc.clear_at_least_tokens:
        ed.rollback(cp)
        why = (f"clear-at-least guard: clearing would reclaim {gained:,} tokens, "
               f"less than the required {cc.clear_at_least_tokens:,}; nothing cleared")
        ed.events.append({"type": EVENT_ABANDONED, "reason": why, "tokens_reclaimable": gained,
                          "clear_at_least_tokens": cc.clear_at_least_tokens})
        return why
    return None
