"""Sessions: import, append, delete.

Token counts and content hashes are computed once, when a message is written; the
session row keeps running totals, so the trigger check after an append reads numbers.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from compaction import Policy
from compaction.context import render_messages
from compaction.errors import SessionValidationError
from compaction.formats import FORMATS, ImportedSession, convert, convert_many, detect_format
from compaction.messages import (
    CallTracker,
    Message,
    Provenance,
    original_id,
    validate_message,
    validate_tools,
)
from compaction.reduction.pipeline import on_append
from compaction.triggers import ConditionResult, evaluate

from ..models import (
    CompactionRun,
    ContextTail,
    Project,
    RunStatus,
    Session,
    SessionContext,
    StoredMessage,
    TriggerKind,
)
from . import Conflict, Invalid, pins
from .archive import store_entries
from .branches import clean_key, split_filter_keys
from .common import (
    add_totals,
    clean_text,
    context_item,
    counter_for,
    empty_totals,
    insert_rows,
    insert_values,
    now,
    text_problem,
    update_row,
    with_total,
)
from .policies import apply_service_defaults, effective_policy, project_policy
from .runs import pending_run, request_run

# The session page and detail read a session's trigger state through this module.
from .triggers import check_trigger as check_trigger
from .triggers import clearing_due, overflow_due, trigger_state


class ImportInvalid(Invalid):
    """An import that names the file, line or index and the fault."""

    # Text that is not JSON at all (or not text) is a malformed request, not bad content.
    MALFORMED = frozenset({"bad_json", "bad_encoding"})

    def __init__(self, exc: SessionValidationError):
        if exc.fault == "too_many_messages":
            super().__init__(f"{exc} (IMPORT_MAX_MESSAGES={settings.IMPORT_MAX_MESSAGES})", status=413)
        else:
            super().__init__(str(exc), status=400 if exc.fault in self.MALFORMED else None)
        self.fault = exc.fault
        self.index = exc.index
        self.line = getattr(exc, "line", None)
        self.source = exc.source
        if exc.field is not None and exc.index is not None and self.line is None:
            # The body's path to the value at fault, e.g. messages[3].content
            self.field = f"messages[{exc.index}].{exc.field}"
        elif exc.fault == "too_many_messages":
            self.field = "messages"


def too_many_messages(count: int, source: str | None = None) -> ImportInvalid:
    """The 413 of a session over IMPORT_MAX_MESSAGES (worded as the engine words it)."""
    limit = settings.IMPORT_MAX_MESSAGES
    return ImportInvalid(SessionValidationError(
        f"the session holds {count:,} messages, more than {limit:,}, the most one import may hold",
        fault="too_many_messages", source=source))


class EmptyImport(Invalid):
    """An import without a single message (the answer names the ``messages`` field)."""

    field = "messages"


@dataclass
class WriteResult:
    session: Session
    trigger: ConditionResult | None = None
    run: CompactionRun | None = None
    run_created: bool = False
    positions: list[int] = field(default_factory=list)


# -- conversion ---------------------------------------------------------------------------

#: Formats whose ``messages`` in an API body are chat messages (wrapped with ``tools`` and
#: ``system``); every other format reads the list as its own records.
MESSAGE_LIST_FORMATS = frozenset({"openai", "openai_jsonl", "anthropic"})


def convert_payload(messages: Any, *, tools: list | None = None, system: Any = None, format: str | None = None,
                    title: str | None = None, external_id: str | None = None, model: str | None = None,
                    source: str | None = None, metadata: dict | None = None) -> ImportedSession:
    """Turn an API import body into one ImportedSession (compaction.formats does the work).
    ``metadata``: what the body said about the session (corpus keys, OpenAI ``metadata``)."""
    if format is not None and format not in FORMATS:
        raise Invalid(f"format: unknown format {format!r} (expected one of {', '.join(FORMATS)})")
    try:
        if isinstance(messages, (str, bytes)):
            payload: Any = messages
        else:
            fmt = format
            if fmt is None and isinstance(messages, list) and messages:
                fmt = detect_format(messages)
            if fmt not in MESSAGE_LIST_FORMATS:
                payload = messages  # records (Claude Code lines, trace spans, runs), not messages
            else:
                payload = {"messages": messages}
                if tools:
                    payload["tools"] = tools
                if system is not None:
                    payload["system"] = system
            format = fmt
        # JSONL text is read line by line and kept as text (see services docs: IMPORT_CHUNK_MESSAGES)
        imported = convert(payload, format=format, source=source, stream=True,
                           max_messages=settings.IMPORT_MAX_MESSAGES)
        if tools and not imported.tools:
            imported.tools = validate_tools(tools, source)
    except SessionValidationError as exc:
        raise ImportInvalid(exc) from None
    if title:
        imported.title = title
    if external_id:
        imported.external_id = external_id
    if model:
        imported.model = model
    if metadata:
        imported.metadata = {**imported.metadata, **metadata}
    return imported


def convert_file_payload(data: bytes, *, format: str | None = None, source: str | None = None) -> list[ImportedSession]:
    try:
        return convert_many(data, format=format, source=source, stream=True,
                            max_messages=settings.IMPORT_MAX_MESSAGES)
    except SessionValidationError as exc:
        raise ImportInvalid(exc) from None


# -- tool output truncated on arrival (the engine's CompactionSession does the same) ---------------

def _arrival(policy, counter, session_id: int, msgs: list[Message], tokens: list,
             names: dict[str, str]) -> tuple[list[Message], list, list]:
    """Live copies of newly arrived messages: a tool result over the policy's size limit
    becomes a head + tail preview; its untouched original goes to an archive entry
    (written by the caller in the same transaction). Returns (messages, tokens, entries)."""
    red = policy.reduction
    if not red.enabled or not red.truncation.enabled or not any(m.role == "tool" for m in msgs):
        return msgs, tokens, []

    out_msgs, out_tokens, entries = list(msgs), list(tokens), []
    for k, m in enumerate(msgs):
        if m.role != "tool":
            continue
        rr = on_append(m, policy=red, counter=counter, session_id=str(session_id),
                       tool_name=names.get(m.tool_call_id or ""))
        if rr.abandoned or not rr.entries:
            continue
        new = rr.messages[-1]
        out_msgs[k] = new
        out_tokens[k] = counter.count(new)
        entries.extend(rr.entries)
    return out_msgs, out_tokens, entries


def _call_names(raws: Iterable[dict]) -> dict[str, str]:
    names = {}
    for raw in raws:
        for call in raw.get("tool_calls") or []:
            names[call.get("id", "")] = (call.get("function") or {}).get("name", "")
    return names


# -- import -------------------------------------------------------------------------------------

def _check_fields(imported: ImportedSession, source: str | None) -> None:
    where = f"{source}: " if source else ""
    for name, value, limit in (("external_id", imported.external_id, 500), ("model", imported.model, 200)):
        if value is None:
            continue
        if len(value) > limit:
            raise Invalid(f"{where}{name} is longer than {limit} characters")
        problem = text_problem(value)
        if problem:
            raise Invalid(f"{where}{name} {problem}")


def _dumps(value) -> str:
    # ASCII escapes: the text survives any database (PostgreSQL refuses NUL in text).
    return json.dumps(value, separators=(",", ":"))


def _tool_names(raw: dict) -> str:
    names = [(c.get("function") or {}).get("name", "") for c in raw.get("tool_calls") or []]
    return clean_text(",".join(n for n in names if n))[:1000]


def _message_row(session: Session, position: int, raw: dict, tokens, digest: str,
                 filter_key: str | None = None) -> StoredMessage:
    return StoredMessage(session=session, position=position, role=raw["role"], raw=raw,
                   tool_call_id=clean_text(raw.get("tool_call_id") or "")[:255], tool_names=_tool_names(raw),
                   tokens=tokens.total, tokens_by_category=dict(tokens.by_category), content_hash=digest,
                   filter_key=filter_key)


def _check_keys(filter_keys: list | None, n: int) -> list:
    """One filter key (or None) per message; [None] * n when none were given."""
    if filter_keys is None:
        return [None] * n
    if len(filter_keys) != n:
        raise Invalid(f"filter_key: {len(filter_keys)} filter keys for {n} messages; the keys must map one to one "
                      f"to the stored messages (give them beside OpenAI-format messages)")
    return list(filter_keys)


def _trigger_key(keys: list) -> str | None:
    """The filter key a write triggers a run with: the last keyed message's."""
    return next((k for k in reversed(keys) if k), None)


