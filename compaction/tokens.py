"""Token accounting.

Counting rule (documented in README, "Token accounting"):
- every message costs ``MESSAGE_OVERHEAD`` (3) tokens of framing, plus 1 if it has a ``name``;
- text (string content, text and refusal parts) is encoded with the model's tiktoken
  encoding, ``encode_ordinary`` (special-token text is counted as plain text);
- each tool call costs ``TOOL_CALL_OVERHEAD`` (3) plus its function name and its arguments string;
- images follow :mod:`compaction.images`; audio/file parts cost their base64 length / 4;
- tool schemas cost the encoded compact JSON of each function plus ``TOOL_SCHEMA_OVERHEAD``.

Counts are cached by content hash, so a message is tokenized once however often it is
counted (the cache is shared by every counter using the same encoding). Long texts are
counted line by line, each line's count remembered, with exactly the whole text's result.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

import tiktoken

from . import _env  # noqa: F401  (sets TIKTOKEN_CACHE_DIR before tiktoken loads an encoding)
from .images import image_tokens
from .messages import JSONObject, Message, Provenance, RawMessage, canonical_json
from .textsize import needs_care, safe_count

MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
TOOL_CALL_OVERHEAD = 3
TOOL_SCHEMA_OVERHEAD = 10

Category = Literal["system", "tools", "user", "assistant", "tool_calls", "tool_results", "summary"]
CATEGORIES: tuple[str, ...] = get_args(Category)  # plain strings: stored totals also carry "total"

CounterKind = Literal["tiktoken", "approx"]
"""'tiktoken': exact counts with the model's encoding; 'approx': characters / chars_per_token."""

_ROLE_CATEGORY: dict[str, Category] = {"system": "system", "developer": "system", "user": "user",
                                       "assistant": "assistant", "tool": "tool_results"}


@dataclass(frozen=True, slots=True)
class MessageTokens:
    total: int
    by_category: dict[str, int] = field(default_factory=dict)  # Category -> tokens


class TokenCounter(Protocol):
    """Counts tokens of texts, messages and tool schemas."""

    name: str

    def count_text(self, text: str) -> int: ...

    def count_texts(self, texts: list[str]) -> list[int]: ...


def encoding_for_model(model: str | None) -> str:
    """o200k_base for the gpt-4o / 4.1 / 5 / o-series family, cl100k_base otherwise."""
    if not model:
        return "o200k_base"
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")):
        return "o200k_base"
    return "cl100k_base"


# Long texts are counted line by line, each line's count remembered: a long text that
# comes again with other text around it (a summarizer prompt holds the transcript that was
# fitted a moment before; the next run's transcript repeats most lines of this one's) then
# costs a dictionary lookup per line instead of a second tokenization (~8 ms per 130 kB).
SEGMENTED_FROM_CHARS = 16_384
SEGMENT_CACHE_CHARS = 4_000_000  # per encoding and process; the oldest half is dropped when full
# A cut just after a newline and before a character that is neither whitespace nor "/"
# is a boundary of these encodings' pre-tokenizer: none of its patterns matches across it
# (only whitespace patterns start at a newline, and o200k's only pattern that continues
# past a newline, punctuation followed by newlines and slashes, is why "/" is excluded).
# So the text's count is exactly the sum of its segments' counts. r50k/p50k end a text's
# trailing whitespace differently ("\s++$"), so their texts are always counted whole.
SEGMENTED_ENCODINGS = frozenset({"cl100k_base", "o200k_base"})
_SEGMENT_CUT = re.compile(r"(?<=\n)(?=[^\s/])")


_BATCH_THREADS = 4
_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _batch_pool() -> ThreadPoolExecutor:
    """The threads that count a batch of texts: the same ones for every batch of the process.

    tiktoken's ``encode_ordinary_batch`` starts a new pool per call, and its native side keeps
    one regex (with its own match cache) per thread it has seen, in up to 128 slots: a process
    counting batch after batch (an import of 100,000 messages, a long-lived web process) grew
    by ~70 MB that it never gave back. With the same threads the slots stay few, and no thread
    is started per batch. One pool per process id: a pool's threads do not survive a fork
    (prefork workers), so a forked child starts its own."""
    global _pool
    pid = os.getpid()
    with _pool_lock:
        if _pool is None or _pool[0] != pid:
            _pool = (pid, ThreadPoolExecutor(_BATCH_THREADS, thread_name_prefix="token-count"))
        return _pool[1]


