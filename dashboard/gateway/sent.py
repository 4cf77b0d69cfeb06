"""Answers that leave work for after they are sent.

A WSGI server calls the response's ``close()`` once the last byte has been written (PEP
3333; Django's test client and ASGI handler do the same), so work done there is off the
client's clock: the gateway stores an upstream's reply that way (see ``chat.complete``)."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse


class AnswerThen(HttpResponse):
    """A JSON answer; ``after`` runs once it has been sent (exactly once, and it must not
    raise: the answer is out)."""

    def __init__(self, payload: Any, after: Callable[[], None]):
        super().__init__(json.dumps(payload), content_type="application/json")
        self._after: Callable[[], None] | None = after

    def close(self) -> None:
        after, self._after = self._after, None
        try:
            if after is not None:
                after()
        finally:
            # after the work: Django's end of request (closing the database connection) follows
            super().close()


def event_stream(events: Iterator[bytes]) -> StreamingHttpResponse:
    """A server-sent-events answer that no cache or proxy holds back (every streaming endpoint)."""
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