def import_request(project: Project, messages: Any, *, filter_key: str | None = None, pinned: list | None = None,
                   tools: list | None = None, system: Any = None, format: str | None = None, title: str | None = None,
                   external_id: str | None = None, model: str | None = None, auto_compact: bool = True,
                   metadata: dict | None = None) -> WriteResult:
    """An import as a client sends it: messages that may carry ``filter_key`` and ``pinned``
    beside their fields (or a body-level key and pin list), converted from any supported
    format. Branch keys and pins need OpenAI-format messages that map one to one to the
    stored ones; anything else is refused naming the field, before anything is written."""
    messages, pins_at = pins.split_pins(messages, pinned)
    messages, keys = split_filter_keys(messages, filter_key)
    imported = convert_payload(messages, tools=tools, system=system, format=format, title=title,
                               external_id=external_id, model=model, metadata=metadata)
    if keys is None and filter_key:
        keys = [clean_key(filter_key)] * len(imported.messages)
    elif keys is not None and (imported.format != "openai" or len(imported.messages) != len(keys)):
        raise Invalid(f"filter_key: filter keys need OpenAI-format messages that map one to one to the stored "
                      f"messages (format {imported.format!r}, {len(keys)} messages given, "
                      f"{len(imported.messages)} converted)")
    if pins_at and imported.format != "openai":
        raise pins.PinInvalid(f"pinned: pins need OpenAI-format messages that map one to one to the stored messages "
                              f"(format {imported.format!r})")
    return import_session(project, imported, auto_compact=auto_compact, filter_keys=keys, pinned=pins_at)


