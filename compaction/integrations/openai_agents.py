"""An OpenAI Agents SDK session backed by the service's REST API.

    from agents import Agent, Runner
    from compaction.integrations.openai_agents import CompactionServiceSession

    session = CompactionServiceSession("run-42", base_url="http://127.0.0.1:8000", api_key=key)
    await Runner.run(agent, "next step", session=session)

The SDK asks the session for the history before each run and hands it the run's new
items after. Here the history lives in a service session: ``add_items`` appends the
items (as chat messages; the service compacts when its policy says so, with its runs,
archive and dashboard), and ``get_items`` returns the service's compacted context, so the
agent's next model call gets the summary and the recent turns instead of everything.

This is the SDK's ``Session`` protocol (``get_items``, ``add_items``, ``pop_item``,
``clear_session``); the class does not import the SDK. The REST API has no way to take a
message back, so ``pop_item`` moves to a new service session holding the context without
its last item (the old session stays, as the record of what happened).

Bad input: an item the engine refuses (an orphan tool result, an unknown role, a type with
no chat form) raises :class:`~compaction.integrations._common.IntegrationError` naming
``openai-agents``, the message's position in the session and the fault, and nothing is
written: items are converted and checked before the request, and the service writes an
append in full or not at all.

Event loops: a script that runs each turn with its own ``asyncio.run`` (a REPL-style agent)
uses one session object across several loops. An HTTP client's connections belong to the loop
that opened them, so the session keeps one client per loop: a new loop gets a new client, and
the client of a loop is closed when that loop shuts its async generators down (``asyncio.run``
does, before closing the loop). A client passed in (``client=``) is the caller's: it is used
as it is, on whatever loop the caller runs it.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from ..errors import SessionValidationError
from ..messages import JSONObject, validate_message
from ._common import IntegrationError
from .responses_items import items_to_messages, messages_to_items

INTEGRATION = "openai-agents"
_BATCH_PREFIX = re.compile(r"^messages\[\d+\]: (message \d+: )?")
_POSITION_NOTE = re.compile(r" \(would be position \d+\)$")


class ServiceError(RuntimeError):
    """The service answered with an error that is not about the items (auth, not found...)."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        super().__init__(f"{INTEGRATION}: the service answered {status}: {detail}")


