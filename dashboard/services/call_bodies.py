"""What the call inspector keeps of each gateway call: what the client sent, the exact body
sent upstream, and the reply (``GatewayCallBody``), without a copy of the history per call.

An agent resends its whole history on every call, so a body kept as sent would store the
history again with each call (quadratic in the session's length). Here the body sent
upstream is cut at the elements of its JSON array (the forwarded messages or items): each
element's text is kept once per session as a ``GatewayPiece`` (found again by its SHA-256),
and the call keeps the ids of its pieces as runs of consecutive ids, which are few, since
pieces are created in the order messages arrive and a compaction keeps a run of them. The
text before the array (the request's other fields, the same from call to call) is a piece
too. What the client sent is kept the same way: its fields other than the messages as a
piece, its messages as the positions of the session's history they are stored at.

A rebuild (``rebuilt``) joins the pieces again and checks the SHA-256 and length of the
bytes sent, taken when the call was made: the inspector shows a body only when it is the
one that went upstream.

Expired bodies (older than ``GATEWAY_CALL_BODY_DAYS``) are deleted by ``sweep_expired``,
from a gateway call at most every ``GATEWAY_CALL_BODY_SWEEP`` seconds per process and by
``manage.py prune_call_bodies``; pieces no kept body uses go with them."""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..models import GatewayCall, GatewayCallBody, GatewayPiece

log = logging.getLogger("dashboard.gateway")

_DECODER = json.JSONDecoder()
# Digests looked up per statement (SQLite's default limit of bound variables is far above).
_CHUNK = 500


@dataclass(frozen=True)
class SentBody:
    """One request body sent upstream: ``before + array + after`` is its text, ``array``
    the text of a JSON array (the forwarded messages or items). ``data``: the bytes sent,
    when the caller has them (else the text's UTF-8). ``exact`` is False when a library
    (litellm) built the bytes from what it was handed, which is then what this holds;
    ``to`` says where it went."""

    before: str
    array: str
    after: str
    exact: bool = True
    to: str = ""
    data: bytes | None = None

    def text(self) -> str:
        return self.before + self.array + self.after

    def payload(self) -> bytes:
        return self.data if self.data is not None else self.text().encode("utf-8", "surrogatepass")


@dataclass
class CallBody:
    """What one call's inspector page shows beyond its figures, given by the endpoint to
    ``gateway_calls.record_call(body=...)``.

    ``format``: the client's API (``chat``, ``anthropic``, ``responses``, ``compact``);
    ``fields``: the request's fields other than its messages or items, as the client sent
    them; ``messages``: how many messages (in the chat form the session stores) the request
    stood for, ``added`` how many of them it stored, ``upto`` the session's history length
    after them (so they are positions ``upto - messages`` to ``upto - 1``); ``sent``: the body
    sent upstream (None when nothing was); ``reply``: what came back (a JSON value)."""

    format: str
    fields: dict[str, Any] = field(default_factory=dict)
    messages: int = 0
    added: int = 0
    upto: int = 0
    sent: SentBody | None = None
    reply: Any = None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _piece_ids(session_id: int, texts: list[str]) -> list[int]:
    """The piece id of each text (created when the session has none for it yet)."""
    digests = [_digest(t) for t in texts]
    wanted = dict(zip(digests, texts))
    found: dict[str, int] = {}
    keys = list(wanted)
    for i in range(0, len(keys), _CHUNK):
        found.update(GatewayPiece.objects.filter(session_id=session_id, digest__in=keys[i:i + _CHUNK])
                     .values_list("digest", "id"))
    missing = [d for d in keys if d not in found]
    if missing:
        # a call of the same session may be adding the same text now: whichever row wins is the piece
        GatewayPiece.objects.bulk_create([GatewayPiece(session_id=session_id, digest=d, text=wanted[d])
                                          for d in missing], ignore_conflicts=True)
        for i in range(0, len(missing), _CHUNK):
            found.update(GatewayPiece.objects.filter(session_id=session_id, digest__in=missing[i:i + _CHUNK])
                         .values_list("digest", "id"))
    return [found[d] for d in digests]


