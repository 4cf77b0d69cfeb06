"""Waiting for the write the gateway makes after a non-streaming answer has been sent.

The gateway stores the upstream's reply (and the call's row) once its answer is out, off the
client's clock (``dashboard.gateway.chat.complete`` and ``responses_passthrough.complete``
leave it in ``prep.after``; the response's ``close()`` runs it). A test that reads the database right after its SDK call
returns would race that write, so the SDK clients of the gateway tests wait for it: every
answer produced counts as one write pending until ``store_after_sent`` has finished, and an
httpx response hook waits until none is pending. This is instrumentation of the real code
path (the live server runs in this process), not a mock: the write itself runs unchanged."""
from __future__ import annotations

import threading

import httpx
import httpx2

from dashboard.gateway import chat, responses_passthrough

_cv = threading.Condition()
_pending: set[int] = set()  # id() of each request whose answer is out and whose write has not run


def install(monkeypatch) -> None:
    """Track the answers and the writes that follow them (undone with ``monkeypatch``)."""
    with _cv:
        _pending.clear()
    store = chat.store_after_sent

    def tracked(complete):
        def tracked_complete(prep, *args):
            out = complete(prep, *args)
            with _cv:
                _pending.add(id(prep))
            return out
        return tracked_complete

    def tracked_store(prep):
        try:
            store(prep)
        finally:
            with _cv:
                _pending.discard(id(prep))
                _cv.notify_all()

    # both answers stored after they are sent: chat completions (and Responses translated
    # to them), and Responses passed through to an upstream that serves them
    monkeypatch.setattr(chat, "complete", tracked(chat.complete))
    monkeypatch.setattr(responses_passthrough, "complete", tracked(responses_passthrough.complete))
    monkeypatch.setattr(chat, "store_after_sent", tracked_store)


def wait(timeout: float = 120.0) -> None:
    """Until every answer's write has run; an AssertionError if one never does (an answer
    sent without its write is a bug: its reply would be lost until the client resends it).

    The bound is generous because the write is real work (the reply, the call's row, a
    compaction the reply makes due, and in a fresh process the first token count's lazy
    imports): at load 20 on two cores it took more than 15 s, the SDK took the hook's error
    for a failed request and retried it, and the test failed with a connection error."""
    with _cv:
        if not _cv.wait_for(lambda: not _pending, timeout):
            raise AssertionError(f"{len(_pending)} gateway answer(s) sent without their reply being stored")


def _on_response(_response) -> None:
    wait()


def http_client(**kw) -> httpx.Client:
    """An httpx client for the OpenAI SDK: each answer is returned once the gateway's write
    after it is done."""
    return httpx.Client(event_hooks={"response": [_on_response]}, **kw)


def http2_client(**kw) -> httpx2.Client:
    """The same for the Anthropic SDK, which is built on ``httpx2``."""
    return httpx2.Client(event_hooks={"response": [_on_response]}, **kw)