class CompactionServiceSession:
    """The Agents SDK session protocol over one service session.

    ``session_id`` is the SDK's name for the conversation (the service session's title);
    ``service_session`` resumes an existing service session by its id (the
    ``service_session`` attribute, once the first items are added). ``client`` lets a caller
    share one ``httpx.AsyncClient`` (then the caller runs every turn on that client's loop);
    without it the session makes its own, one per event loop (see the module's docstring)."""

    session_settings: Any = None

    def __init__(self, session_id: str, *, base_url: str, api_key: str, service_session: int | None = None,
                 model: str | None = None, client: httpx.AsyncClient | None = None, timeout: float = 60.0) -> None:
        self.session_id = session_id
        self.service_session = service_session
        self.model = model
        self._shared_client = client
        self._timeout = timeout
        # the session's own client and the loop it belongs to (the loop is kept referenced, so
        # a later loop can never be mistaken for it)
        self._own: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient, AsyncGenerator[None, None]] | None = None
        self._base = base_url.rstrip("/") + "/api"
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._message_count: int | None = None
        # The last context read, by its tag: an unchanged context is not downloaded again.
        self._context_tag: str | None = None
        self._context_items: list[JSONObject] = []

    # -- the SDK's protocol ------------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[JSONObject]:
        """The compacted context as Responses input items (the latest ``limit`` of them)."""
        items = await self._context()
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return [dict(item) for item in items]

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        start = await self._count()
        messages = items_to_messages(INTEGRATION, items, start)
        if not messages:
            return
        for k, raw in enumerate(messages):
            try:
                validate_message(raw, start + k)
            except SessionValidationError as exc:
                raise IntegrationError.wrap(INTEGRATION, exc) from None
        if self.service_session is None:
            # the SDK's name goes in the title, not external_id: that must be unique in the
            # project, and a pop or a second process may start another service session for it
            body: JSONObject = {"messages": messages, "format": "openai", "title": self.session_id[:500]}
            if self.model:
                body["model"] = self.model
            answer = await self._call("POST", "/sessions", json=body, start=start)
            self.service_session = int(answer["session"]["id"])
            self._message_count = int(answer["session"]["message_count"])
        else:
            answer = await self._call("POST", f"/sessions/{self.service_session}/messages",
                                      json={"messages": messages}, start=start)
            self._message_count = int(answer["message_count"])

    async def pop_item(self) -> JSONObject | None:
        items = await self._context()
        if not items:
            return None
        last, rest = items[-1], items[:-1]
        old = self.service_session
        self.service_session, self._message_count, self._context_tag = None, 0, None
        try:
            await self.add_items(rest)
        except BaseException:
            # nothing changes when the new session cannot be made
            self.service_session, self._message_count = old, None
            raise
        self._context_tag, self._context_items = None, []
        return dict(last)

    async def clear_session(self) -> None:
        if self.service_session is not None:
            await self._call("DELETE", f"/sessions/{self.service_session}", start=0, allow_missing=True)
        self.service_session, self._message_count = None, None
        self._context_tag, self._context_items = None, []

    async def close(self) -> None:
        """Close the HTTP client (also on leaving ``async with``)."""
        if self._shared_client is not None:
            await self._shared_client.aclose()
            return
        own, self._own = self._own, None
        if own is not None and own[0] is asyncio.get_running_loop():
            await own[2].aclose()  # its finally closes the client

    async def __aenter__(self) -> CompactionServiceSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the HTTP client ---------------------------------------------------------------
    async def _client(self) -> httpx.AsyncClient:
        if self._shared_client is not None:
            return self._shared_client
        loop = asyncio.get_running_loop()
        if self._own is not None and self._own[0] is loop:
            return self._own[1]
        # A loop of an earlier turn is gone (closed): its client went with it. This loop gets
        # its own, closed by the generator below when the loop finalizes its async generators.
        client = httpx.AsyncClient(timeout=self._timeout)
        closer = _closed_with_the_loop(client)
        await closer.__anext__()
        self._own = (loop, client, closer)
        return client

    # -- the REST API -------------------------------------------------------------------
    async def _count(self) -> int:
        if self.service_session is None:
            return 0
        if self._message_count is None:
            detail = await self._call("GET", f"/sessions/{self.service_session}", start=0)
            self._message_count = int(detail["message_count"])
        return self._message_count

    async def _context(self) -> list[JSONObject]:
        if self.service_session is None:
            return []
        headers = dict(self._headers)
        if self._context_tag:
            headers["If-None-Match"] = self._context_tag
        client = await self._client()
        response = await client.get(f"{self._base}/sessions/{self.service_session}/context", headers=headers)
        if response.status_code == 304:
            return self._context_items
        body = self._json(response, start=0)
        self._context_tag = response.headers.get("ETag")
        self._context_items = messages_to_items(body["messages"])
        self._message_count = int(body["message_count"])
        return self._context_items

    async def _call(self, method: str, path: str, *, start: int, json: JSONObject | None = None,
                    allow_missing: bool = False) -> Any:
        client = await self._client()
        response = await client.request(method, self._base + path, json=json, headers=self._headers)
        if allow_missing and response.status_code == 404:
            return None
        return self._json(response, start=start)

    def _json(self, response: httpx.Response, *, start: int) -> Any:
        if response.status_code == 204:
            return None
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text[:500]}
        if response.status_code < 400:
            return body
        detail = str(body.get("detail", "")) if isinstance(body, dict) else str(body)
        fault, index = (body.get("fault"), body.get("index")) if isinstance(body, dict) else (None, None)
        if fault and isinstance(index, int):
            # the service numbers a refused message within the request: restate it as a position
            text = _POSITION_NOTE.sub("", _BATCH_PREFIX.sub("", detail))
            raise IntegrationError(INTEGRATION, text, index=start + index, fault=fault)
        raise ServiceError(response.status_code, detail)


async def _closed_with_the_loop(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Suspended for the life of the loop that started it; ``asyncio.run`` (and any runner that
    calls ``loop.shutdown_asyncgens()``) resumes it with ``aclose`` before closing the loop,
    which closes ``client`` while its connections' loop still runs."""
    try:
        yield
    finally:
        await client.aclose()


def items_as_messages(items: Sequence[Any], start: int = 0) -> list[JSONObject]:
    """The chat messages ``add_items`` would send for ``items`` (for checks and tests)."""
    return items_to_messages(INTEGRATION, items, start)
