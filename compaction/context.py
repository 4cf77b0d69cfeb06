"""The live context of one conversation, with running token totals.

Appending a message validates it against the session so far, tokenizes only that
message (cached by content hash) and updates the totals, so the trigger check that
follows reads numbers instead of recounting the history.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import SessionValidationError
from .messages import (
    CallTracker,
    JSONObject,
    Message,
    Provenance,
    RawMessage,
    original_id,
    validate_message,
    validate_tools,
)
from .tokens import CategoryTotals, MessageCounter, MessageTokens, reported_usage


class LiveContext:
    def __init__(self, counter: MessageCounter, tools: list[JSONObject] | None = None,
                 session_id: str = "session") -> None:
        self.session_id = session_id
        self.counter = counter
        self.tools = validate_tools(tools)
        self.messages: list[Message] = []
        self.tokens: list[MessageTokens] = []
        self.totals = CategoryTotals()
        self.tools_tokens = counter.count_tools(self.tools)
        self.totals.set("tools", self.tools_tokens)
        self.tracker = CallTracker()
        self.next_ordinal = 0
        self.since_summary_tokens = 0
        self.since_summary_messages = 0
        self.last_message_at: float | None = None
        self.compactions = 0
        # Provider-reported prompt tokens next to our estimate for the same context.
        self.calibration: list[tuple[int, int]] = []
        # The latest usage report of an assistant message (count_from_usage): its tokens and
        # the estimate of everything after it. A compaction rewrites the context the report
        # described, so only messages appended after the last one (ordinal >= floor) count.
        self.usage_base: int | None = None
        self.usage_since = 0
        self.usage_floor = 0

    # -- building ------------------------------------------------------------------
    def append(self, raw: RawMessage, at: float | None = None, *, pinned: bool = False) -> Message:
        """Append one original; ``pinned`` keeps it out of every eviction (cut and tailoring)
        and out of tool-output reduction."""
        index = self.next_ordinal
        validate_message(raw, index)
        self.tracker.feed(raw, index)
        msg = Message(raw, original_id(index), Provenance.ORIGINAL, index, {"pinned": True} if pinned else None)
        self._push(msg, self.counter.count(msg))
        self.next_ordinal += 1
        self.last_message_at = time.time() if at is None else at
        return msg

    def extend(self, raws: Iterable[RawMessage]) -> list[Message]:
        """Append many; tokenizes them as one batch (fast initial load)."""
        msgs: list[Message] = []
        for raw in list(raws):
            index = self.next_ordinal + len(msgs)
            validate_message(raw, index)
            self.tracker.feed(raw, index)
            msgs.append(Message(raw, original_id(index), Provenance.ORIGINAL, index))
        for msg, tok in zip(msgs, self.counter.count_many(msgs)):
            self._push(msg, tok)
        self.next_ordinal += len(msgs)
        if msgs:
            self.last_message_at = time.time()
        return msgs

    def _push(self, msg: Message, tok: MessageTokens) -> None:
        self.messages.append(msg)
        self.tokens.append(tok)
        self.totals.add(tok)
        self.since_summary_tokens += tok.total
        self.since_summary_messages += 1
        report = reported_usage(msg.raw) if msg.ordinal is not None and msg.ordinal >= self.usage_floor else None
        if report is not None:
            self.usage_base, covers = report
            self.usage_since = 0 if covers else tok.total
        else:
            self.usage_since += tok.total

    def replace_last(self, message: Message) -> None:
        """Swap the newest message for an edited version of itself (truncation on arrival)."""
        old = self.tokens[-1]
        new = self.counter.count(message)
        self.totals.add(old, -1)
        self.totals.add(new)
        self.since_summary_tokens += new.total - old.total
        self.usage_since += new.total - old.total
        self.messages[-1] = message
        self.tokens[-1] = new

    def replace(self, messages: list[Message], *, summarized: bool) -> None:
        """Install a compacted message list. Counts come from the cache (no re-tokenizing
        of kept messages); the since-summary counters restart when a summary was written."""
        self.messages = list(messages)
        self.tokens = self.counter.count_many(self.messages)
        totals = CategoryTotals()
        for t in self.tokens:
            totals.add(t)
        totals.set("tools", self.tools_tokens)
        self.totals = totals
        if summarized:
            self.compactions += 1
        self.usage_base, self.usage_since, self.usage_floor = None, 0, self.next_ordinal
        # "since the last summary" = originals after the newest engine-written message
        last = max((i for i, m in enumerate(self.messages) if m.is_engine_written), default=-1)
        self.since_summary_tokens = 0
        self.since_summary_messages = 0
        for m, t in zip(self.messages[last + 1:], self.tokens[last + 1:]):
            if m.is_original:
                self.since_summary_tokens += t.total
                self.since_summary_messages += 1

    def record_usage(self, reported_prompt_tokens: int) -> float:
        """Keep the provider's count of the current context beside ours; returns estimate/reported."""
        est = self.total_tokens
        self.calibration.append((est, reported_prompt_tokens))
        return est / reported_prompt_tokens if reported_prompt_tokens else float("nan")

    @property
    def calibration_ratio(self) -> float | None:
        if not self.calibration:
            return None
        est = sum(e for e, _ in self.calibration)
        rep = sum(r for _, r in self.calibration)
        return est / rep if rep else None

    # -- reading -------------------------------------------------------------------
    @property
    def total_tokens(self) -> int:
        return self.totals.total

    @property
    def reported_total(self) -> int | None:
        """O(1): the latest usage report since the last compaction plus the estimate of what
        came after it; None without one."""
        return None if self.usage_base is None else self.usage_base + self.usage_since

    def __len__(self) -> int:
        return len(self.messages)

    def render(self) -> list[RawMessage]:
        return render_messages(self.messages)

    def check_whole(self) -> None:
        """Full consistency check of the current context (tests and integrity reports)."""
        check_tool_pairs(self.messages)


