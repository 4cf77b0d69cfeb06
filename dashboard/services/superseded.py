"""Live previews that nobody waits for any more stop early.

The tuning page re-simulates on every edit (debounced); the browser aborts the request an
edit supersedes, but a WSGI server does not notice a closed connection until it writes the
answer, so the replay would run to its end for nothing and hold up the one the user waits
for. Each page load names its previews (``whatif_page``, a random token the page's script
makes) and numbers them (``whatif_seq``); a request records its number as the page's latest
in Django's cache, and its replay checks every ``CHECK_EVERY`` messages whether a later
number has arrived since, and stops if so.

The cache is the process's own unless ``CACHES`` names a shared one (Redis, memcached): with
several web processes and a local cache, a superseded replay in another process than the new
request runs to its end (the browser still drops its answer).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.cache import cache

#: Messages replayed between two looks at the cache.
CHECK_EVERY = 50
#: How long a page's latest number is kept (seconds): longer than any replay.
KEEP_FOR = 600
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


class Superseded(Exception):
    """A later preview of the same page arrived: this one's answer would be thrown away."""


@dataclass(frozen=True)
class Ticket:
    key: str
    seq: int

    def superseded(self) -> bool:
        latest = cache.get(self.key)
        return isinstance(latest, int) and latest > self.seq

    def progress(self, done: int, total: int) -> None:
        """A replay's progress callback: raises Superseded once a later preview arrived."""
        if done % CHECK_EVERY == 0 and self.superseded():
            raise Superseded(f"preview {self.seq} superseded after {done} of {total} messages")


def take_ticket(user_id: int, session_id: int, page: str | None, seq: str | None) -> Ticket | None:
    """Record preview ``seq`` of page ``page`` as the latest one (unless a later one already
    arrived) and return its ticket; None when the request names no page or a malformed one
    (a client that does not send them gets every preview replayed in full)."""
    if not page or not seq or not _TOKEN.match(page) or not seq.isdigit() or len(seq) > 12:
        return None
    key = f"whatif:{user_id}:{session_id}:{page}"
    number = int(seq)
    cache.add(key, number, KEEP_FOR)
    latest = cache.get(key)
    if not isinstance(latest, int) or number > latest:
        cache.set(key, number, KEEP_FOR)
    return Ticket(key, number)
