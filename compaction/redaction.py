"""Secrets out of text that came from elsewhere: an upstream's error message, a proxy's page.

An upstream (or a proxy in front of it) may echo the request's ``Authorization`` header in
its error body; that text reaches error messages, run records, logs and the client's error
object. ``redact`` takes out of such text

- every secret value this process knows: registered with ``register_secrets`` (the service
  registers its configured keys at startup and each connection key when it reads one; the
  summarizer registers the key it sends), and any given to the call;
- anything shaped like a credential: what the ``redact_secrets`` hook takes out of
  summaries (``compaction.hooks``: ``Bearer xxx``, ``x-api-key: xxx``, ``"api_key": "xxx"``,
  ``sk-...`` and other provider token shapes, passwords in URLs), plus an ``Authorization``
  header's bare value and this service's own ``cs_`` API keys.

What the text says otherwise (status, the provider's message) is kept. Values shorter than
``MIN_SECRET_CHARS`` are not registered: replacing every "1" or "abc" would garble the text
while protecting nothing."""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from .hooks import REDACTED, redact_secrets

MIN_SECRET_CHARS = 8

_lock = threading.Lock()
_known: frozenset[str] = frozenset()

# Shapes the summary hook leaves alone: "Authorization: xxx" without a scheme, and our own keys.
_AUTHORIZATION = re.compile(r"(?i)(?P<name>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                            r"(?!\[REDACTED\]|bearer\b|basic\b)[^\s\"',;}]{4,}")
_OWN_KEY = re.compile(r"\bcs_[A-Za-z0-9_-]{8,}")


def register_secrets(values: Iterable[str | None]) -> None:
    """Add secret values (None and values under MIN_SECRET_CHARS are ignored) to those every
    later ``redact`` takes out, in this process."""
    global _known
    fresh = {v.strip() for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS}
    if fresh <= _known:
        return
    with _lock:
        _known = _known | fresh


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without the registered secrets, ``secrets`` and credential-shaped strings."""
    if not text:
        return text
    values = set(_known)
    values.update(v.strip() for v in secrets if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS)
    # longest first: a key that contains another is taken out whole
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    text = redact_secrets(text)
    text = _AUTHORIZATION.sub(lambda m: f"{m['name']}{REDACTED}", text)
    return _OWN_KEY.sub(REDACTED, text)


def redact_json(value: object, secrets: Iterable[str | None] = ()) -> object:
    """A JSON value with ``redact`` applied to every string in it (keys included)."""
    found = tuple(secrets)
    if isinstance(value, str):
        return redact(value, found)
    if isinstance(value, dict):
        return {redact(str(k), found): redact_json(v, found) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, found) for v in value]
    return value
