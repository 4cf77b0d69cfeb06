"""Cursor pagination: the cursor is an opaque token holding the last key of the page."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from compaction import jsontext

from ..services import ServiceError

MAX_KEY = 2**63 - 1


def encode_cursor(key: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"k": key}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = jsontext.loads(base64.urlsafe_b64decode(padded.encode("ascii")))["k"]
        if not isinstance(key, int) or isinstance(key, bool) or not (-1 <= key <= MAX_KEY):
            raise ValueError
        return key
    except (ValueError, KeyError, TypeError, UnicodeError, json.JSONDecodeError):
        raise ServiceError("invalid cursor: pass the next_cursor value of a previous page", status=400) from None


def clamp_limit(limit: int | None) -> int:
    if limit is None:
        return settings.API_PAGE_SIZE
    return max(1, min(int(limit), settings.API_MAX_PAGE_SIZE))


def paginate(qs, cursor: str | None, limit: int | None, key: str = "id", descending: bool = False):
    """(items, next_cursor). ``key`` must be unique and indexed within ``qs``."""
    limit = clamp_limit(limit)
    after = decode_cursor(cursor)
    if after is not None:
        qs = qs.filter(**{f"{key}__lt" if descending else f"{key}__gt": after})
    qs = qs.order_by(f"-{key}" if descending else key)
    items = list(qs[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    nxt = encode_cursor(getattr(items[-1], key)) if more and items else None
    return items, nxt


# -- keyset cursors for lists sorted on any column -----------------------------------------
# A sorted list pages on (sort value, id): the cursor holds both, so a page never repeats or
# skips a row when many rows share a value. Datetimes travel as ISO text with a type tag.

SortValue = int | float | str | datetime | None


def encode_keyset(value: SortValue, key: int) -> str:
    if isinstance(value, datetime):
        payload: dict[str, object] = {"v": value.isoformat(), "t": "dt", "k": key}
    else:
        payload = {"v": value, "k": key}
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def decode_keyset(cursor: str | None) -> tuple[SortValue, int] | None:
    """(sort value, id) of a keyset cursor; None for no cursor. Raises ServiceError."""
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = jsontext.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        key, value = data["k"], data["v"]
        if not isinstance(key, int) or isinstance(key, bool) or not (-1 <= key <= MAX_KEY):
            raise ValueError
        if data.get("t") == "dt":
            parsed = parse_datetime(value) if isinstance(value, str) else None
            if parsed is None:
                raise ValueError
            return parsed, key
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float | str)):
            raise ValueError
        return value, key
    except (ValueError, KeyError, TypeError, UnicodeError, json.JSONDecodeError):
        raise ServiceError("invalid cursor: follow the page links instead of editing the cursor", status=400) from None


@dataclass(frozen=True)
class KeysetPage:
    items: list[Any]
    next_cursor: str | None
    prev_cursor: str | None


def keyset_page(qs: QuerySet[Any], field: str, *, descending: bool, cursor: str | None = None,
                prev: str | None = None, limit: int = 25) -> KeysetPage:
    """One page of ``qs`` ordered on ``field`` (never null: coalesce it in an annotation),
    ties broken by id in the same direction. ``cursor`` pages forward from a row,
    ``prev`` back towards the first page. Raises ServiceError on a damaged cursor."""
    after, before = decode_keyset(cursor), decode_keyset(prev)
    backwards = before is not None and after is None
    edge = before if backwards else after
    # Walking backwards is walking forwards in the opposite order, then flipping the page.
    down = descending != backwards
    order = [f"-{field}", "-id"] if down else [field, "id"]
    if edge is not None:
        value, key = edge
        op = "lt" if down else "gt"
        qs = qs.filter(Q(**{f"{field}__{op}": value}) | Q(**{field: value, f"id__{op}": key}))
    items = list(qs.order_by(*order)[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    if backwards:
        items.reverse()
        has_next, has_prev = True, more
    else:
        has_next, has_prev = more, edge is not None

    def token(obj: Any) -> str:
        return encode_keyset(getattr(obj, field), obj.pk)

    return KeysetPage(items=items, next_cursor=token(items[-1]) if items and has_next else None,
                      prev_cursor=token(items[0]) if items and has_prev else None)
