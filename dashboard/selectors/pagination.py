"""Cursor pagination: the cursor is an opaque token holding the last key of the page."""
from __future__ import annotations

import base64
import json

from django.conf import settings

from ..services import ServiceError

MAX_KEY = 2**63 - 1


def encode_cursor(key: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"k": key}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))["k"]
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