def split_array(text: str, start: int = 1) -> list[str] | None:
    """The elements' texts of the JSON array ``text`` from ``text[start]`` on (1: all of
    them; else just after a ``,``), when it is written as the gateway writes one (elements
    separated by a bare comma, no other whitespace between them); None otherwise."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    out: list[str] = []
    i, end = start, len(text) - 1
    if i == end:
        return out if start == 1 else None
    while True:
        try:
            _value, stop = _DECODER.raw_decode(text, i)
        except ValueError:
            return None
        out.append(text[i:stop])
        if stop == end:
            return out
        if text[stop] != ",":
            return None
        i = stop + 1


@dataclass
class _Split:
    array: str
    ids: list[int]
    used: float  # when a kept body last listed all of ``ids`` (see ``_cached``)


# The last array each session sent from this process and its piece ids: the next call
# usually sends it again with a few elements more, so only those are cut and looked up.
# An entry is set once the body listing its ids has committed (a rolled-back write leaves
# none), and checked against the rows before it is used (a session id SQLite gave again
# after a delete, pieces a sweep removed).
_SPLITS: OrderedDict[int, _Split] = OrderedDict()
_SPLITS_MAX = 2_000
_LOCK = threading.Lock()


def _cached(session_id: int) -> _Split | None:
    with _LOCK:
        entry = _SPLITS.get(session_id)
    if entry is None:
        return None
    # Its ids are safe while the body that listed them is kept (the sweep keeps the pieces
    # of kept bodies); well before that body expires, the entry is dropped.
    if time.time() - entry.used > _retention_seconds() / 2:
        return None
    if entry.ids:
        ends = {entry.ids[0], entry.ids[-1]}
        if GatewayPiece.objects.filter(session_id=session_id, pk__in=ends).count() != len(ends):
            return None
    return entry


def _remember(session_id: int, entry: _Split) -> None:
    with _LOCK:
        _SPLITS[session_id] = entry
        _SPLITS.move_to_end(session_id)
        while len(_SPLITS) > _SPLITS_MAX:
            _SPLITS.popitem(last=False)


def _array_ids(session_id: int, array: str, also: list[str]) -> tuple[list[int] | None, list[int]]:
    """(piece ids of the array's elements, or None when it is not cut: see ``split_array``;
    piece ids of the texts ``also``), looked up together."""
    entry = _cached(session_id)
    known: list[int] = []
    more: list[str] | None
    if entry is not None and array == entry.array:
        known, more = list(entry.ids), []
    elif (entry is not None and len(entry.array) > 2 and len(array) > len(entry.array)
          and array.startswith(entry.array[:-1]) and array[len(entry.array) - 1] == ","):
        known, more = entry.ids, split_array(array, len(entry.array))
    else:
        more = split_array(array)
    if more is None:
        return None, []
    found = _piece_ids(session_id, more + also)
    ids = known + found[:len(more)]
    transaction.on_commit(lambda: _remember(session_id, _Split(array, ids, time.time())))
    return ids, found[len(more):]


def _runs(ids: list[int]) -> list[list[int]]:
    """[[first id, how many consecutive ids], ...]"""
    runs: list[list[int]] = []
    for i in ids:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return runs


def _ids(runs: Iterable[list[int]]) -> list[int]:
    return [first + k for first, count in runs for k in range(count)]


def _retention_seconds() -> float:
    return float(settings.GATEWAY_CALL_BODY_DAYS) * 86400


def store(call: GatewayCall, body: CallBody) -> GatewayCallBody | None:
    """Keep ``body`` for ``call`` (nothing when the retention is 0). The caller's
    transaction holds it with the call's row."""
    if _retention_seconds() <= 0:
        return None
    sid = call.session_id
    fields = json.dumps(body.fields, ensure_ascii=False)
    row = GatewayCallBody(call=call, session_id=sid, reply=body.reply,
                          client={"format": body.format, "messages": body.messages, "added": body.added,
                                  "upto": body.upto})
    sent = body.sent
    if sent is not None:
        data = sent.payload()
        ids, extra = _array_ids(sid, sent.array, [sent.before, fields])
        if ids is None:  # an array not cut is kept whole, with the text before it
            extra = _piece_ids(sid, [sent.before + sent.array, fields])
        head_id, client_id = extra
        row.sent_head, row.sent_runs = head_id, _runs(ids) if ids is not None else None
        row.sent_tail, row.sent_exact, row.sent_to = sent.after, sent.exact, sent.to[:300]
        row.sent_sha256, row.sent_bytes = hashlib.sha256(data).hexdigest(), len(data)
        row.client_piece = client_id
    else:
        row.client_piece = _piece_ids(sid, [fields])[0]
    row.save(force_insert=True)
    return row


