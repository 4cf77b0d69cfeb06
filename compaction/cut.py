"""Choosing where to cut: which messages a summary replaces and which stay verbatim.

Rules, in order:
1. Leading system/developer messages form the head and are never evicted; a system
   message later in the session is treated as pinned. The engine's own summary is never
   pinned, whatever role it was injected with: the next summary folds it in, so a branch
   has exactly one live summary.
2. The kept tail is bounded by ``keep_messages`` and by ``keep_fraction`` of the window
   in tokens; the bound that keeps fewer messages wins.
3. A cut may never fall inside a tool group (an assistant message with tool calls and
   every result of those calls, parallel calls included). A group whose calls are not
   all answered yet (the agent's latest turn) extends to the end of the session.
4. From the target, search (forward = keep fewer, or backward = keep more) for a safe
   boundary where the tail starts at a user turn; with ``user_turn="prefer"`` fall back
   to any safe boundary when no user turn is in reach (single-task coding runs); with
   ``user_turn="require"`` a forward search that finds no user turn ahead snaps back to the
   latest one, keeping the whole last turn, so only a run with a single user turn cannot
   be cut.
5. Pinned messages (and their whole tool group) stay, in order, after the summary.
6. With ``keep_from`` (the start of the latest round, see :func:`latest_round_start`) the
   tail starts at or before it whatever the bounds say: a compaction that summarized the
   request the model is about to answer, or the results it is about to read, would leave it
   a summary of them instead (the run's ``cut.keep_latest_round``).
If no boundary evicts at least one original message, there is no cut, and the plan says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Message, Provenance
from .policy import CutPolicy
from .tokens import MessageTokens

#: Note of a plan whose tail bounds keep no message (read by the landing step, which names
#: its own reason when it is the one that tightened the bounds).
NO_TAIL_NOTE = ("the kept-tail bounds allow no message (cut.keep_messages, or cut.keep_fraction of the window "
                "in tokens; the smaller wins)")
#: Note of a plan whose tail bounds would have cut into the latest round (rule 6).
LATEST_ROUND_NOTE = ("the kept-tail bounds allow less than the latest round; it stays verbatim "
                     "(cut.keep_latest_round)")


@dataclass
class CutPlan:
    head: list[int]
    evicted: list[int]
    pinned: list[int]
    tail_start: int
    target: int
    boundary: str            # "user_turn" | "safe" (fallback) | "end"
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (f"evict {len(self.evicted)} message(s), keep tail from index {self.tail_start} "
                f"(target {self.target}, boundary {self.boundary})")


@dataclass
class NoCut:
    reason: str

    def __bool__(self) -> bool:
        return False


def tool_groups(messages: list[Message]) -> list[tuple[int, int]]:
    """(start, end) index pairs of tool groups; end == len(messages) when a call is unanswered."""
    n = len(messages)
    owner: dict[str, int] = {}
    ends: dict[int, int] = {}
    pending: dict[int, int] = {}
    for i, m in enumerate(messages):
        calls = m.tool_calls
        if m.role == "assistant" and calls:
            ends[i] = i
            pending[i] = len(calls)
            for c in calls:
                owner[c.get("id", "")] = i
        elif m.role == "tool":
            a = owner.get(m.tool_call_id or "")
            if a is not None:
                ends[a] = max(ends[a], i)
                pending[a] -= 1
    return [(a, (n if pending[a] > 0 else e)) for a, e in sorted(ends.items())]


def unsafe_boundaries(messages: list[Message]) -> list[bool]:
    """unsafe[i] is True when the tail may not start at index i (0..n inclusive)."""
    n = len(messages)
    diff = [0] * (n + 2)
    for start, end in tool_groups(messages):
        diff[start + 1] += 1
        diff[min(end, n) + 1] -= 1
    out, running = [], 0
    for i in range(n + 1):
        running += diff[i]
        out.append(running > 0)
    # A tool result whose call is not in the context (should not happen in valid
    # sessions) must never start the tail either.
    for i, m in enumerate(messages):
        if m.role == "tool":
            out[i] = True
    return out


def latest_round_start(messages: list[Message]) -> int | None:
    """Where the latest round starts: the last user message, or the last assistant message
    together with every result of its calls (the smallest piece a cut can keep, as in
    :mod:`compaction.tailoring`). None when the context has no user or assistant message."""
    unsafe = unsafe_boundaries(messages)
    for i in range(len(messages) - 1, -1, -1):
        if not unsafe[i] and messages[i].role in ("user", "assistant"):
            return i
    return None


def pinned_indices(messages: list[Message], head_end: int, pin_first_user: bool) -> set[int]:
    pinned: set[int] = set()
    first_user_seen = False
    for i, m in enumerate(messages):
        if i < head_end:
            continue
        if m.pinned or (m.role in ("system", "developer") and m.provenance is not Provenance.SUMMARY):
            pinned.add(i)
        if pin_first_user and not first_user_seen and m.role == "user" and m.is_original:
            pinned.add(i)
            first_user_seen = True
        if m.provenance is Provenance.PRESERVED:
            first_user_seen = first_user_seen or pin_first_user
    if not pinned:
        return pinned
    # widen to whole tool groups so a pinned call keeps its results and vice versa
    for start, end in tool_groups(messages):
        last = min(end, len(messages) - 1)
        if any(start <= p <= last for p in pinned):
            pinned.update(range(start, last + 1))
    return pinned


def plan_cut(messages: list[Message], tokens: list[MessageTokens], policy: CutPolicy, window: int,
             pin_first_user: bool = False, keep_from: int | None = None) -> CutPlan | NoCut:
    """The cut under ``policy``'s rules; with ``keep_from`` the tail starts at that index or
    before it (rule 6)."""
    n = len(messages)
    head_end = 0
    while head_end < n and messages[head_end].role in ("system", "developer") and messages[head_end].is_original:
        head_end += 1
    if n - head_end == 0:
        return NoCut("nothing but system messages")

    # 2. tail target from the two ceilings
    budget = policy.keep_fraction * window
    target, used = n, 0
    while target > head_end:
        t = tokens[target - 1].total
        if n - (target - 1) > policy.keep_messages or used + t > budget:
            break
        used += t
        target -= 1
    # 6. the bounds never reach into the latest round
    latest_kept = False
    if keep_from is not None and head_end < keep_from < target:
        target, latest_kept = keep_from, True

    unsafe = unsafe_boundaries(messages)
    pinned = pinned_indices(messages, head_end, pin_first_user)

    def evicts_original(cut: int) -> bool:
        count = sum(1 for i in range(head_end, cut) if i not in pinned and messages[i].is_original)
        return count >= policy.min_evicted_messages

    def is_user_turn(i: int) -> bool:
        return i < n and messages[i].role == "user" and messages[i].provenance in (Provenance.ORIGINAL, Provenance.PINNED)

    start = max(target, head_end + 1)
    backward = list(range(min(start, n), head_end, -1))
    if policy.search == "forward":
        # keep fewer when possible; when every boundary ahead is unsafe (a tool group
        # still waiting for results at the end), keep more rather than break the group
        ahead = list(range(start, n + 1))
        behind = [i for i in backward if i < start]
        # 'require' snaps back to the latest user turn when the last turn is longer than the
        # tail bounds (DeepAgents blocks only runs with a single user turn); 'prefer' falls
        # back to any safe boundary ahead instead, keeping the tail within its bounds
        orders = {True: ahead + behind if policy.user_turn == "require" else ahead, False: ahead + behind}
    else:
        orders = {True: backward, False: backward}

    def find(user_only: bool, bounded: bool = True) -> int | None:
        for i in orders[user_only]:
            if unsafe[i] or (bounded and keep_from is not None and i > keep_from):
                continue
            if user_only and not is_user_turn(i):
                continue
            if not evicts_original(i):
                continue
            return i
        return None

    boundary = "user_turn"
    cut = None
    if policy.user_turn in ("prefer", "require"):
        cut = find(user_only=True)
    if cut is None and policy.user_turn in ("prefer", "ignore"):
        cut = find(user_only=False)
        boundary = "safe" if cut is not None and cut < n else "end"
    if cut is None:
        if keep_from is not None and find(policy.user_turn == "require", bounded=False) is not None:
            return NoCut("nothing before the latest round can be summarized, and the latest round stays verbatim "
                         "(cut.keep_latest_round)")
        if policy.user_turn == "require":
            return NoCut("no user turn can start the kept tail without splitting a tool call from its results "
                         "(policy cut.user_turn=require)")
        return NoCut("no safe cut: every boundary in reach would split a tool call from its results "
                     "or evict nothing but summaries and pinned messages")
    notes = []
    if cut < target and policy.user_turn == "require" and policy.search == "forward" and cut < start:
        notes.append("the last turn is longer than the tail bounds; kept it whole so the tail starts at its user "
                     "message (cut.user_turn=require)")
    elif cut < target:
        notes.append("kept more than the tail bounds allow so that no tool call is separated from its results")
    if latest_kept:
        notes.append(LATEST_ROUND_NOTE)
    elif target == n:
        # Not a missing user turn: the bounds left no tail to start at one (keep_messages 0,
        # or a keep_fraction budget smaller than the latest message, e.g. keep_fraction 0).
        notes.append(NO_TAIL_NOTE + (": nothing after the head stays verbatim" if cut == n else ""))
    elif policy.user_turn == "prefer" and boundary != "user_turn":
        notes.append("no user turn in reach; fell back to the nearest safe boundary")
    evicted = [i for i in range(head_end, cut) if i not in pinned]
    return CutPlan(head=list(range(head_end)), evicted=evicted,
                   pinned=sorted(p for p in pinned if p < cut), tail_start=cut, target=target,
                   boundary=boundary, notes=notes)
