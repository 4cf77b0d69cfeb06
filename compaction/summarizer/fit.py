"""Fit the rendered transcript into the summarizer's input budget.

Two strategies (``SummarizerPolicy.input_strategy``):

``clip_largest`` (default)
    Shrink the biggest tool results first, all of them towards one common size
    (water-filling: the fewest tokens are lost from any single result), keeping
    the head and the tail of each with an explicit ``[... N characters clipped ...]``
    marker between them. If clipping every tool result down to a small floor is not
    enough, other large messages (long user pastes, file-writing tool calls) are
    clipped the same way. As a last resort the oldest blocks are dropped.

``keep_last``
    Keep only the most recent tokens, as LangChain's summarization middleware does:
    whole blocks from the end, the oldest kept block cut at its start.

Everything removed is reported in ``FitResult.clipped`` so the run page can show
what the summarizer did not see.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .render import BLOCK_SEPARATOR, Block, join_blocks

CountText = Callable[[str], int]

MIN_KEEP_TOKENS = 48      # a clipped block keeps at least this many tokens (label, head, tail)
MARKER_TOKENS = 12        # room reserved for the marker itself
_MAX_ROUNDS = 8
_LIKELY_FITS_CHARS_PER_TOKEN = 3  # below this many characters per budget token, try the joined text first
_EXACT_CHARS = 200_000    # texts longer than this are estimated from a sample while deciding


def clip_marker(chars: int) -> str:
    return f"[... {chars:,} characters clipped ...]"


def omitted_marker(messages: int) -> str:
    return f"[... {messages:,} earlier message{'s' if messages != 1 else ''} omitted to fit the summarizer input ...]"


def _snap_back(text: str, end: int, slack: int) -> int:
    """Move a cut position back to the end of a line when one is close."""
    if end <= 0:
        return 0
    nl = text.rfind("\n", max(0, end - slack), end)
    return nl + 1 if nl >= 0 else end


def _snap_forward(text: str, start: int, slack: int) -> int:
    if start >= len(text):
        return len(text)
    nl = text.find("\n", start, min(len(text), start + slack))
    return nl + 1 if nl >= 0 else start


def clip_middle(text: str, keep_chars: int, head_share: float = 0.6) -> tuple[str, int]:
    """Keep about ``keep_chars`` characters (head and tail) of ``text``; returns (text, clipped)."""
    if keep_chars >= len(text):
        return text, 0
    keep_chars = max(0, keep_chars)
    head = int(keep_chars * head_share)
    tail = keep_chars - head
    slack = max(16, keep_chars // 8)
    head_end = _snap_back(text, head, slack) if head else 0
    tail_start = _snap_forward(text, len(text) - tail, slack) if tail else len(text)
    if tail_start < head_end:
        tail_start = head_end
    clipped = tail_start - head_end
    if clipped <= 0:
        return text, 0
    head_text = text[:head_end]
    tail_text = text[tail_start:]
    sep_before = "" if not head_text or head_text.endswith("\n") else "\n"
    sep_after = "" if not tail_text or tail_text.startswith("\n") else "\n"
    return f"{head_text}{sep_before}{clip_marker(clipped)}{sep_after}{tail_text}", clipped


def clip_start(text: str, keep_chars: int) -> tuple[str, int]:
    """Keep the last ``keep_chars`` characters of ``text`` behind a marker."""
    if keep_chars >= len(text):
        return text, 0
    start = _snap_forward(text, len(text) - max(0, keep_chars), max(16, keep_chars // 8))
    clipped = start
    return f"{clip_marker(clipped)}\n{text[start:]}", clipped


def _omitted_block(index: int, messages: int) -> Block:
    """The line standing in for blocks dropped from the start of the transcript."""
    return Block(index, "", "system", "omitted", "", omitted_marker(messages))


@dataclass
class FitResult:
    blocks: list[Block]
    text: str
    tokens: int
    clipped: list[dict[str, Any]] = field(default_factory=list)


def _waterline(tokens: list[int], candidates: list[int], excess: int, floor: int) -> int | None:
    """Largest cap L >= floor such that capping the candidates at L frees ``excess``
    tokens; None when even capping at ``floor`` is not enough."""
    def freed(cap: int) -> int:
        return sum(tokens[i] - cap for i in candidates if tokens[i] > cap)

    if not candidates or freed(floor) < excess:
        return None
    lo, hi = floor, max(tokens[i] for i in candidates)
    while lo < hi:  # find the largest cap that still frees enough
        mid = (lo + hi + 1) // 2
        if freed(mid) >= excess:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Clipper:
    """Holds the original blocks and the current cap of each; re-clips from the original
    body every round so markers never nest."""

    def __init__(self, blocks: list[Block], count: CountText, tokens: list[int]):
        self.original = blocks
        self.count = count
        self.current = list(blocks)
        self.tokens = list(tokens)
        self.label_tokens = [count(b.prefix + b.suffix) if (b.prefix or b.suffix) else 0 for b in blocks]
        self.body_tokens = [max(0, t - lt) for t, lt in zip(self.tokens, self.label_tokens)]
        self.clipped_chars = [0] * len(blocks)
        self.dropped_head = 0
        self.original_tokens = list(tokens)

    def cap(self, i: int, cap_tokens: int) -> None:
        blk = self.original[i]
        body_target = max(0, cap_tokens - self.label_tokens[i] - MARKER_TOKENS)
        if self.body_tokens[i] <= 0:
            return
        keep_chars = int(len(blk.body) * body_target / self.body_tokens[i])
        body, clipped = clip_middle(blk.body, keep_chars)
        self.current[i] = replace(blk, body=body)
        self.clipped_chars[i] = clipped
        self.tokens[i] = self.count(self.current[i].text)

    def total(self, sep_tokens: int) -> int:
        live = self.tokens[self.dropped_head:]
        return sum(live) + sep_tokens * max(0, len(live) - 1)

    def blocks(self) -> list[Block]:
        kept = self.current[self.dropped_head:]
        if self.dropped_head:
            return [_omitted_block(self.original[0].index, self.dropped_head)] + kept
        return kept

    def report(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.dropped_head:
            out.append({"kind": "omitted", "messages": self.dropped_head,
                        "message_ids": [b.message_id for b in self.original[: self.dropped_head]],
                        "tokens_before": sum(self.original_tokens[: self.dropped_head]),
                        "tokens_after": 0})
        for i in range(self.dropped_head, len(self.original)):
            if self.clipped_chars[i]:
                blk = self.original[i]
                out.append({"kind": blk.kind, "message_id": blk.message_id, "index": blk.index,
                            "role": blk.role, "tool_name": blk.tool_name,
                            "tokens_before": self.label_tokens[i] + self.body_tokens[i],
                            "tokens_after": self.tokens[i],
                            "chars_before": len(blk.body), "chars_clipped": self.clipped_chars[i]})
        return out


def _fit_clip_largest(blocks: list[Block], budget: int, count: CountText, sep_tokens: int,
                      tokens: list[int]) -> FitResult:
    c = _Clipper(blocks, count, tokens)
    for round_ in range(_MAX_ROUNDS):
        text = join_blocks(c.blocks())
        # The first round works from the per-block counts; later rounds check the real text.
        exact = c.total(sep_tokens) if round_ == 0 else count(text)
        if exact <= budget and round_ == 0:
            exact = count(text)
        if exact <= budget:
            return FitResult(c.blocks(), text, exact, c.report())
        excess = exact - budget
        live = list(range(c.dropped_head, len(blocks)))
        tools = [i for i in live if c.original[i].kind == "tool_result"]
        cap = _waterline(c.tokens, tools, excess, MIN_KEEP_TOKENS)
        if cap is not None:
            for i in tools:
                if c.tokens[i] > cap:
                    c.cap(i, cap)
            continue
        # Tool results alone are not enough: bring them to the floor, then clip anything large.
        for i in tools:
            if c.tokens[i] > MIN_KEEP_TOKENS:
                c.cap(i, MIN_KEEP_TOKENS)
        excess = c.total(sep_tokens) - budget
        if excess > 0:
            cap = _waterline(c.tokens, live, excess, MIN_KEEP_TOKENS)
            for i in live:
                if c.tokens[i] > (cap if cap is not None else MIN_KEEP_TOKENS):
                    c.cap(i, cap if cap is not None else MIN_KEEP_TOKENS)
            if cap is None:
                # Many small blocks: drop the oldest until the rest fits.
                while c.dropped_head < len(blocks) - 1 and c.total(sep_tokens) + MARKER_TOKENS > budget:
                    c.dropped_head += 1
    text = join_blocks(c.blocks())
    return FitResult(c.blocks(), text, count(text), c.report())


def _fit_keep_last(blocks: list[Block], budget: int, count: CountText, sep_tokens: int,
                   tokens: list[int]) -> FitResult:
    room = budget - MARKER_TOKENS
    kept: list[Block] = []
    clipped: list[dict[str, Any]] = []
    used = 0
    first_kept = len(blocks)
    for i in range(len(blocks) - 1, -1, -1):
        need = tokens[i] + (sep_tokens if kept else 0)
        if used + need <= room:
            kept.append(blocks[i])
            used += need
            first_kept = i
            continue
        left = room - used - (sep_tokens if kept else 0)
        blk = blocks[i]
        label = count(blk.prefix + blk.suffix) if (blk.prefix or blk.suffix) else 0
        body_tokens = max(1, tokens[i] - label)
        if left - label - MARKER_TOKENS > MIN_KEEP_TOKENS // 2:
            keep_chars = int(len(blk.body) * (left - label - MARKER_TOKENS) / body_tokens)
            body, cut = clip_start(blk.body, keep_chars)
            if cut:
                kept.append(replace(blk, body=body))
                first_kept = i
                clipped.append({"kind": blk.kind, "message_id": blk.message_id, "index": blk.index,
                                "role": blk.role, "tool_name": blk.tool_name, "tokens_before": tokens[i],
                                "tokens_after": count(kept[-1].text), "chars_before": len(blk.body),
                                "chars_clipped": cut})
        break
    kept.reverse()
    dropped = first_kept if kept else len(blocks)
    if dropped:
        clipped.insert(0, {"kind": "omitted", "messages": dropped,
                           "message_ids": [b.message_id for b in blocks[:dropped]],
                           "tokens_before": sum(tokens[:dropped]), "tokens_after": 0})
        kept.insert(0, _omitted_block(blocks[0].index, dropped))
    text = join_blocks(kept)
    exact = count(text)
    # Token boundaries can shift when blocks are joined; trim whole blocks if we overshot.
    while exact > budget and len(kept) > 2:
        gone = kept.pop(1)
        dropped += 1
        kept[0] = _omitted_block(blocks[0].index, dropped)
        if clipped and clipped[0].get("kind") == "omitted":
            clipped[0]["messages"] = dropped
            clipped[0]["message_ids"].append(gone.message_id)
        text = join_blocks(kept)
        exact = count(text)
    return FitResult(kept, text, exact, clipped)


def estimate_tokens(count: CountText, text: str) -> int:
    """Exact count for ordinary texts; for huge ones (megabytes of log) the count of the
    head and the tail, scaled to the length. Only used to decide what to clip: the
    final text is always counted exactly."""
    if len(text) <= _EXACT_CHARS:
        return count(text)
    half = _EXACT_CHARS // 2
    sample = count(text[:half]) + count(text[-half:])
    return int(sample * len(text) / (2 * half)) + 1


def fit_blocks(blocks: list[Block], budget: int, count: CountText, strategy: str = "clip_largest") -> FitResult:
    """Fit ``blocks`` into ``budget`` tokens (as counted by ``count``) with ``strategy``."""
    if strategy not in ("clip_largest", "keep_last"):
        raise ValueError(f"unknown input strategy {strategy!r}")
    if not blocks:
        return FitResult([], "", 0, [])
    sep_tokens = count(BLOCK_SEPARATOR) or 1
    chars = sum(len(b.text) for b in blocks)
    if chars <= budget * _LIKELY_FITS_CHARS_PER_TOKEN and all(len(b.text) <= _EXACT_CHARS for b in blocks):
        # Likely to fit: one exact count of the joined text decides, instead of counting
        # every block and then the joined text again (the same answer for half the work).
        text = join_blocks(blocks)
        exact = count(text)
        if exact <= budget:
            return FitResult(list(blocks), text, exact, [])
    tokens = [estimate_tokens(count, b.text) for b in blocks]
    estimate = sum(tokens) + sep_tokens * (len(blocks) - 1)
    if estimate <= budget + len(blocks):
        text = join_blocks(blocks)
        exact = count(text)
        if exact <= budget:
            return FitResult(list(blocks), text, exact, [])
    if strategy == "keep_last":
        return _fit_keep_last(list(blocks), budget, count, sep_tokens, tokens)
    return _fit_clip_largest(list(blocks), budget, count, sep_tokens, tokens)
