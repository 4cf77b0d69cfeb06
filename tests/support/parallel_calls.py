"""Many copies of one HTTP request sent at the same moment, for tests of what a server does
with concurrent identical calls (an agent's retries, a client's parallel tool loops).

Each copy runs on its own thread with its own connection; a barrier releases them together,
so they reach the server as close to simultaneously as the machine allows. No mock: the
requests are real HTTP to a real (live test) server. Streaming answers are read to the end.

    answers = send_together(live_server.url + "/v1/chat/completions", body, headers, copies=8)
    assert {a.headers["x-compaction-session"] for a in answers} == {...}
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-cased names
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


def send_together(url: str, body: bytes | dict, headers: dict[str, str], copies: int = 8,
                  timeout: float = 120.0) -> list[Answer]:
    """POST ``body`` to ``url`` ``copies`` times at once; the answers in the order the copies
    were started. An exception on any copy (a connection refused, a timeout) is raised here."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent_headers = {"content-type": "application/json", **headers}
    barrier = threading.Barrier(copies)
    answers: list[Answer | None] = [None] * copies
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with httpx.Client(timeout=timeout) as client:
                barrier.wait(timeout=timeout)
                r = client.post(url, content=data, headers=sent_headers)
                answers[i] = Answer(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=one, args=(i,), name=f"parallel-call-{i}") for i in range(copies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    if errors:
        raise errors[0]
    assert all(a is not None for a in answers), "a copy never finished"
    return [a for a in answers if a is not None]
