"""Idempotency keys: a client that may retry a request (a timeout, a dropped connection)
sends ``Idempotency-Key: <its own unique string>``; the first answer to that key is stored
and every repeat of the same request with the same key, from the same project, within a day
gets that answer again without doing anything.

The same key with a different request (method, path or body) is a client mistake and is
refused (422 naming the header) rather than answered with another request's result. Only
successful answers are stored, so a request refused for a fixable reason can be retried
with its key."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction

from compaction import jsontext

from ..models import IdempotencyKey, Project
from . import Invalid
from .common import now

HEADER = "Idempotency-Key"
KEY_LIFETIME = timedelta(hours=24)
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Stored:
    status: int
    response: dict[str, Any]


def clean_key(raw: str | None) -> str | None:
    """The header's value, or None when absent; an empty or overlong key is refused."""
    if raw is None:
        return None
    key = raw.strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise _invalid(f"{HEADER}: expected 1 to {MAX_KEY_LENGTH} characters")
    return key


def request_digest(method: str, path: str, body: bytes) -> str:
    """SHA-256 of the request; a JSON body is canonicalized so key order and spacing do
    not make a retry look like another request."""
    try:
        canonical = json.dumps(jsontext.loads(body or b"null", max_depth=None), sort_keys=True,
                               separators=(",", ":")).encode()
    except (ValueError, RecursionError):  # not JSON the API takes (it answers 400): the bytes as sent
        canonical = body
    h = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), canonical):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def replay(project: Project, key: str, digest: str) -> Stored | None:
    """The stored answer to this key, or None when the key is new (or expired)."""
    row = (IdempotencyKey.objects.filter(project_id=project.pk, key=key, created_at__gte=now() - KEY_LIFETIME)
           .values("request_digest", "status_code", "response").first())
    if row is None:
        return None
    if row["request_digest"] != digest:
        raise _invalid(f"{HEADER}: this key was already used for a different request in the last 24 hours; "
                       "use a new key for a new request")
    return Stored(row["status_code"], row["response"])


def remember(project: Project, key: str, digest: str, status: int, response: dict[str, Any]) -> Stored:
    """Store the answer to a new key and return what the key now answers: this answer, or
    the one a concurrent request with the same key stored first."""
    IdempotencyKey.objects.filter(created_at__lt=now() - KEY_LIFETIME).delete()
    try:
        with transaction.atomic():
            IdempotencyKey.objects.create(project_id=project.pk, key=key, request_digest=digest,
                                          status_code=status, response=response)
    except IntegrityError:
        earlier = replay(project, key, digest)
        if earlier is not None:
            return earlier
    return Stored(status, response)


class KeyInvalid(Invalid):
    """A refused key; the API error body names the header in ``field``."""

    field = HEADER


def _invalid(detail: str) -> KeyInvalid:
    return KeyInvalid(detail)