def import_session(project: Project, imported: ImportedSession, *, auto_compact: bool = True,
                   source: str | None = None, filter_keys: list | None = None,
                   pinned: set[int] | None = None, chunk_size: int | None = None) -> WriteResult:
    """Create a session from converted messages. Atomic: on any fault nothing is written.
    ``filter_keys``: one branch filter key (or None) per message; ``pinned``: positions of
    messages kept through every compaction (see services.pins).

    The messages are counted and written ``chunk_size`` (IMPORT_CHUNK_MESSAGES) at a time
    (see :class:`_ImportWriter`), so the time an import takes grows with its length and its
    memory does not (JSONL text is parsed again one chunk at a time); a session over
    IMPORT_MAX_MESSAGES is refused with 413 before anything is written."""
    n = len(imported.messages)
    if not n:
        # A session starts with its first message: an empty one has nothing to count or compact.
        raise EmptyImport(f"{source + ': ' if source else ''}messages: an import needs at least one message")
    if n > settings.IMPORT_MAX_MESSAGES:
        raise too_many_messages(n, source)
    _check_fields(imported, source)
    keys = _check_keys(filter_keys, n)
    pins.check_pins(pinned or set(), n)
    base, _row = project_policy(project)
    probe = Session(project=project, model=imported.model or "")
    policy = apply_service_defaults(base, probe)
    counter = counter_for(policy)
    tools = imported.tools or []
    tools_tokens = counter.count_tools(tools)
    size = chunk_size or settings.IMPORT_CHUNK_MESSAGES
    stamp = now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                # the token totals and open calls are known once every chunk is counted (finish())
                session = Session.objects.create(
                    project=project, title=clean_text(imported.title or "")[:500],
                    external_id=imported.external_id or "", model=imported.model or "",
                    metadata=imported.metadata, source_format=imported.format or "", tools=tools, tools_tokens=tools_tokens,
                    tokenizer=counter.name, message_count=n, context_messages=n, context_version=1,
                    messages_since_summary=n, last_message_at=stamp)
        except IntegrityError:
            raise Conflict(f"a session with external_id {imported.external_id!r} already exists in this project") from None
        writer = _ImportWriter(session, policy, counter, keys, pinned or set(), stamp)
        for start, raws in _chunks(imported.messages, size):
            writer.add(start, raws)
        writer.finish()
        result = WriteResult(session=session, positions=list(range(n)))
        if auto_compact:
            _check_trigger(session, policy, result, last_message_at=None, filter_key=_trigger_key(keys))
    return result


