"""The ``Idempotency-Key`` header on API writes that create things (see
dashboard.services.idempotency): a route passes its work as a function, and a repeated
request with the same key gets the stored answer instead of running it again."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from ..services import idempotency

Answer = tuple[int, dict[str, Any]]


def once_per_key(request: Any, work: Callable[[], Answer]) -> Answer:
    """Run ``work`` unless this request's key was answered already; store a successful answer."""
    key = idempotency.clean_key(request.headers.get(idempotency.HEADER))
    if key is None:
        return work()
    digest = idempotency.request_digest(request.method, request.path, request.body)
    stored = idempotency.replay(request.auth, key, digest)
    if stored is None:
        status, response = work()
        if not 200 <= status < 300:
            return status, response
        # stored as JSON: dates become ISO strings, so the first answer and every replay match
        response = json.loads(json.dumps(response, cls=DjangoJSONEncoder))
        stored = idempotency.remember(request.auth, key, digest, status, response)
    return stored.status, stored.response
