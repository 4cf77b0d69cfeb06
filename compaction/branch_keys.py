"""Filter keys: ``/``-separated paths naming a branch of a session (``"shop/search"``).

Matching is hierarchical and works on whole path segments, in both directions: a key
relates to its ancestors and its descendants, never to a sibling that merely shares a
prefix. Pure functions on strings, so the policy can clean its allowlist with the same
rules the branch summaries apply (see :mod:`compaction.branches`).
"""
from __future__ import annotations

from collections.abc import Iterable

ALL = ""            # key of the whole-session summary
DELIMITER = "/"


def normalize_key(key: str | None) -> str:
    """``None`` and blank mean the whole session; surrounding spaces and slashes are dropped."""
    if key is None:
        return ALL
    if not isinstance(key, str):
        raise TypeError(f"a filter key is a string, not {type(key).__name__}")
    return key.strip().strip(DELIMITER)


def normalize_allowlist(keys: Iterable[str]) -> list[str]:
    """Cleaned allowlist: blank entries dropped (so ``[""]`` means "no branch keys"), duplicates removed."""
    out: list[str] = []
    for k in keys:
        key = normalize_key(k)
        if key and key not in out:
            out.append(key)
    return out


def keys_related(a: str, b: str) -> bool:
    """True when one key is the other or an ancestor of it, segment by segment."""
    a2, b2 = normalize_key(a) + DELIMITER, normalize_key(b) + DELIMITER
    return a2.startswith(b2) or b2.startswith(a2)


def is_allowed(key: str | None, allowlist: list[str] | None) -> bool:
    """Whether ``key`` may get its own summary under ``allowlist`` (None = every key)."""
    key = normalize_key(key)
    if key == ALL or allowlist is None:
        return True
    return any(keys_related(key, allowed) for allowed in allowlist)


def branch_key(app: str, *segments: str) -> str:
    """``branch_key("shop", "search")`` -> ``"shop/search"``."""
    parts = [normalize_key(app)] + [normalize_key(s) for s in segments]
    if not parts[0]:
        raise ValueError("the application name of a filter key must not be empty")
    return DELIMITER.join(p for p in parts if p)


def check_key(key: str | None, app: str | None = None) -> str:
    """Normalise ``key`` and, when ``app`` is given, require the ``app/`` prefix (or ``app`` itself)."""
    key = normalize_key(key)
    if key and app:
        app = normalize_key(app)
        if key != app and not key.startswith(app + DELIMITER):
            raise ValueError(f"filter key {key!r} must start with the application prefix {app + DELIMITER!r}")
    return key


def summary_targets(trigger_key: str | None, allowlist: list[str] | None, cascade: bool) -> list[str]:
    """Keys whose summaries a trigger on ``trigger_key`` refreshes (the branch first, then ``ALL``)."""
    key = normalize_key(trigger_key)
    if key == ALL:
        return [ALL]
    targets = [key] if is_allowed(key, allowlist) else []
    if cascade:
        targets.append(ALL)
    return targets


def belongs(message_key: str | None, key: str) -> bool:
    """Whether a message keyed ``message_key`` is part of the summary of ``key``."""
    key = normalize_key(key)
    if key == ALL:
        return True
    if message_key is None or normalize_key(message_key) == ALL:
        return False
    return keys_related(message_key, key)
