"""Projects and API keys. A key is shown once at creation; only its SHA-256 is stored."""
from __future__ import annotations

import hashlib
import secrets
import threading
import time

from django.conf import settings
from django.db import transaction

from ..models import ApiKey, Project
from .common import now

KEY_PREFIX = "cs_"

_cache: dict[str, tuple[float, int | None, int | None]] = {}  # hash -> (expires, project id, key id)
_cache_lock = threading.Lock()


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def get_or_create_project(name: str) -> tuple[Project, bool]:
    name = name.strip()
    if not name:
        raise ValueError("a project needs a name")
    return Project.objects.get_or_create(name=name)


@transaction.atomic
def create_api_key(project: Project, name: str = "") -> tuple[ApiKey, str]:
    """Returns (row, key). The key itself is not stored anywhere: print it now."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey.objects.create(project=project, name=name, prefix=key[:10], key_hash=hash_key(key))
    return row, key


def revoke_api_key(row: ApiKey) -> None:
    ApiKey.objects.filter(pk=row.pk, revoked_at__isnull=True).update(revoked_at=now())
    with _cache_lock:
        _cache.clear()


def authenticate(key: str) -> Project | None:
    """The project a key belongs to, or None. Lookups are cached per process for
    API_KEY_CACHE_SECONDS (so a revoked key works for at most that long)."""
    if not key or len(key) > 200:
        return None
    digest = hash_key(key)
    ttl = settings.API_KEY_CACHE_SECONDS
    t = time.monotonic()
    if ttl > 0:
        with _cache_lock:
            hit = _cache.get(digest)
        if hit is not None and hit[0] > t:
            return _project_stub(hit[1]) if hit[1] is not None else None
    row = (ApiKey.objects.filter(key_hash=digest, revoked_at__isnull=True)
           .select_related("project").only("id", "last_used_at", "project__id", "project__name").first())
    if row is None:
        project_id = key_id = None
    else:
        project_id, key_id = row.project_id, row.pk
        _touch(row)
    if ttl > 0:
        with _cache_lock:
            if len(_cache) > 10_000:
                _cache.clear()
            _cache[digest] = (t + ttl, project_id, key_id)
    return row.project if row is not None else None


def _project_stub(project_id: int) -> Project:
    # Routes only need the id to scope their queries; no second query for the name.
    return Project(pk=project_id)


def _touch(row: ApiKey) -> None:
    """Record use at most once a minute per key (no write on every request)."""
    stamp = now()
    if row.last_used_at is None or (stamp - row.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=stamp)


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
