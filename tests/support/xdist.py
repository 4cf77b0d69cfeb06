"""What differs between pytest-xdist worker processes: their index, and the resources
derived from it (see tests/conftest.py)."""
from __future__ import annotations

import os
from urllib.parse import urlparse, urlunparse


def worker_index() -> int:
    """0 without xdist or on its first worker (``gw0``), 1 on ``gw1``, and so on."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def redis_url_for_this_worker(url: str) -> str:
    """``url`` with its database number moved up by the worker index (redis://h:p/3 is db 3
    on gw0 and db 4 on gw1). Redis has 16 databases by default; past them it is an error
    here, not a silent share."""
    u = urlparse(url)
    base = int(u.path.lstrip("/") or 0)
    db = base + worker_index()
    if db > 15:
        raise RuntimeError(f"TEST_REDIS_URL {url}: worker {worker_index()} would need Redis db {db} (> 15)")
    return urlunparse(u._replace(path=f"/{db}"))
