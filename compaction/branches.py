"""Branch summaries: one summary per filter key, plus one for the whole session.

A session's messages can carry a *filter key*, a ``/``-separated path that starts with
the application's name (``"shop"``, ``"shop/search"``, ``"shop/search/web"``). Besides
the whole-session summary (key ``""``, :data:`ALL`), a summary can be kept per key, so a
sub-agent or a tool family has its own condensed memory.

Matching is hierarchical and works on whole path segments, in both directions: a key
relates to its ancestors and its descendants, never to a sibling that merely shares a
prefix. ``shop/tool`` relates to ``shop``, ``shop/tool`` and ``shop/tool/search``, but not
to ``shop/toolbox`` or ``other/tool``. The same rule decides

- which messages belong to a branch (a message keyed ``shop`` belongs to every branch
  under ``shop``; a message without a key belongs only to the whole-session summary);
- whether a key passes the allowlist (``policy.branches.allowlist``): ``None`` lets every
  key through, an explicit empty list lets none through. The whole-session summary is
  never blocked.

A trigger on a branch key refreshes that branch (if allowed) and, with
``policy.branches.cascade`` on, the whole-session summary too. With an empty allowlist
and cascade on, branch triggers refresh only the whole-session summary; with cascade
off as well, they refresh nothing.

Retrieval falls back: the requested key, else the whole-session summary, else the most
recently updated summary of any key (:func:`retrieve`).

Summaries are incremental: each one records how many messages of the session it has
seen (``covered``); the next refresh summarizes only the branch's newer messages and
folds the stored summary in. Storage is pluggable (:class:`SummaryStore`); the engine
ships an in-memory store that serialises to JSON for a service to persist.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol

from .branch_keys import (
    ALL,
    belongs,
    branch_key,
    check_key,
    is_allowed,
    keys_related,
    normalize_allowlist,
    normalize_key,
    summary_targets,
)
from .compactor import Compactor, Hooks
from .errors import CompactionError, SummaryError
from .messages import JSONObject, Message, Provenance, RawMessage, original_id
from .policy import Policy
from .steps import summarizer_settings
from .summarizer import summarize
from .triggers import evaluate

# -- stored summaries ------------------------------------------------------------------------

@dataclass
class BranchSummary:
    key: str                    # "" for the whole session
    text: str
    covered: int                # messages of the session (by position) this summary has seen
    messages: int               # messages of this key folded in so far, over every refresh
    model: str | None = None
    extractive: bool = False
    updated_at: float = field(default_factory=time.time)
    version: int = 1
    run_id: str | None = None

    def to_dict(self) -> JSONObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONObject) -> BranchSummary:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


class SummaryStore(Protocol):
    def get(self, key: str) -> BranchSummary | None: ...
    def put(self, summary: BranchSummary) -> None: ...
    def all(self) -> list[BranchSummary]: ...


class MemorySummaryStore:
    """Summaries in a dict; ``to_dict()`` / ``from_dict()`` give a JSON-safe form to persist."""

    def __init__(self, summaries: Iterable[BranchSummary] = ()) -> None:
        self._by_key: dict[str, BranchSummary] = {}
        for s in summaries:
            self.put(s)

    def get(self, key: str) -> BranchSummary | None:
        return self._by_key.get(normalize_key(key))

    def put(self, summary: BranchSummary) -> None:
        summary.key = normalize_key(summary.key)
        self._by_key[summary.key] = summary

    def all(self) -> list[BranchSummary]:
        return sorted(self._by_key.values(), key=lambda s: (s.key != ALL, s.key))

    def keys(self) -> list[str]:
        return [s.key for s in self.all()]

    def to_dict(self) -> JSONObject:
        return {"summaries": [s.to_dict() for s in self.all()]}

    @classmethod
    def from_dict(cls, data: JSONObject | None) -> MemorySummaryStore:
        return cls(BranchSummary.from_dict(d) for d in (data or {}).get("summaries", []))


Fallback = Literal["exact", "whole_session", "any", "none"]


@dataclass
class Retrieved:
    """What :func:`retrieve` found: ``used`` is the key actually served, ``fallback`` how."""
    summary: BranchSummary | None
    requested: str
    used: str | None
    fallback: Fallback

    def __bool__(self) -> bool:
        return self.summary is not None

    @property
    def text(self) -> str | None:
        return self.summary.text if self.summary else None

    def to_dict(self) -> JSONObject:
        return {"requested": self.requested, "used": self.used, "fallback": self.fallback,
                "summary": self.summary.to_dict() if self.summary else None}


def retrieve(store: SummaryStore, key: str | None = None) -> Retrieved:
    """The summary for ``key``; else the whole-session summary; else the newest of any key."""
    key = normalize_key(key)
    found = store.get(key)
    if found is not None:
        return Retrieved(found, key, key, "exact")
    whole = store.get(ALL)
    if whole is not None:
        return Retrieved(whole, key, ALL, "whole_session")
    others = store.all()
    if others:
        newest = max(others, key=lambda s: s.updated_at)
        return Retrieved(newest, key, newest.key, "any")
    return Retrieved(None, key, None, "none")


# -- generating them ---------------------------------------------------------------------------

TargetStatus = Literal["updated", "skipped", "failed"]


@dataclass
class TargetResult:
    key: str
    status: TargetStatus
    reason: str = ""
    summary: BranchSummary | None = None
    new_messages: int = 0
    attempts: list[JSONObject] = field(default_factory=list)
    request_mode: str | None = None

    def to_dict(self) -> JSONObject:
        return {"key": self.key, "status": self.status, "reason": self.reason, "new_messages": self.new_messages,
                "summary": self.summary.to_dict() if self.summary else None, "attempts": self.attempts,
                "request_mode": self.request_mode}


@dataclass
class BranchRefresh:
    trigger_key: str
    targets: list[str]
    results: list[TargetResult]

    def __bool__(self) -> bool:
        return any(r.status == "updated" for r in self.results)

    def result(self, key: str) -> TargetResult | None:
        key = normalize_key(key)
        return next((r for r in self.results if r.key == key), None)

    def to_dict(self) -> JSONObject:
        return {"trigger_key": self.trigger_key, "targets": self.targets,
                "results": [r.to_dict() for r in self.results]}


class BranchSummarizer:
    """Keeps per-key and whole-session summaries of one session up to date.

        bs = BranchSummarizer(policy, app="shop", store=MemorySummaryStore())
        bs.refresh(messages, keys, trigger_key="shop/search")   # keys[i] is the key of messages[i]
        bs.summary("shop/search").text                           # falls back as described above

    ``messages`` are OpenAI dicts (or Messages) in session order and ``keys`` their filter
    keys (None for none); both grow between calls, earlier positions never change.
    Summaries are generated with the policy's summarizer, hooks and language, exactly as a
    compaction would, but nothing in the live context is replaced: they are kept aside.
    """

    def __init__(self, policy: Policy | str | JSONObject = "default", *, store: SummaryStore | None = None,
                 app: str | None = None, hooks: Hooks | None = None, compactor: Compactor | None = None) -> None:
        if compactor is None:
            compactor = Compactor(policy, hooks=hooks)
        self.compactor = compactor
        self.policy = compactor.policy
        self.store: SummaryStore = store if store is not None else MemorySummaryStore()
        self.app = normalize_key(app) if app else None

    # -- which keys -----------------------------------------------------------------------
    def targets(self, trigger_key: str | None) -> list[str]:
        key = check_key(trigger_key, self.app)
        cfg = self.policy.branches
        return summary_targets(key, cfg.allowlist, cfg.cascade)

    def summary(self, key: str | None = None) -> Retrieved:
        return retrieve(self.store, key)

    def pending(self, messages: Sequence[Message | RawMessage], keys: Sequence[str | None], key: str) -> list[int]:
        """Positions of the messages of ``key`` not yet folded into its summary."""
        if len(keys) != len(messages):
            raise ValueError(f"{len(messages)} messages but {len(keys)} filter keys; give one key (or None) per message")
        stored = self.store.get(key)
        start = stored.covered if stored else 0
        return [i for i in range(start, len(messages)) if belongs(keys[i], key) and _summarizable(messages[i])]

    # -- refreshing -------------------------------------------------------------------------
    def refresh(self, messages: Sequence[Message | RawMessage], keys: Sequence[str | None],
                trigger_key: str | None = None, *, force: bool = False, run_id: str | None = None,
                parent_request: JSONObject | None = None, on_event: Callable[[JSONObject], None] | None = None,
                last_message_at: float | None = None) -> BranchRefresh:
        """Refresh every summary a trigger on ``trigger_key`` targets.

        Without ``force`` a target is refreshed only when the policy's trigger fires on its
        own numbers (its messages, and those added since its last summary). A target that
        fails keeps its previous summary; the others are still refreshed.
        ``parent_request`` (the agent's last request) is used for the whole-session target
        only, and only when ``policy.summarizer.cache_safe`` is on.
        """
        trigger = check_key(trigger_key, self.app)
        targets = self.targets(trigger)
        results = [self._refresh_one(messages, keys, key, force=force, run_id=run_id,
                                     parent_request=parent_request if key == ALL else None,
                                     on_event=on_event, last_message_at=last_message_at)
                   for key in targets]
        if not targets:
            reason = "the key is not in the allowlist and cascade is off: nothing to summarize"
            results = [TargetResult(trigger, "skipped", reason)]
        return BranchRefresh(trigger, targets, results)

    def _refresh_one(self, messages: Sequence[Message | RawMessage], keys: Sequence[str | None], key: str, *,
                     force: bool, run_id: str | None, parent_request: JSONObject | None,
                     on_event: Callable[[JSONObject], None] | None,
                     last_message_at: float | None) -> TargetResult:
        c = self.compactor
        counter = c.counter
        pending = self.pending(messages, keys, key)
        if not pending:
            return TargetResult(key, "skipped", "no new messages for this key since its last summary")
        span = [_as_message(messages[i], i) for i in pending]
        span_tokens = sum(t.total for t in counter.count_many(span))
        if not force:
            members = [i for i in range(len(messages)) if belongs(keys[i], key) and _summarizable(messages[i])]
            all_tokens = sum(t.total for t in counter.count_many([_as_message(messages[i], i) for i in members]))
            state = c.trigger_state(all_tokens, len(members), span_tokens, len(span), last_message_at)
            fired = evaluate(self.policy.trigger, state)
            if not fired.fired:
                return TargetResult(key, "skipped", f"trigger did not fire: {fired.reason}", new_messages=len(span))
        stored = self.store.get(key)
        previous = stored.text if stored else None
        replaced = span_tokens + (counter.count_text(previous) if previous else 0)
        events: list[JSONObject] = []

        def emit(event: JSONObject) -> None:
            event = {**event, "filter_key": key}
            events.append(event)
            if on_event is not None:
                on_event(event)

        emit({"type": "before_branch_summary", "messages": len(span), "tokens": span_tokens})
        try:
            result = summarize(span, summarizer_settings(c.policy, c.window), previous_summary=previous, counter=counter,
                               fallback_window=self.policy.fallback_context_window, replaced_tokens=replaced,
                               on_event=emit, language=self.policy.finalize.language,
                               parent_request=parent_request, **c.summarize_kwargs())
            text = c.apply_post_summary(result.text, emit)
        except (SummaryError, CompactionError) as exc:
            attempts = [a.to_dict() for a in getattr(exc, "attempts", [])]
            emit({"type": "branch_summary_failed", "error": str(exc)})
            return TargetResult(key, "failed", str(exc), new_messages=len(span), attempts=attempts)
        summary = BranchSummary(key=key, text=text, covered=len(messages),
                                messages=(stored.messages if stored else 0) + len(span), model=result.model,
                                extractive=result.extractive, version=(stored.version + 1) if stored else 1,
                                run_id=run_id)
        self.store.put(summary)
        emit({"type": "after_branch_summary", "version": summary.version})
        return TargetResult(key, "updated", "", summary, len(span), [a.to_dict() for a in result.attempts],
                            getattr(result, "request_mode", None))


def _summarizable(message: Message | RawMessage) -> bool:
    """Engine-written messages (earlier summaries, acknowledgements) are not summarized again."""
    if isinstance(message, Message):
        return message.provenance not in (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT)
    return True


def _as_message(message: Message | RawMessage, index: int) -> Message:
    if isinstance(message, Message):
        return message
    if not isinstance(message, dict) or "role" not in message:
        raise ValueError(f"message {index} is not an OpenAI message dict")
    return Message(message, original_id(index), Provenance.ORIGINAL, index)


__all__ = [
    "ALL", "BranchRefresh", "BranchSummarizer", "BranchSummary", "MemorySummaryStore", "Retrieved", "SummaryStore",
    "TargetResult", "belongs", "branch_key", "check_key", "is_allowed", "keys_related", "normalize_allowlist",
    "normalize_key", "retrieve", "summary_targets",
]