class TiktokenCounter:
    """Exact counts with a tiktoken encoding (offline through litellm's bundled files)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        self.name = encoding
        self._enc = tiktoken.get_encoding(encoding)
        self._segmented = encoding in SEGMENTED_ENCODINGS
        self._segments: dict[str, int] = {}
        self._segment_chars = 0

    def _plain(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if self._segmented and len(text) >= SEGMENTED_FROM_CHARS:
            return sum(self._count_segment(s) for s in _SEGMENT_CUT.split(text))
        return self._count_whole(text)

    def _count_segment(self, segment: str) -> int:
        n = self._segments.get(segment)
        if n is None:
            n = self._count_whole(segment)
            if self._segment_chars + len(segment) > SEGMENT_CACHE_CHARS:
                kept = list(self._segments.items())[len(self._segments) // 2:]
                self._segments = dict(kept)  # a new dict: other threads may still read the old one
                self._segment_chars = sum(len(k) for k, _ in kept)
            self._segments[segment] = n
            self._segment_chars += len(segment)
        return n

    def _count_whole(self, text: str) -> int:
        if needs_care(text):
            return safe_count(self._plain, text)
        try:
            return self._plain(text)
        except UnicodeEncodeError:  # lone surrogates
            return safe_count(self._plain, text)

    def count_texts(self, texts: list[str]) -> list[int]:
        if len(texts) < 8:
            return [self.count_text(t) for t in texts]
        hostile = {i for i, t in enumerate(texts) if needs_care(t)}
        plain = [t for i, t in enumerate(texts) if i not in hostile] if hostile else texts
        try:
            counts = iter(list(_batch_pool().map(self._plain, plain)))
        except UnicodeEncodeError:
            counts = iter([self.count_text(t) for t in plain])
        return [self.count_text(t) if i in hostile else next(counts) for i, t in enumerate(texts)]


class CharCounter:
    """Approximate counter: ceil(characters / chars_per_token). Fast, model-agnostic."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.chars_per_token = chars_per_token
        self.name = f"chars/{chars_per_token:g}"

    def count_text(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token) if text else 0

    def count_texts(self, texts: list[str]) -> list[int]:
        return [self.count_text(t) for t in texts]


def make_counter(kind: CounterKind = "tiktoken", *, model: str | None = None, encoding: str | None = None,
                 chars_per_token: float = 4.0) -> TokenCounter:
    if kind == "approx":
        return CharCounter(chars_per_token)
    if kind != "tiktoken":
        raise ValueError(f"unknown counter {kind!r} (expected 'tiktoken' or 'approx')")
    enc = encoding or encoding_for_model(model)
    cached = _COUNTERS.get(enc)
    if cached is None:
        cached = _COUNTERS[enc] = TiktokenCounter(enc)
    return cached


_COUNTERS: dict[str, TiktokenCounter] = {}


# -- message-level accounting -------------------------------------------------------

Piece = tuple[Category, str]


def _pieces(raw: RawMessage) -> tuple[list[Piece], dict[str, int]]:
    """(category, text) pieces of a message plus the fixed tokens it costs beyond them, by category."""
    cat = _ROLE_CATEGORY.get(raw.get("role", ""), "user")
    pieces: list[Piece] = []
    fixed: dict[str, int] = {cat: MESSAGE_OVERHEAD + (NAME_OVERHEAD if raw.get("name") else 0)}
    content = raw.get("content")
    if isinstance(content, str):
        pieces.append((cat, content))
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                pieces.append((cat, part.get("text") or ""))
            elif kind == "refusal":
                pieces.append((cat, part.get("refusal") or ""))
            elif kind == "image_url":
                fixed[cat] += image_tokens(part)
            else:  # audio / file: charge the payload at 4 characters a token
                fixed[cat] += math.ceil(len(canonical_json(part)) / 4)
    calls = raw.get("tool_calls") or []
    if calls:
        fixed["tool_calls"] = TOOL_CALL_OVERHEAD * len(calls)
        for call in calls:
            fn = call.get("function") or {}
            pieces.append(("tool_calls", fn.get("name") or ""))
            pieces.append(("tool_calls", fn.get("arguments") or ""))
    return pieces, fixed