def _chunks(messages: Iterable[dict], size: int) -> Iterator[tuple[int, list[dict]]]:
    """(position of the first, messages) of each ``size`` messages in order."""
    it, start = iter(messages), 0
    while chunk := list(islice(it, size)):
        yield start, chunk
        start += len(chunk)


# Columns of a StoredMessage row as an import writes them (the values _message_row's
# instance would be stored as, prepared without building the instance).
_MESSAGE_COLUMNS = ("session_id", "position", "role", "raw", "tool_call_id", "tool_names", "tokens",
                    "tokens_by_category", "content_hash", "filter_key", "created_at")


class _ImportWriter:
    """Writes an imported session one chunk of messages at a time, inside the caller's
    transaction: their history rows, any archive entries of tool output truncated on
    arrival, and the live context's two JSON texts, kept as one text per chunk until
    :meth:`finish` writes them. What is kept between chunks is running totals, the open
    tool calls and the names of calls not answered yet, never the chunks' messages, so
    the cost of a chunk does not depend on how many came before it. The stored rows and
    texts are those the whole session written at once gave: the texts are the JSON lists
    of per-message pieces, and every message of an import is an original, so rendering
    the context (``render_messages``, which only merges summaries) is message by message."""

    def __init__(self, session: Session, policy: Policy, counter, keys: list, pinned: set[int], stamp) -> None:
        self.session, self.policy, self.counter, self.keys, self.pinned = session, policy, counter, keys, pinned
        self.created = StoredMessage._meta.get_field("created_at").get_db_prep_save(stamp, connection)
        self.history = empty_totals()
        self.live = empty_totals()
        self.truncated = False
        self.tracker = CallTracker()
        self.names: dict[str, str] = {}  # tool name of each call whose result has not come yet
        self.items: list[str] = []
        self.rendered: list[str] = []

    def add(self, start: int, raws: list[dict]) -> None:
        counter, session = self.counter, self.session
        msgs = [Message(raw, original_id(start + k), Provenance.ORIGINAL, start + k) for k, raw in enumerate(raws)]
        pins.pin(msgs, {p - start for p in self.pinned if start <= p < start + len(raws)})
        # not kept in the process's count cache: a run takes these counts from the stored context
        tokens = counter.count_many(msgs, remember=False)
        texts = [_dumps(raw) for raw in raws]  # the stored raw, and the rendered message unless truncated
        for k, raw in enumerate(raws):
            self.tracker.feed(raw, start + k)  # already validated by convert; this recovers the open calls
        keys = self.keys
        insert_values(StoredMessage, _MESSAGE_COLUMNS, (
            [session.pk, start + k, m.raw["role"], text, clean_text(m.raw.get("tool_call_id") or "")[:255],
             _tool_names(m.raw), t.total, _dumps(dict(t.by_category)), m.hash, keys[start + k], self.created]
            for k, (m, t, text) in enumerate(zip(msgs, tokens, texts))))
        for t in tokens:
            add_totals(self.history, t.by_category)
        self.names.update(_call_names(raws))
        live, live_tokens, entries = _arrival(self.policy, counter, session.pk, msgs, tokens, self.names)
        for raw in raws:
            if raw.get("role") == "tool":
                self.names.pop(raw.get("tool_call_id") or "", None)  # a call is answered once
        if entries:
            store_entries(entries, session=session)
            self.truncated = True
        for t in live_tokens:
            add_totals(self.live, t.by_category)
        name = counter.name
        self.items.append(",".join(_dumps(context_item(m, t, name)) for m, t in zip(live, live_tokens)))
        rendered = render_messages(live)
        self.rendered.append(",".join(text if new is m.raw else _dumps(new)
                                      for m, new, text in zip(msgs, rendered, texts)))

    def finish(self) -> None:
        """The session's totals and open calls, and the live context's texts."""
        session = self.session
        history = with_total(self.history)
        session.history_tokens = history
        session.history_total = history["total"]
        session.open_tool_calls = dict(self.tracker.open)
        if self.truncated:  # tool output over the size limit: its preview is what the context holds
            context = with_total(dict(self.live, tools=session.tools_tokens))
            session.context_tokens = context
            session.context_total = context["total"]
            session.tokens_since_summary = sum(v for k, v in self.live.items() if k != "total")
        else:
            session.context_tokens = with_total(dict(self.history, tools=session.tools_tokens))
            session.context_total = history["total"] + session.tools_tokens
            session.tokens_since_summary = history["total"]
        update_row(session, _IMPORT_TOTALS)
        items, self.items = "[" + ",".join(self.items) + "]", []
        rendered, self.rendered = "[" + ",".join(self.rendered) + "]", []
        SessionContext.objects.create(session=session, version=1, items=items, rendered=rendered)