def render_messages(messages: list[Message]) -> list[RawMessage]:
    """The OpenAI message list to send. A summary in 'system' injection mode is merged
    into the first system message (or becomes one) instead of standing on its own; one in
    'first_user' mode is put in front of the user message it names (``meta["merge_into"]``),
    or stands alone when that message is not in the list. Preserved user messages naming a
    summary (``meta["join_summary"]``) are rendered inside that summary's user turn."""
    out: list[RawMessage] = []
    system_summaries = [m for m in messages if m.provenance is Provenance.SUMMARY and m.meta.get("injection") == "system"]
    ids = {m.id for m in messages}
    into: dict[str, Message] = {}
    for m in messages:
        target = m.meta.get("merge_into") if m.provenance is Provenance.SUMMARY else None
        if isinstance(target, str) and target in ids:
            into[target] = m
    merging = set(map(id, into.values()))
    # preserved copies rendered inside their summary's user turn (user injection)
    joins: dict[str, list[Message]] = {}
    for m in messages:
        target = m.meta.get("join_summary") if m.provenance is Provenance.PRESERVED else None
        if isinstance(target, str) and target in ids:
            joins.setdefault(target, []).append(m)
            merging.add(id(m))
    merged = False
    for m in messages:
        if m in system_summaries or id(m) in merging:
            continue
        if m.id in joins:
            out.append(_join(m.raw, [j.raw for j in joins[m.id]]))
            continue
        if m.id in into:
            out.append(_merge_user(into[m.id].raw, m.raw))
            continue
        if system_summaries and not merged and m.role in ("system", "developer"):
            out.append(_merge_system(m.raw, system_summaries))
            merged = True
            continue
        out.append(m.raw)
    if system_summaries and not merged:
        out.insert(0, {"role": "system", "content": "\n\n".join(_text(s.raw) for s in system_summaries)})
    return out


def _text(raw: RawMessage) -> str:
    c = raw.get("content")
    return c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c or [] if p.get("type") == "text")


def _merge_system(raw: RawMessage, summaries: list[Message]) -> RawMessage:
    extra = "\n\n".join(_text(s.raw) for s in summaries)
    content = raw.get("content")
    new = dict(raw)
    if isinstance(content, list):
        new["content"] = list(content) + [{"type": "text", "text": extra}]
    else:
        new["content"] = (content or "") + "\n\n" + extra
    return new


def _join(summary: RawMessage, copies: list[RawMessage]) -> RawMessage:
    """The summary's user turn with the preserved copies after its text, in order."""
    new = dict(summary)
    if all(isinstance(c.get("content"), str) for c in copies) and isinstance(summary.get("content"), str):
        new["content"] = "\n\n".join([summary["content"]] + [c["content"] for c in copies])
        return new
    parts: list[Any] = [{"type": "text", "text": _text(summary)}]
    for c in copies:
        content = c.get("content")
        parts.extend(content if isinstance(content, list) else [{"type": "text", "text": content or ""}])
    new["content"] = parts
    return new


def _merge_user(summary: RawMessage, raw: RawMessage) -> RawMessage:
    """The user message ``raw`` with the summary's text in front of its own content."""
    content = raw.get("content")
    new = dict(raw)
    if isinstance(content, list):
        new["content"] = [{"type": "text", "text": _text(summary)}] + list(content)
    else:
        new["content"] = _text(summary) + "\n\n" + (content or "")
    return new


def check_tool_pairs(messages: Sequence[Message | RawMessage]) -> None:
    """Raise SessionValidationError if any tool result is orphaned or a call is unanswered
    before the end (the rule providers enforce)."""
    tracker = CallTracker()
    for i, m in enumerate(messages):
        raw = m.raw if isinstance(m, Message) else m
        tracker.feed(raw, i)


def tool_pairs_ok(messages: Sequence[Message | RawMessage]) -> bool:
    try:
        check_tool_pairs(messages)
    except SessionValidationError:
        return False
    return True