def _piece_key(pieces: list[Piece], fixed: dict[str, int]) -> str:
    """Cache key: a digest of exactly what gets tokenized plus the fixed costs. Cheaper than
    hashing the canonical JSON of the message (which would include base64 images)."""
    h = hashlib.blake2b(repr(sorted(fixed.items())).encode(), digest_size=16)
    for cat, text in pieces:
        h.update(b"\x1f" + cat.encode() + b"\x1e" + text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class MessageCounter:
    """Counts whole messages with a text counter and a content-hash cache."""

    def __init__(self, counter: TokenCounter, cache_size: int = 200_000) -> None:
        self.counter = counter
        self.cache_size = cache_size
        self._cache: dict[str, MessageTokens] = {}

    @property
    def name(self) -> str:
        return self.counter.name

    def _store(self, key: str, value: MessageTokens) -> None:
        if len(self._cache) >= self.cache_size:
            # Drop the oldest half: cheap, and recent messages are the ones re-counted.
            for k in list(self._cache)[: self.cache_size // 2]:
                self._cache.pop(k, None)  # another thread may have dropped it already
        self._cache[key] = value

    def _build(self, counts: Iterable[int], pieces: list[Piece], fixed: dict[str, int]) -> MessageTokens:
        by = dict(fixed)
        for (cat, _), n in zip(pieces, counts):
            by[cat] = by.get(cat, 0) + n
        return MessageTokens(sum(by.values()), by)

    def remember(self, message: Message, tokens: MessageTokens) -> None:
        """Take ``tokens`` as the count of ``message`` (counted earlier with this counter's
        encoding, e.g. by another process that stored it) so that counting it is a lookup.
        Only originals: an engine-written message's stored count is its summary total."""
        if message.is_engine_written or sum(tokens.by_category.values()) != tokens.total:
            return
        pieces, fixed = _pieces(message.raw)
        key = _piece_key(pieces, fixed)
        if key not in self._cache:
            self._store(key, tokens)

    def count_raw(self, raw: RawMessage) -> MessageTokens:
        pieces, fixed = _pieces(raw)
        key = _piece_key(pieces, fixed)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        counts = self.counter.count_texts([t for _, t in pieces])
        value = self._build(counts, pieces, fixed)
        self._store(key, value)
        return value

    def count(self, message: Message) -> MessageTokens:
        value = self.count_raw(message.raw)
        if message.is_engine_written:
            # Everything the engine wrote counts as summary, whatever its role.
            return MessageTokens(value.total, {"summary": value.total})
        return value

    def count_many(self, messages: list[Message], *, remember: bool = True) -> list[MessageTokens]:
        """Batch count: one tokenizer batch for every uncached text. ``remember=False``: what
        is counted anew is not kept in the cache (an import of many messages no one will count
        again would fill it with them)."""
        results: list[MessageTokens | None] = [None] * len(messages)
        todo: list[tuple[str, list[Piece], dict[str, int], int]] = []
        pending: dict[str, list[int]] = {}
        texts: list[str] = []
        for i, m in enumerate(messages):
            pieces, fixed = _pieces(m.raw)
            key = _piece_key(pieces, fixed)
            hit = self._cache.get(key)
            if hit is not None:
                results[i] = hit
                continue
            if key in pending:  # same content twice in one batch: tokenize once
                pending[key].append(i)
                continue
            pending[key] = [i]
            todo.append((key, pieces, fixed, len(texts)))
            texts.extend(t for _, t in pieces)
        counts = self.counter.count_texts(texts) if texts else []
        for key, pieces, fixed, start in todo:
            value = self._build(counts[start:start + len(pieces)], pieces, fixed)
            if remember:
                self._store(key, value)
            for i in pending[key]:
                results[i] = value
        out: list[MessageTokens] = []
        for m, v in zip(messages, results):
            assert v is not None  # every position was filled from the cache or by the batch above
            out.append(MessageTokens(v.total, {"summary": v.total}) if m.is_engine_written else v)
        return out

    def count_tools(self, tools: list[JSONObject] | None) -> int:
        if not tools:
            return 0
        total = 0
        for tool in tools:
            total += TOOL_SCHEMA_OVERHEAD + self.counter.count_text(canonical_json(tool.get("function", tool)))
        return total

    def count_text(self, text: str) -> int:
        return self.counter.count_text(text)


class CategoryTotals:
    """Running token totals per category; add/remove are O(categories), total is O(1)."""

    __slots__ = ("values", "total")

    def __init__(self, values: Mapping[str, int] | None = None) -> None:
        self.values: dict[str, int] = {c: 0 for c in CATEGORIES}
        self.total = 0
        if values:
            for k, v in values.items():
                if k != "total":
                    self.values[k] = self.values.get(k, 0) + v
                    self.total += v

    def add(self, tokens: MessageTokens, sign: int = 1) -> None:
        values = self.values
        for k, v in tokens.by_category.items():
            values[k] = values.get(k, 0) + sign * v
        self.total += sign * tokens.total

    def set(self, category: Category, value: int) -> None:
        self.total += value - self.values.get(category, 0)
        self.values[category] = value

    def copy(self) -> CategoryTotals:
        return CategoryTotals(self.values)

    def as_dict(self) -> dict[str, int]:
        return dict(self.values, total=self.total)


# Exposed for Message provenance checks elsewhere without importing messages twice.
ENGINE_WRITTEN: tuple[Provenance, ...] = (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT)


# -- provider-reported usage (Eino's default counter) -----------------------------------

def reported_usage(raw: RawMessage) -> tuple[int, bool] | None:
    """(tokens, covers the message itself) from the ``usage`` object an assistant message
    may carry (the provider's report of the call that produced it): ``total_tokens``, else
    ``prompt_tokens + completion_tokens`` (both cover the message), else ``prompt_tokens``
    alone (covers what came before it). None when there is no usable report."""
    if raw.get("role") != "assistant":
        return None
    usage = raw.get("usage")
    if not isinstance(usage, Mapping):
        return None

    def number(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    total, prompt, completion = number("total_tokens"), number("prompt_tokens"), number("completion_tokens")
    if total is not None:
        return total, True
    if prompt is not None and completion is not None:
        return prompt + completion, True
    if prompt is not None:
        return prompt, False
    return None


USAGE_HORIZON = "usage_horizon"
"""Meta key of an engine-written message: the ordinal of the first original appended after
the compaction that wrote it. A usage report on an earlier message describes a context that
compaction has since rewritten."""


def usage_total(messages: list[Message], tokens: list[MessageTokens]) -> int | None:
    """The context measured from the latest valid usage report: reported tokens plus the
    estimate of every message after the reporting one. A report is valid when its message
    arrived after the last compaction (ordinal at or past every summary's horizon; after
    the summary's position when it records no horizon). None when no valid report exists,
    so the caller keeps its own estimate."""
    floor, barrier = 0, -1
    for pos, m in enumerate(messages):
        if m.is_engine_written:
            horizon = m.meta.get(USAGE_HORIZON)
            if isinstance(horizon, int):
                floor = max(floor, horizon)
            else:
                barrier = pos
    for i in range(len(messages) - 1, barrier, -1):
        m = messages[i]
        if m.ordinal is None or not m.is_original:
            continue
        if m.ordinal < floor:
            return None
        report = reported_usage(m.raw)
        if report is not None:
            base, covers = report
            return base + sum(t.total for t in tokens[i + 1 if covers else i:])
    return None
