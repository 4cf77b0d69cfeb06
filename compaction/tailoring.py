"""The last word on size: token tailoring and the history-runs limit.

Both drop whole pieces of the oldest history; neither writes anything into the context.
They run as the final step of :meth:`compaction.Compactor.compact` (after reduction and
any summary), and the messages they drop are archived like evicted ones.

A **run** starts at a user message (one that can start the kept part without separating
a tool call from its results) and lasts until the next one. A **round** is the smallest
piece that can go on its own: a user message, a plain assistant message, or an assistant
message with tool calls together with every result of those calls.

**History runs** (``policy.history_runs = N``, only when summaries are off): keep the last
N runs; everything before the first of them is dropped. 0 means no limit.

**Token tailoring** (``policy.tailoring.enabled``): while the context, tool schemas
included, is larger than the window minus the reserved output, drop

1. whole runs, oldest first, except the latest run (the latest turn);
2. then, inside the latest run, whole rounds, oldest first, except its user message and
   its last round.

Never dropped by either: the leading system/developer messages, system messages anywhere
(including a summary merged into the system message), summaries and their
acknowledgement, pinned messages (and their tool group). If the protected messages alone
are over the budget, tailoring drops what it may and reports that the context is still
over (``TailorResult.over_budget``); it never cuts inside a message.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .context import check_tool_pairs, render_messages
from .cut import pinned_indices, unsafe_boundaries
from .errors import CompactionError, SessionValidationError
from .messages import Message, Provenance
from .policy import Policy
from .tokens import MessageCounter, MessageTokens
from .triggers import usable_window

DEFAULT_RESERVED_OUTPUT = 4096
RUN_START_PROVENANCE = (Provenance.ORIGINAL, Provenance.PINNED, Provenance.PRESERVED)
# Which of the two steps dropped a message.
DropCause = Literal["history_runs", "tailoring"]


@dataclass
class TailorResult:
    messages: list[Message]              # what stays, in order
    dropped: list[Message]               # what went, in order
    budget: int | None                   # token budget of tailoring (None: history runs only)
    tokens_before: int                   # messages + tools, before
    tokens_after: int
    over_budget: bool = False            # still over the budget after dropping everything allowed
    dropped_by: dict[str, DropCause] = field(default_factory=dict)   # message id -> which step dropped it
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.dropped)

    def to_dict(self) -> dict[str, Any]:
        return {"dropped": len(self.dropped), "dropped_ids": [m.id for m in self.dropped],
                "dropped_by": dict(self.dropped_by), "budget": self.budget, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "over_budget": self.over_budget, "notes": list(self.notes)}


# -- settings -------------------------------------------------------------------------------

def tailoring_reserve(policy: Policy) -> int:
    reserve = policy.tailoring.reserved_output_tokens
    if reserve is None:
        return policy.reserved_output_tokens or DEFAULT_RESERVED_OUTPUT
    return reserve


def tailoring_budget(policy: Policy, window: int) -> int:
    """Tokens the whole context (tools included) may use: window minus the output reserve
    (the reserve never takes more than a quarter of the window)."""
    return usable_window(window, tailoring_reserve(policy))


def near_window_line(policy: Policy, window: int) -> int | None:
    """Where a request "nears the window" for ``cut.any_boundary_near_window``: that share of
    the usable window, or of the tailoring budget when tailoring is on and that is tighter
    (tailoring would otherwise drop rounds first, on every call). None when the policy has none."""
    near = policy.cut.any_boundary_near_window
    if near is None:
        return None
    limit = usable_window(window, policy.reserved_output_tokens)
    if policy.tailoring.enabled:
        limit = min(limit, tailoring_budget(policy, window))
    return int(near * limit)


def history_runs_active(policy: Policy) -> bool:
    return policy.history_runs > 0 and not policy.summarize


def active(policy: Policy) -> bool:
    """Whether the final step has anything to do under this policy."""
    return policy.tailoring.enabled or history_runs_active(policy)


def tailoring_due(policy: Policy, total_tokens: int, window: int, runs: int | None = None) -> bool:
    """O(1) check for an agent loop: would the final step drop anything now?
    ``runs`` is the number of runs in the context when known (for the history-runs limit)."""
    if policy.tailoring.enabled and total_tokens > tailoring_budget(policy, window):
        return True
    return history_runs_active(policy) and (runs is None or runs > policy.history_runs)


# -- structure --------------------------------------------------------------------------------

def head_end(messages: list[Message]) -> int:
    n = 0
    while n < len(messages) and messages[n].role in ("system", "developer") and messages[n].is_original:
        n += 1
    return n


def run_starts(messages: list[Message], unsafe: list[bool] | None = None) -> list[int]:
    """Indices where a run starts: user messages at a safe boundary."""
    unsafe = unsafe if unsafe is not None else unsafe_boundaries(messages)
    start = head_end(messages)
    return [i for i in range(start, len(messages))
            if messages[i].role == "user" and messages[i].provenance in RUN_START_PROVENANCE and not unsafe[i]]


def count_runs(messages: list[Message]) -> int:
    return len(run_starts(messages))


def round_starts(messages: list[Message], lo: int, hi: int, unsafe: list[bool]) -> list[int]:
    """Safe boundaries in [lo, hi): where a round may start."""
    return [i for i in range(lo, hi) if not unsafe[i]]


def protected(messages: list[Message], pin_first_user: bool = False) -> set[int]:
    keep = set(range(head_end(messages)))
    keep |= pinned_indices(messages, len(keep), pin_first_user)   # system anywhere, pinned, whole tool groups
    keep |= {i for i, m in enumerate(messages) if m.provenance in (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT)}
    return keep


# -- the two steps ---------------------------------------------------------------------------------

def limit_history_runs(messages: list[Message], max_runs: int, *, pin_first_user: bool = False) -> list[int]:
    """Indices to drop so that only the last ``max_runs`` runs remain (0 = no limit)."""
    if max_runs <= 0:
        return []
    starts = run_starts(messages)
    if len(starts) <= max_runs:
        return []
    cutoff = starts[-max_runs]
    keep = protected(messages, pin_first_user)
    return [i for i in range(head_end(messages), cutoff) if i not in keep]


def tailor_indices(messages: list[Message], tokens: list[MessageTokens], budget: int, *, tools_tokens: int = 0,
                   pin_first_user: bool = False) -> tuple[list[int], bool]:
    """(indices to drop, still over budget) for token tailoring (see the module docstring)."""
    total = sum(t.total for t in tokens) + tools_tokens
    if total <= budget:
        return [], False
    n = len(messages)
    unsafe = unsafe_boundaries(messages)
    keep = protected(messages, pin_first_user)
    start = head_end(messages)
    starts = run_starts(messages, unsafe)
    latest = starts[-1] if starts else start
    dropped: list[int] = []

    def drop(indices: range | list[int]) -> None:
        nonlocal total
        for i in indices:
            if i not in keep:
                dropped.append(i)
                total -= tokens[i].total

    # 1. whole runs (and whatever precedes the first run), oldest first; the latest run stays
    blocks = []
    edges = ([start] if (not starts or starts[0] > start) else []) + starts
    for a, b in zip(edges, edges[1:]):
        blocks.append(range(a, b))
    for block in blocks:
        if total <= budget:
            break
        if block.start >= latest:
            break
        drop(block)

    # 2. rounds inside the latest run, oldest first; its user message and last round stay
    if total > budget:
        first = latest + 1 if starts else latest
        bounds = round_starts(messages, first, n, unsafe)
        rounds = [range(a, b) for a, b in zip(bounds, bounds[1:] + [n])]
        for r in rounds[:-1]:
            if total <= budget:
                break
            drop(r)
    return sorted(dropped), total > budget


def apply(messages: list[Message], counter: MessageCounter, policy: Policy, window: int, *, tools_tokens: int = 0,
          tokens: list[MessageTokens] | None = None, budget: int | None = None) -> TailorResult:
    """Both steps as the policy asks: the history-runs limit, then token tailoring. A given
    ``budget`` (the overflow guard's landing target) replaces the tailoring budget and turns
    token tailoring on."""
    tokens = tokens if tokens is not None else counter.count_many(messages)
    before = sum(t.total for t in tokens) + tools_tokens
    pin_first = policy.pin_first_user_message
    dropped_by: dict[int, DropCause] = {}
    notes: list[str] = []
    if history_runs_active(policy):
        for i in limit_history_runs(messages, policy.history_runs, pin_first_user=pin_first):
            dropped_by[i] = "history_runs"
        if dropped_by:
            notes.append(f"kept the last {policy.history_runs} run(s); dropped {len(dropped_by)} older message(s)")
    kept_idx = [i for i in range(len(messages)) if i not in dropped_by]
    over = False
    why = "the overflow guard's landing target" if budget is not None else "window minus reserved output"
    if policy.tailoring.enabled or budget is not None:
        budget = budget if budget is not None else tailoring_budget(policy, window)
        sub = [messages[i] for i in kept_idx]
        sub_tokens = [tokens[i] for i in kept_idx]
        drop, over = tailor_indices(sub, sub_tokens, budget, tools_tokens=tools_tokens, pin_first_user=pin_first)
        for j in drop:
            dropped_by[kept_idx[j]] = "tailoring"
        if drop:
            notes.append(f"token tailoring dropped {len(drop)} message(s) of the oldest rounds to fit "
                         f"{budget:,} tokens ({why})")
        if over:
            notes.append(f"still over the tailoring budget of {budget:,} tokens: the system message, summary, "
                         f"pinned messages and latest turn alone are larger, and tailoring never drops them")
    kept = [m for i, m in enumerate(messages) if i not in dropped_by]
    gone = [m for i, m in enumerate(messages) if i in dropped_by]
    after = before - sum(tokens[i].total for i in dropped_by)
    if gone:
        try:
            check_tool_pairs(render_messages(kept))
        except SessionValidationError as exc:  # pragma: no cover - the boundaries make this impossible
            raise CompactionError(f"tailoring would separate a tool call from its results ({exc})") from exc
    return TailorResult(kept, gone, budget, before, after, over,
                        {messages[i].id: why for i, why in sorted(dropped_by.items())}, notes)


__all__ = ["TailorResult", "active", "apply", "count_runs", "history_runs_active", "limit_history_runs",
           "protected", "run_starts", "tailor_indices", "tailoring_budget", "tailoring_due", "tailoring_reserve"]