_IMPORT_TOTALS = ["history_tokens", "history_total", "open_tool_calls", "context_tokens", "context_total",
                  "tokens_since_summary", "updated_at"]


# -- append -------------------------------------------------------------------------------------

def append_messages(session: Session, raws: list[dict], *, auto_compact: bool = True,
                    filter_keys: list | None = None, pinned: set[int] | None = None,
                    policy: Policy | None = None, locked: bool = False) -> WriteResult:
    """Append original messages to the history and the live context.

    Validation (shape and tool-call pairing against the session so far) happens under the
    session lock, so concurrent appends are applied one after the other, in full or not
    at all. Tokens are counted before the lock (they depend only on the message).
    ``filter_keys``: one branch filter key (or None) per message; ``pinned``: positions (in
    ``raws``) of messages kept through every compaction (see services.pins); ``policy``:
    the session's effective policy when the caller has it already (one request, one read);
    ``locked``: the caller's transaction already holds ``session``'s row lock and read the row
    under it (then nothing is read again, and a failure here fails the caller's transaction,
    which it must let end: there is no savepoint of its own).
    """
    if not isinstance(raws, list) or not raws:
        raise Invalid("messages: give at least one message")
    keys = _check_keys(filter_keys, len(raws))
    pins.check_pins(pinned or set(), len(raws))
    for k, raw in enumerate(raws):
        try:
            validate_message(raw, k)
        except SessionValidationError as exc:
            raise ImportInvalid(SessionValidationError(str(exc).split(": ", 1)[-1], index=k, fault=exc.fault,
                                                       source=f"messages[{k}]", field=exc.field)) from None
    if policy is None:
        policy, _row = effective_policy(session)
    counter = counter_for(policy)
    probe = [Message(raw, "probe", Provenance.ORIGINAL, 0) for raw in raws]
    tokens = counter.count_many(probe)
    digests = [m.hash for m in probe]
    if locked and not transaction.get_connection().in_atomic_block:
        raise RuntimeError("append_messages(locked=True) needs the caller's transaction that holds the lock")
    with transaction.atomic(savepoint=not locked):
        row = session if locked else Session.objects.select_for_update().get(pk=session.pk)
        start = row.message_count
        _check_pairs(row, raws, start)
        stamp = now()
        previous_message_at = row.last_message_at
        insert_rows(StoredMessage, [_message_row(row, start + k, raw, t, d, keys[k])
                                    for k, (raw, t, d) in enumerate(zip(raws, tokens, digests))])
        new_msgs = pins.pin([Message(raw, original_id(start + k), Provenance.ORIGINAL, start + k)
                             for k, raw in enumerate(raws)], pinned or set())
        live, live_tokens, entries = _arrival(policy, counter, row.pk, new_msgs, tokens,
                                              _names_for(row, raws))
        store_entries(entries, session=row)
        version = row.context_version + 1
        _add_to_context(row, start, live, live_tokens, version, counter.name)

        added = empty_totals()
        for t in tokens:
            add_totals(added, t.by_category)
        added_live = empty_totals()
        for t in live_tokens:
            add_totals(added_live, t.by_category)
        row.history_tokens = with_total(add_totals(dict(row.history_tokens), added))
        row.history_total = row.history_tokens["total"]
        row.context_tokens = with_total(add_totals(dict(row.context_tokens), added_live))
        row.context_total = row.context_tokens["total"]
        row.message_count = start + len(raws)
        row.context_messages += len(raws)
        row.context_version = version
        row.tokens_since_summary += sum(t.total for t in live_tokens)
        row.messages_since_summary += len(raws)
        row.last_message_at = stamp
        # only what an append changes: the row also holds the tool schemas and metadata,
        # which an append has no reason to serialise and write again
        update_row(row, _APPEND_FIELDS)
        result = WriteResult(session=row, positions=list(range(start, start + len(raws))))
        if auto_compact:
            _check_trigger(row, policy, result, last_message_at=previous_message_at,
                           filter_key=_trigger_key(keys))
    return result


