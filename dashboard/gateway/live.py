"""The live context as the gateway forwards it: the wire form of every live message, as
the text of one JSON array, kept per process and extended as messages arrive.

The live context is the texts a compaction (or the import) wrote whole, then one tail row
per message appended since (``SessionContext``, ``ContextTail``). Tail rows are only ever
added until the texts are written whole again, which stamps a new version and deletes
them. So a forwarded list built for texts of stamp S up to history position P stays true,
and the next request needs only S (to know it is still current) and the tail rows from P
on: one small statement whatever the context's length, where reading the whole context
and serialising it again cost milliseconds per thousand messages on every model call.

Each entry also carries the tool-call pairing state at its end (``wire.pair_state``), so
the check that nothing broken goes upstream costs only the new messages too, and the
Responses reasoning items kept on its messages (``wire.REASONING``: not in the wire form,
sent only to an upstream that serves Responses)."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from django.db import connection

from compaction.context import render_messages
from compaction.messages import Message

from ..models import SessionContext
from ..text_repair import repaired_json_text
from .wire import pair_state, reasoning_of, wire_form

# Lists per process, least recently used dropped first above this many characters in all.
MAX_CHARS = 64 * 1024 * 1024

_HEAD_SQL = ("SELECT -1, c.version, c.updated_at, NULL FROM dashboard_sessioncontext c WHERE c.session_id = %s "
             "UNION ALL SELECT t.position, NULL, NULL, t.rendered FROM dashboard_contexttail t "
             "WHERE t.session_id = %s AND t.position >= %s ORDER BY 1")
_WHOLE_SQL = ("SELECT -1, c.version, c.updated_at, c.rendered FROM dashboard_sessioncontext c WHERE c.session_id = %s "
              "UNION ALL SELECT t.position, NULL, NULL, t.rendered FROM dashboard_contexttail t "
              "WHERE t.session_id = %s ORDER BY 1")


@dataclass(frozen=True)
class Forwarded:
    """``text``: the JSON array to send; ``count``: its messages; ``broken``: why it would be
    refused upstream for its tool calls (``wire.broken_pair``), or None; ``reasoning``: the
    reasoning items kept on its messages, by index in the list."""

    stamp: tuple[int, str]
    upto: int            # history position after the last tail row included
    text: str
    count: int
    broken: str | None
    open_calls: frozenset[str]
    reasoning: dict[int, list[dict]] = field(default_factory=dict)


def _reasoning(base: dict[int, list[dict]], raws: list[dict], first: int) -> dict[int, list[dict]]:
    """``base`` with the reasoning items of ``raws`` (messages ``first`` on) added (``base``
    itself when they have none: the usual case, copied nowhere)."""
    found = {first + k: items for k, raw in enumerate(raws) if (items := reasoning_of(raw))}
    return {**base, **found} if found else base


_CACHE: OrderedDict[int, Forwarded] = OrderedDict()
_LOCK = threading.Lock()


def _extend(base: Forwarded | None, stamp: tuple[int, str], head: list[str], rows: list[tuple[int, str]]) -> Forwarded:
    """``base`` (or nothing) followed by the head texts' messages and the tail rows'."""
    raws = [m for text in head for m in json.loads(repaired_json_text(text))]
    raws += [json.loads(repaired_json_text(rendered)) for _pos, rendered in rows]
    fresh = [wire_form(m) for m in raws]
    count = base.count if base is not None else 0
    reasoning = _reasoning(base.reasoning if base is not None else {}, raws, count)
    broken, open_calls = (base.broken, set(base.open_calls)) if base is not None else (None, set())
    if broken is None:
        broken, open_calls = pair_state(fresh, count, open_calls)
    parts = ",".join(json.dumps(m, ensure_ascii=False) for m in fresh)
    if base is None:
        text = "[" + parts + "]"
    elif parts:
        text = base.text[:-1] + ("," if base.count else "") + parts + "]"
    else:
        text = base.text
    upto = rows[-1][0] + 1 if rows else (base.upto if base is not None else 0)
    return Forwarded(stamp, upto, text, count + len(fresh), broken, frozenset(open_calls), reasoning)


def forwarded(session_id: int) -> Forwarded | None:
    """The session's live context as the wire list to forward; None when it has none."""
    with _LOCK:
        cached = _CACHE.get(session_id)
    if cached is not None:
        with connection.cursor() as cur:
            cur.execute(_HEAD_SQL, [session_id, session_id, cached.upto])
            rows = cur.fetchall()
        if not rows or rows[0][0] != -1:
            return None
        stamp = (rows[0][1], str(rows[0][2]))
        if stamp == cached.stamp:
            out = _extend(cached, stamp, [], [(r[0], r[3]) for r in rows[1:]]) if len(rows) > 1 else cached
            return _keep(session_id, out)
    with connection.cursor() as cur:
        cur.execute(_WHOLE_SQL, [session_id, session_id])
        rows = cur.fetchall()
    if not rows or rows[0][0] != -1:
        return None
    stamp = (rows[0][1], str(rows[0][2]))
    return _keep(session_id, _extend(None, stamp, [rows[0][3]], [(r[0], r[3]) for r in rows[1:]]))


def _keep(session_id: int, entry: Forwarded) -> Forwarded:
    with _LOCK:
        _CACHE[session_id] = entry
        _CACHE.move_to_end(session_id)
        total = sum(len(e.text) for e in _CACHE.values())
        while total > MAX_CHARS and len(_CACHE) > 1:
            _, dropped = _CACHE.popitem(last=False)
            total -= len(dropped.text)
    return entry


def _position(item: dict) -> int:
    ordinal = item.get("ordinal")
    return ordinal if isinstance(ordinal, int) else -1


def cut_at(session_id: int, n: int, stored: int) -> Forwarded | None:
    """The wire list of the live context as it was when the history had its first ``n`` of
    ``stored`` messages (a client resending an earlier point: see ``identity``): the live
    context without its trailing messages from position ``n`` on. None when those are not
    all there, verbatim and last (a compaction has folded one into a summary since), or
    the session has no live context. Read whole and not kept: resends are rare."""
    ctx = SessionContext.objects.filter(session_id=session_id).first()
    if ctx is None:
        return None
    items = ctx.load_items()
    keep = len(items)
    while keep and _position(items[keep - 1]) >= n and items[keep - 1].get("provenance") == "original":
        keep -= 1
    if [_position(item) for item in items[keep:]] != list(range(n, stored)):
        return None
    raws = render_messages([Message.from_dict(item) for item in items[:keep]])
    fresh = [wire_form(m) for m in raws]
    broken, open_calls = pair_state(fresh, 0, set())
    text = "[" + ",".join(json.dumps(m, ensure_ascii=False) for m in fresh) + "]"
    return Forwarded((ctx.version, str(ctx.updated_at)), n, text, len(fresh), broken, frozenset(open_calls),
                     _reasoning({}, raws, 0))