@dataclass(frozen=True)
class Rebuilt:
    """A kept body, rebuilt: ``data`` the bytes (None when a piece is gone), ``verified``
    whether they are the bytes the call sent (same SHA-256 and length)."""

    data: bytes | None
    verified: bool
    client_fields: dict[str, Any] | None


def rebuilt(body: GatewayCallBody) -> Rebuilt:
    """The body sent upstream and the client's fields, from the pieces. Two queries."""
    wanted = [i for i in (body.sent_head, body.client_piece) if i is not None]
    array_ids = _ids(body.sent_runs) if body.sent_runs is not None else []
    texts: dict[int, str] = {}
    every = wanted + array_ids
    for i in range(0, len(every), _CHUNK):
        texts.update(GatewayPiece.objects.filter(session_id=body.session_id, pk__in=every[i:i + _CHUNK])
                     .values_list("id", "text"))
    fields = json.loads(texts[body.client_piece]) if body.client_piece in texts else None
    if body.sent_head is None:
        return Rebuilt(None, False, fields)
    if any(i not in texts for i in [body.sent_head, *array_ids]):
        return Rebuilt(None, False, fields)
    array = "[" + ",".join(texts[i] for i in array_ids) + "]" if body.sent_runs is not None else ""
    data = (texts[body.sent_head] + array + body.sent_tail).encode("utf-8", "surrogatepass")
    ok = len(data) == body.sent_bytes and hashlib.sha256(data).hexdigest() == body.sent_sha256
    return Rebuilt(data, ok, fields)


# -- retention --------------------------------------------------------------------------------

_last_sweep = 0.0


def sweep_due() -> None:
    """``sweep_expired`` when this process has not run it for ``GATEWAY_CALL_BODY_SWEEP``
    seconds (called after each call's body is written; a failure is logged)."""
    global _last_sweep
    now = time.monotonic()
    if _last_sweep and now - _last_sweep < float(settings.GATEWAY_CALL_BODY_SWEEP):
        return
    _last_sweep = now
    try:
        sweep_expired()
    except Exception:  # noqa: BLE001 - the next sweep does what this one could not; a call never fails for it
        log.exception("could not delete expired gateway call bodies")


def sweep_expired() -> tuple[int, int]:
    """Delete the call bodies older than the retention and the pieces no kept body uses:
    (bodies, pieces) deleted. One transaction per session touched."""
    cutoff = timezone.now() - timedelta(seconds=_retention_seconds())
    expired = GatewayCallBody.objects.filter(created_at__lt=cutoff)
    sessions = sorted(set(expired.values_list("session_id", flat=True)))
    bodies = pieces = 0
    for sid in sessions:
        with transaction.atomic():
            bodies += GatewayCallBody.objects.filter(session_id=sid, created_at__lt=cutoff).delete()[0]
            pieces += _drop_unused(sid)
    with _LOCK:
        for sid in sessions:
            _SPLITS.pop(sid, None)
    return bodies, pieces


def _drop_unused(session_id: int) -> int:
    used: set[int] = set()
    for head, client, runs in GatewayCallBody.objects.filter(session_id=session_id).values_list(
            "sent_head", "client_piece", "sent_runs"):
        used.update(i for i in (head, client) if i is not None)
        for first, count in runs or []:
            used.update(range(first, first + count))
    unused = [pk for pk in GatewayPiece.objects.filter(session_id=session_id).values_list("id", flat=True)
              if pk not in used]
    for i in range(0, len(unused), _CHUNK):
        GatewayPiece.objects.filter(pk__in=unused[i:i + _CHUNK]).delete()
    return len(unused)