_APPEND_FIELDS = ["open_tool_calls", "history_tokens", "history_total", "context_tokens", "context_total",
                  "message_count", "context_messages", "context_version", "tokens_since_summary",
                  "messages_since_summary", "last_message_at", "updated_at"]


def _add_to_context(session: Session, start: int, live: list[Message], tokens: list, version: int,
                    counter: str) -> None:
    """Add appended messages to the live context: one tail row each, so the cost does not
    depend on the context's length. A system or developer message is the exception: a summary
    injected into the system message may move into it, so the whole list is rendered again
    (rare; the caller holds the session lock)."""
    items = [context_item(m, t, counter) for m, t in zip(live, tokens)]
    if any(m.role in ("system", "developer") for m in live):
        ctx = SessionContext.objects.select_for_update().get(session_id=session.pk)
        everything = ctx.load_items() + items
        ctx.write_whole(_dumps(everything), _dumps(render_messages([Message.from_dict(i) for i in everything])),
                        version)
        return
    insert_rows(ContextTail, [ContextTail(session=session, position=start + k, item=_dumps(item),
                                          rendered=_dumps(m.raw)) for k, (m, item) in enumerate(zip(live, items))])


def _names_for(session: Session, raws: list[dict]) -> dict[str, str]:
    """Tool name of each call a new tool result answers (calls in this batch or earlier)."""
    names = _call_names(raws)
    wanted = {r.get("tool_call_id") for r in raws if r.get("role") == "tool"} - set(names)
    positions = {int(p) for cid, p in (session.open_tool_calls or {}).items() if cid in wanted}
    if positions:
        for raw in StoredMessage.objects.filter(session=session, position__in=positions).values_list("raw", flat=True):
            names.update(_call_names([raw]))
    return names


