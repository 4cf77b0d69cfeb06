"""The working copy a reduction step edits, and the edit primitives every phase uses.

An :class:`Editor` never mutates the input list or its messages. Each edit replaces a slot
of the copy with new Message objects and appends a :class:`Record`; a checkpoint is the
slot map plus the record count, so abandoning a phase (clear-at-least guard) is a cheap
rollback. Archive entries are built only when the result is produced, from the records
that survived, so an abandoned edit hashes and writes nothing.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..archive import ArchiveEntry, EntryIds, item_for
from ..errors import SessionValidationError
from ..messages import CallTracker, Message, Provenance, validate_message
from ..tokens import MessageCounter
from . import notices as N
from .config import RECOVERY_TOOL_NAMES, ReductionPolicy
from .hooks import ReductionHooks, Replacement, ToolDetail
from .marks import Phase, ReductionMark, mark_of
from .measure import document_text, text_tokens_at_most, tokens_of
from .result import (
    EVENT_CLEARED,
    EVENT_TRUNCATED,
    EVENT_WARNING,
    ReductionLedgerRow,
    ReductionResult,
)
from .truncate import shorten

FAILURE_WORDS = ("error", "fail", "missing", "unavailable", "lost", "denied", "invalid")
# An edit must save at least this many tokens. Smaller gains are not worth a prompt-cache
# miss, and entry ids tokenize to slightly different lengths, so a near-tie could flip
# between one edit and the next.
MIN_GAIN_TOKENS = 32
# Decisions are taken on placeholders carrying this stand-in handle, so whether a result is
# worth clearing depends on the result alone, not on how its entry's digest tokenizes.
PROBE_HANDLE = "ar_0000000000000000"

# "inserted": a message a rewrite hook wrote; it has no ledger row of its own.
RecordFate = Literal["truncated", "cleared", "inserted"]
Checkpoint = tuple[dict[int, list[Message]], int, int]


@dataclass
class Record:
    index: int
    fate: RecordFate
    phase: Phase
    message_id: str
    tool_call_id: str | None
    tool_name: str | None
    tokens_before: int
    tokens_after: int
    archive_ref: str | None
    reason: str
    original: Message | None = None  # set when this record writes the original to the archive
    extra: dict[str, Any] = field(default_factory=dict)


class Editor:
    def __init__(self, messages: list[Message], policy: ReductionPolicy, counter: MessageCounter,
                 session_id: str, hooks: ReductionHooks, names: dict[str, str] | None = None,
                 ids: EntryIds | None = None):
        self.messages = messages
        self.policy = policy
        self.counter = counter
        self.session_id = session_id
        self.hooks = hooks
        self.names = names or {}
        self.ids = ids if ids is not None else EntryIds(session_id)
        self.lang = policy.language
        self.slots: dict[int, list[Message]] = {}
        self.records: list[Record] = []
        self.events: list[dict[str, Any]] = []
        self._merge_floor = 0
        self._tokens: dict[int, int] = {}  # index -> tokens of the input message (prefilled in batches)
        self._arguments: dict[str, str] = {}
        for m in messages:
            for call in m.tool_calls:
                fn = call.get("function") or {}
                args = fn.get("arguments")
                self._arguments[call.get("id", "")] = args if isinstance(args, str) else ""

    # -- reading the copy ----------------------------------------------------------------
    def current(self, i: int) -> Message | None:
        """The single message now at input position ``i`` (None when a rewrite replaced it)."""
        slot = self.slots.get(i)
        if slot is None:
            return self.messages[i]
        if len(slot) == 1 and slot[0].id == self.messages[i].id:
            return slot[0]
        return None

    def tool_name(self, msg: Message) -> str | None:
        return self.names.get(msg.tool_call_id or "") or msg.raw.get("name") or None

    def tokens(self, i: int, msg: Message) -> int:
        if msg is self.messages[i]:
            hit = self._tokens.get(i)
            if hit is None:
                hit = self._tokens[i] = tokens_of(self.counter, msg)
            return hit
        return tokens_of(self.counter, msg)

    def prefill(self, pairs: dict[int, int]) -> None:
        self._tokens.update(pairs)

    def output(self) -> list[Message]:
        if not self.slots:
            return list(self.messages)
        out: list[Message] = []
        for i, m in enumerate(self.messages):
            slot = self.slots.get(i)
            if slot is None:
                out.append(m)
            else:
                out.extend(slot)
        return out

    # -- bookkeeping -------------------------------------------------------------------------
    def checkpoint(self) -> Checkpoint:
        self._merge_floor = len(self.records)
        return dict(self.slots), len(self.records), len(self.events)

    def rollback(self, cp: Checkpoint) -> None:
        self.slots = dict(cp[0])
        del self.records[cp[1]:]
        del self.events[cp[2]:]
        self._merge_floor = len(self.records)

    def gained(self, since: int = 0) -> int:
        return sum(r.tokens_before - r.tokens_after for r in self.records[since:])

    def warn(self, code: str, message: str, **extra: Any) -> None:
        self.events.append({"type": EVENT_WARNING, "code": code, "message": message, **extra})

    def _handle(self, msg: Message) -> tuple[str, bool]:
        """(archive handle, whether this edit must write the original). A message reduced
        before keeps pointing at the entry that holds its true original."""
        mark = mark_of(msg)
        if mark is not None and mark.archive_ref:
            return mark.archive_ref, False
        return self.ids.new("offloaded", [item_for(msg, tool_name=self.tool_name(msg))]), True

    def _record(self, rec: Record) -> None:
        # One record per message per phase run: a second edit of the same message (another
        # call's arguments of one assistant message) updates the first.
        for prev in reversed(self.records[self._merge_floor:]):
            if prev.index == rec.index and prev.fate == rec.fate and prev.phase == rec.phase:
                prev.tokens_after = rec.tokens_after
                prev.extra.setdefault("tool_call_ids", [prev.tool_call_id]).append(rec.tool_call_id)
                return
        self.records.append(rec)

    # -- primitives ------------------------------------------------------------------------------
    def truncate(self, i: int, *, phase: Phase, reason: str, budget_chars: int | None = None,
                 max_tokens: int | None = None, limit_label: str) -> bool:
        """Head+tail shorten the tool result at ``i``. Either ``budget_chars`` (arrival) or
        ``max_tokens`` (pass 2, converted to characters from this result's own ratio)."""
        msg = self.current(i)
        if msg is None or msg.role != "tool" or msg.reduction:
            return False
        name = self.tool_name(msg)
        if name in RECOVERY_TOOL_NAMES or self.policy.is_kept(name) or self.policy.tool(name).skip_truncation:
            return False
        content = msg.raw.get("content")
        if content is not None and not isinstance(content, (str, list)):
            self.warn("unsupported_content", f"tool result {msg.id} has content of type {type(content).__name__}; left as is",
                      message_id=msg.id)
            return False
        before = self.tokens(i, msg)
        if max_tokens is not None and before <= max_tokens:
            return False
        handle, new = self._handle(msg)
        detail = ToolDetail(msg, name, msg.tool_call_id, self._arguments.get(msg.tool_call_id or ""), phase,
                            handle, before, self.lang)
        decided = self._ask(self.hooks.truncate_handlers, name, detail)
        if decided is False:
            return False
        tc = self.policy.truncation
        stats: dict[str, Any] = {}
        if decided is not None:
            new_content = decided.content if isinstance(decided, Replacement) else decided
            new_raw = dict(msg.raw, content=new_content)
            stats["handler"] = True
        else:
            text_len = len(document_text(content))
            budget = budget_chars
            if max_tokens is not None:
                budget = max(1, int(text_len * max_tokens / max(1, before)))
            for _ in range(4):
                sh = shorten(content, budget_chars=budget, limit_label=limit_label, handle=handle, tool_name=name,
                             tool_call_id=msg.tool_call_id, tokens=before, language=self.lang,
                             load_limit=self.policy.recovery_limit_chars,
                             image_max_chars=tc.image_max_chars if phase == "arrival" else None,
                             image_max_tokens=tc.image_max_tokens if phase == "arrival" else None,
                             binary_max_chars=tc.binary_max_chars if phase == "arrival" else None,
                             attachment_max_chars=budget_chars if phase == "arrival" else None)
                if not sh.changed:
                    return False
                new_raw = dict(msg.raw, content=sh.content)
                if max_tokens is None or budget is None:  # a character budget is applied once
                    break
                # Token target: the kept characters may be denser than the text's average,
                # so measure the preview and tighten (the notice itself may add ~150 tokens).
                after = tokens_of(self.counter, Message(new_raw, msg.id))
                if after <= max_tokens + 150:
                    break
                budget = max(1, int(budget * max_tokens / after * 0.95))
            stats = {"chars_before": sh.original_chars, "chars_after": sh.kept_chars, "images": sh.images,
                     "image_tokens": sh.image_tokens, "images_offloaded": sh.images_offloaded,
                     "parts_offloaded": sh.parts_offloaded}
            if sh.binary_share is not None:
                stats["binary_share"] = round(sh.binary_share, 3)
        mark = self._mark("truncated", msg, handle, name, phase, before)
        new_msg = msg.with_raw(new_raw, reduction=mark.to_dict())
        after = tokens_of(self.counter, new_msg)
        if decided is None and after > before - MIN_GAIN_TOKENS:
            return False  # the notice would cost about what the cut saves
        self.slots[i] = [new_msg]
        self._record(Record(i, "truncated", phase, msg.id, msg.tool_call_id, name, before, after, handle, reason,
                            msg if new else None, stats))
        return True

    def clear(self, i: int, *, phase: Phase, reason: str, forced: bool = False, owner: int | None = None,
              clear_inputs: bool = False) -> bool:
        """Replace the tool result at ``i`` with a placeholder (a truncated result may be
        cleared later; a cleared one never again). With ``clear_inputs`` the arguments of its
        call in the assistant message at ``owner`` are archived too."""
        msg = self.current(i)
        if msg is None or msg.role != "tool":
            return False
        red0 = mark_of(msg)
        if red0 is not None and red0.kind != "truncated":
            return False
        name = self.tool_name(msg)
        before = self.tokens(i, msg)
        handle, new = self._handle(msg)
        chars, orig_tokens = self._original_size(msg, before)
        detail = ToolDetail(msg, name, msg.tool_call_id, self._arguments.get(msg.tool_call_id or ""), phase,
                            handle, before, self.lang)
        decided = self._ask(self.hooks.clear_handlers, name, detail)
        if decided is False:
            return False
        new_args = None
        if isinstance(decided, Replacement):
            new_args = decided.arguments
            decided = decided.content
        if decided is None:
            # A placeholder about as large as the result helps nobody.
            probe = Message(dict(msg.raw, content=self.placeholder(name, msg, PROBE_HANDLE, chars, orig_tokens,
                                                                    forced)), msg.id)
            bound = text_tokens_at_most(probe.raw)  # (a short placeholder need not be tokenized to know)
            if (bound is None or bound > before - MIN_GAIN_TOKENS) and \
                    tokens_of(self.counter, probe) > before - MIN_GAIN_TOKENS:
                return False
            text = self.placeholder(name, msg, handle, chars, orig_tokens, forced)
        else:
            text = decided  # a handler's explicit choice is applied as given
        mark = self._mark("cleared", msg, handle, name, phase, orig_tokens, chars)
        new_msg = msg.with_raw(dict(msg.raw, content=text), reduction=mark.to_dict())
        after = tokens_of(self.counter, new_msg)
        self.slots[i] = [new_msg]
        self._record(Record(i, "cleared", phase, msg.id, msg.tool_call_id, name, before, after, handle, reason,
                            msg if new else None, {"chars_before": chars, "forced": forced}))
        if owner is not None and msg.tool_call_id and (clear_inputs or new_args is not None):
            self.clear_arguments(owner, msg.tool_call_id, phase=phase, reason=reason, replacement=new_args)
        return True

    def clear_arguments(self, j: int, call_id: str, *, phase: Phase, reason: str, replacement: str | None = None) -> bool:
        """Replace the arguments of call ``call_id`` in the assistant message at ``j``."""
        msg = self.current(j)
        if msg is None or msg.role != "assistant":
            return False
        red0 = mark_of(msg)
        if red0 is not None and (red0.kind != "cleared" or red0.target != "arguments"
                                 or call_id in red0.cleared_calls):
            return False
        calls = msg.tool_calls
        target = next((c for c in calls if c.get("id") == call_id), None)
        if target is None:
            return False
        fn = target.get("function") or {}
        args = fn.get("arguments") or ""
        name = fn.get("name")
        handle, new = self._handle(msg)
        before = self.tokens(j, msg)
        from_handler = replacement is not None
        if not from_handler:
            probe = self._arguments_note(len(args), PROBE_HANDLE, call_id)
            if self.counter.count_text(probe) > self.counter.count_text(args) - MIN_GAIN_TOKENS:
                return False
            replacement = self._arguments_note(len(args), handle, call_id)
        new_calls = [dict(c, function=dict(c.get("function") or {}, arguments=replacement)) if c is target else c
                     for c in calls]
        earlier_chars = red0.original_chars if red0 is not None and red0.original_chars is not None else 0
        earlier_tokens = red0.original_tokens if red0 is not None else None
        mark = ReductionMark("cleared", handle, phase, target="arguments",
                             cleared_calls=(*(red0.cleared_calls if red0 else ()), call_id),
                             original_chars=earlier_chars + len(args),
                             original_tokens=earlier_tokens if earlier_tokens is not None else before)
        new_msg = msg.with_raw(dict(msg.raw, tool_calls=new_calls), reduction=mark.to_dict())
        after = tokens_of(self.counter, new_msg)
        self.slots[j] = [new_msg]
        self._record(Record(j, "cleared", phase, msg.id, call_id, name, before, after, handle, reason,
                            msg if new else None, {"field": "arguments"}))
        return True

    def _arguments_note(self, chars: int, handle: str, call_id: str) -> str:
        note = N.render("cleared_arguments", self.lang, chars=N.num(chars), handle=handle, tool_call_id=call_id)
        return json.dumps({"archived": note}, ensure_ascii=False)

    def rewrite_group(self, a: int, results: list[int], *, phase: Phase, reason: str) -> bool:
        """Offer the group (assistant at ``a``, its results) to the rewrite hook."""
        hook = self.hooks.rewrite
        if hook is None:
            return False
        group = [a, *results]
        current = [self.current(k) for k in group]
        originals = [m for m in current if m is not None and not m.reduction]
        if len(originals) != len(group):
            return False
        try:
            out = hook(originals[0], originals[1:])
        except Exception as exc:  # a broken hook must not take the model call down with it
            self.warn("rewrite_hook_raised", f"the rewrite hook raised {type(exc).__name__}: {exc}; group left as is",
                      message_id=originals[0].id)
            return False
        if out is None:
            return False
        by_id = {m.id: (k, m) for k, m in zip(group, originals)}
        built: list[Message] = []
        inserted: list[int] = []          # positions in ``built`` of messages the hook wrote
        handles: dict[str, str] = {}      # id of an edited input -> its archive handle
        new_count = 0
        try:
            for item in out:
                if isinstance(item, Message):
                    if item.id not in by_id:
                        raise ValueError(f"message {item.id} is not part of the group")
                    k, orig = by_id[item.id]
                    if item is orig or item.raw is orig.raw:
                        built.append(orig)
                    else:
                        validate_message(item.raw, k)
                        handle, _ = self._handle(orig)
                        name = self.tool_name(orig)
                        mark = replace(self._mark("cleared", orig, handle, name, phase, self.tokens(k, orig)),
                                       rewritten=True)
                        handles.setdefault(orig.id, handle)
                        built.append(orig.with_raw(item.raw, reduction=mark.to_dict()))
                elif isinstance(item, dict):
                    validate_message(item, a)
                    new_count += 1
                    inserted.append(len(built))
                    built.append(Message(item, f"{originals[0].id}.rw{new_count}", Provenance.PRESERVED, None))
                else:
                    raise ValueError(f"rewrite returned a {type(item).__name__}; expected Message or dict")
            tracker = CallTracker()
            for n, m in enumerate(built):
                tracker.feed(m.raw, n)
            if tracker.open:
                raise ValueError(f"tool call {next(iter(tracker.open))!r} has no result in the rewritten group")
        except (ValueError, SessionValidationError) as exc:
            self.warn("rewrite_rejected", f"rewrite of the group at {originals[0].id} ignored: {exc}",
                      message_id=originals[0].id)
            return False
        first_ref: str | None = None
        for k, orig in zip(group, originals):
            name = self.tool_name(orig) if orig.role == "tool" else None
            before = self.tokens(k, orig)
            edited = next((m for m in built if m.id == orig.id), None)
            if edited is orig:
                continue
            if edited is None:
                handle, new = self._handle(orig)
                self.records.append(Record(k, "cleared", phase, orig.id, orig.tool_call_id, name, before, 0, handle,
                                           reason + " (removed by the rewrite hook)", orig if new else None,
                                           {"rewritten": True}))
            else:
                handle = handles[orig.id]
                self.records.append(Record(k, "cleared", phase, orig.id, orig.tool_call_id, name, before,
                                           tokens_of(self.counter, edited), handle,
                                           reason + " (edited by the rewrite hook)", orig, {"rewritten": True}))
            first_ref = first_ref or handle
        # What the hook wrote points at the archive entry of the group's first original.
        source_ids = tuple(m.id for m in originals)
        for pos in inserted:
            m = built[pos]
            mark = ReductionMark("rewritten", first_ref, phase, source_ids=source_ids)
            built[pos] = m = Message(m.raw, m.id, m.provenance, m.ordinal, {"reduction": mark.to_dict()})
            self.records.append(Record(a, "inserted", phase, m.id, None, None, 0, tokens_of(self.counter, m),
                                       first_ref, "written by the rewrite hook"))
        self.slots[a] = built
        for k in results:
            self.slots[k] = []
        return True

    # -- helpers ----------------------------------------------------------------------------------
    def _ask(self, handlers: dict[str, Callable[[ToolDetail], Any]], name: str | None, detail: ToolDetail) -> Any:
        handler = handlers.get(name or "")
        if handler is None:
            return None
        try:
            return handler(detail)
        except Exception as exc:  # fall back to the default behaviour, but say so
            self.warn("handler_raised", f"the {detail.phase} handler for {name!r} raised {type(exc).__name__}: {exc}; "
                      "default behaviour used", message_id=detail.message.id, tool_name=name)
            return None

    def _original_size(self, msg: Message, tokens: int) -> tuple[int, int]:
        """(characters, tokens) of the original behind ``msg``: what an earlier mark recorded,
        else ``msg`` itself (``tokens`` being its current count)."""
        red0 = mark_of(msg)
        chars = red0.original_chars if red0 is not None else None
        before = red0.original_tokens if red0 is not None else None
        return (chars if chars is not None else len(document_text(msg.raw.get("content"))),
                before if before is not None else tokens)

    def _mark(self, kind: Literal["cleared", "truncated"], msg: Message, handle: str, name: str | None,
              phase: Phase, tokens: int, chars: int | None = None) -> ReductionMark:
        red0 = mark_of(msg)
        if red0 is not None and red0.original_chars is not None:
            chars = red0.original_chars
        elif chars is None:
            chars = len(document_text(msg.raw.get("content")))
        if red0 is not None and red0.original_tokens is not None:
            tokens = red0.original_tokens
        return ReductionMark(kind, handle, phase, tool_call_id=msg.tool_call_id, tool_name=name,
                             original_chars=chars, original_tokens=tokens)

    def placeholder(self, name: str | None, msg: Message, handle: str, chars: int, tokens: int, forced: bool) -> str:
        label = N.tool_label(name, self.lang)
        load = N.load_call(handle, self.lang, 0, self.policy.recovery_limit_chars)
        fields = dict(tool_name=label, tool_call_id=msg.tool_call_id or "-", handle=handle, chars=N.num(chars),
                      tokens=N.num(tokens), message_id=msg.id, load_call=load)
        custom = self.policy.clearing.placeholder
        if custom is not None and not forced:
            return custom.format(**fields)
        return N.render("force_cleaned_placeholder" if forced else "cleared_placeholder", self.lang, **fields)

    # -- result ---------------------------------------------------------------------------------------
    def result(self, abandoned: str | None = None) -> ReductionResult:
        if abandoned is not None or not self.records:
            return ReductionResult(self.messages, [], list(self.events), [], 0, 0,
                                   abandoned or "nothing to reduce")
        entries: list[ArchiveEntry] = []
        events: list[dict[str, Any]] = []
        ledger: list[ReductionLedgerRow] = []
        cleared = truncated = 0
        for r in self.records:
            if r.original is not None and r.archive_ref is not None:
                entries.append(ArchiveEntry(r.archive_ref, self.session_id, "offloaded",
                                            [item_for(r.original, tool_name=r.tool_name)],
                                            note=f"{r.phase}: {r.fate} {r.original.role} message {r.original.id}"))
            gain = r.tokens_before - r.tokens_after
            if r.fate == "truncated":
                truncated += gain
            else:
                cleared += gain
            if r.fate == "inserted":
                continue
            events.append({"type": EVENT_TRUNCATED if r.fate == "truncated" else EVENT_CLEARED,
                           "message_id": r.message_id, "tool_call_id": r.tool_call_id, "tool_name": r.tool_name,
                           "tokens_before": r.tokens_before, "tokens_after": r.tokens_after,
                           "archive_ref": r.archive_ref, "phase": r.phase, **r.extra})
            ledger.append(ReductionLedgerRow(r.message_id, r.fate, r.tokens_before, r.tokens_after, r.reason,
                                             r.archive_ref, r.phase))
        return ReductionResult(self.output(), entries, self.events + events, ledger, cleared, truncated, None)
