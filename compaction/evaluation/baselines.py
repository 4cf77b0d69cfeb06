"""Two naive ways to fit a session into a window, replayed beside the policy so its figures
have something to beat.

``sliding_window``      when the context would exceed the usable window, the oldest messages
                        are dropped until it fits in 75% of it (leading system messages stay;
                        a tool result whose call was dropped goes too, so tool pairs stay valid)
``observation_masking`` every message is kept, but tool results older than the newest 10 are
                        replaced by a one-line placeholder; nothing is summarized (it may
                        exceed the window; its over-window calls are counted)

Both keep original messages only, so what they show is known by position: each answers
whether the message at a position is visible at the current call, its context size, and
how much of it the previous call's prompt shares (for the prompt-cache figures).
"""
from __future__ import annotations

from dataclasses import dataclass

#: The sliding window drops the oldest messages down to this share of the usable window.
SLIDING_TARGET = 0.75
#: Observation masking keeps this many of the newest tool results verbatim.
MASKING_KEEP = 10
#: What observation masking leaves in place of an older tool result.
MASK_PLACEHOLDER = "[old tool output omitted]"


@dataclass(frozen=True)
class CallShape:
    """One baseline's context at one model call."""

    tokens: int
    shared: int
    extends: bool


class SlidingWindow:
    name = "sliding_window"

    def __init__(self, usable: int, tools_tokens: int) -> None:
        self.usable = usable
        self.target = int(usable * SLIDING_TARGET)
        self.tools_tokens = tools_tokens
        self.roles: list[str] = []
        self.tokens: list[int] = []
        self.head_end = 0          # leading system messages: positions [0, head_end)
        self.head_tokens = 0
        self.start = 0             # first kept position after the head
        self.tail_tokens = 0
        self._previous = 0

    def append(self, role: str, tokens: int) -> None:
        position = len(self.roles)
        self.roles.append(role)
        self.tokens.append(tokens)
        if position == self.head_end and role in ("system", "developer"):
            self.head_end += 1
            self.start = self.head_end
            self.head_tokens += tokens
        else:
            self.tail_tokens += tokens

    def _total(self) -> int:
        return self.tools_tokens + self.head_tokens + self.tail_tokens

    def call(self) -> CallShape:
        moved = False
        if self._total() > self.usable:
            n = len(self.roles)
            while self.start < n and (self._total() > self.target or self.roles[self.start] == "tool"):
                self.tail_tokens -= self.tokens[self.start]
                self.start += 1
                moved = True
        total = self._total()
        shared = self.tools_tokens + self.head_tokens if moved else self._previous
        self._previous = total
        return CallShape(total, shared, not moved)

    def visible(self, position: int) -> bool:
        return position < self.head_end or position >= self.start


class ObservationMasking:
    name = "observation_masking"

    def __init__(self, tools_tokens: int, placeholder_tokens: int, keep: int = MASKING_KEEP) -> None:
        self.tools_tokens = tools_tokens
        self.placeholder_tokens = placeholder_tokens
        self.keep = keep
        self.tokens: list[int] = []
        self.tool_rank: dict[int, int] = {}   # position of a tool result -> its rank among tool results
        self.tool_positions: list[int] = []
        # prefix sums of each message in its final form (tool results masked)
        self.masked_prefix: list[int] = [0]
        self.total_tokens = 0
        self.masked = 0            # the oldest `masked` tool results are masked
        self.saved = 0
        self._previous = 0

    def append(self, role: str, tokens: int) -> None:
        position = len(self.tokens)
        self.tokens.append(tokens)
        self.total_tokens += tokens
        final = tokens
        if role == "tool":
            self.tool_rank[position] = len(self.tool_positions)
            self.tool_positions.append(position)
            final = self.placeholder_tokens
        self.masked_prefix.append(self.masked_prefix[-1] + final)

    def call(self) -> CallShape:
        target = max(0, len(self.tool_positions) - self.keep)
        first_changed: int | None = None
        for rank in range(self.masked, target):
            position = self.tool_positions[rank]
            if first_changed is None:
                first_changed = position
            self.saved += self.tokens[position] - self.placeholder_tokens
        self.masked = max(self.masked, target)
        total = self.tools_tokens + self.total_tokens - self.saved
        if first_changed is None:
            shape = CallShape(total, self._previous, True)
        else:
            shape = CallShape(total, self.tools_tokens + self.masked_prefix[first_changed], False)
        self._previous = total
        return shape

    def visible(self, position: int) -> bool:
        rank = self.tool_rank.get(position)
        return rank is None or rank >= self.masked