def _check_pairs(session: Session, raws: list[dict], start: int) -> None:
    """Tool-call pairing of the new messages against the session (CallTracker semantics)."""
    tracker = CallTracker()
    tracker.open = {k: int(v) for k, v in (session.open_tool_calls or {}).items()}
    ids = set()
    for raw in raws:
        if raw.get("role") == "tool" and raw.get("tool_call_id"):
            ids.add(raw["tool_call_id"])
        for call in raw.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.add(call["id"])
    answered = set(StoredMessage.objects.filter(session=session, tool_call_id__in=list(ids))
                   .values_list("tool_call_id", flat=True)) if ids else set()
    tracker.seen = set(tracker.open) | answered
    for k, raw in enumerate(raws):
        try:
            tracker.feed(raw, start + k)
        except SessionValidationError as exc:
            detail = str(exc).split(": ", 1)[-1]
            raise ImportInvalid(SessionValidationError(f"{detail} (would be position {start + k})", index=k,
                                                       fault=exc.fault, source=f"messages[{k}]")) from None
    session.open_tool_calls = dict(tracker.open)


# -- trigger --------------------------------------------------------------------------------------

def _check_trigger(session: Session, policy, result: WriteResult, last_message_at,
                   filter_key: str | None = None) -> None:
    state = trigger_state(session, policy, last_message_at)
    fired = evaluate(policy.trigger, state)
    result.trigger = fired
    reduce = clearing_due(policy, state)
    overflow = overflow_due(state)
    if not fired.fired and not reduce and not overflow:
        return
    if not overflow and session.history_total < session.rearm_at_total:
        # The last run found too little to free: wait for that many new tokens (hysteresis),
        # instead of queueing a run per append that would skip again.
        return
    existing = pending_run(session)
    if existing is not None:
        # A queued or running run will compact this context (or re-check the trigger).
        result.run = existing
        return
    reason = (fired.reason if fired.fired else
              "overflow guard: the context does not fit the usable window" if overflow else
              "tool-output clearing threshold passed")
    result.run = request_run(session, trigger=TriggerKind.AUTO, force=False, reason=reason,
                             filter_key=filter_key)
    result.run_created = True


# -- other writes ----------------------------------------------------------------------------------

def update_session(session: Session, *, title: str | None = None) -> Session:
    if title is not None:
        Session.objects.filter(pk=session.pk).update(title=clean_text(title)[:500])
        session.title = clean_text(title)[:500]
    return session


def delete_session(session: Session) -> None:
    """Deletes the history, live context, runs and archive. A run executing meanwhile
    finds the session gone at commit and writes nothing."""
    Session.objects.filter(pk=session.pk).delete()


def pending_statuses() -> tuple[str, str]:
    return (RunStatus.QUEUED, RunStatus.RUNNING)


# -- the request prefix served (cache-safe summary requests) ----------------------------------------

# {session id: (version, updated_at) of the context this process last recorded as served}
_SERVED: dict[int, tuple] = {}
_SERVED_MAX = 100_000


def served_already(session_id: int, stamp: tuple) -> bool:
    """Whether this process recorded the context version of ``stamp`` as served."""
    return _SERVED.get(session_id) == stamp


def record_served(session_id: int, version: int, upto: int, stamp: tuple | None = None) -> bool:
    """Remember that GET .../context served version ``version``: the stored texts, then the
    tail rows below history position ``upto``. That list becomes the session's stored
    request prefix (``SessionContext.served_messages``), which runs pass to the engine as
    ``parent_request`` for cache-safe summary requests. One conditional UPDATE of two
    numbers (the list is kept by reference), only while the version is still current;
    skipped when this process already recorded that version."""
    stamp = stamp or (version,)
    if _SERVED.get(session_id) == stamp:
        return False
    updated = (SessionContext.objects.filter(session_id=session_id, session__context_version=version)
               .exclude(served_version=version)
               .update(served="", served_version=version, served_upto=upto))
    if len(_SERVED) >= _SERVED_MAX:
        _SERVED.clear()
    _SERVED[session_id] = stamp
    return bool(updated)
