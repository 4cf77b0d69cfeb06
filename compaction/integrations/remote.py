"""The service's REST API as a small client, for integrations in remote mode.

Only what an agent loop needs: import the history once, append what arrived since, fetch
the compacted context (with its ETag, so an unchanged context costs no body), wait for a
queued run, and store the caller's policy as the session's override. Plain ``urllib``:
the engine gains no HTTP dependency. The address and key come from the caller's code,
never from anything the service or the agent's messages say.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CompactionError
from ..messages import JSONObject, RawMessage

FINAL_RUN_STATES = frozenset({"succeeded", "skipped", "failed"})


class RemoteError(CompactionError):
    """The service refused a request or could not be reached; ``status`` is the HTTP status
    (None when there was no answer) and ``detail`` the service's explanation."""

    def __init__(self, what: str, status: int | None, detail: str) -> None:
        self.status = status
        self.detail = detail
        code = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"compaction service: {what} failed ({code}): {detail}")


@dataclass(frozen=True)
class RemoteContext:
    """One version of a session's live context as the service serves it."""
    messages: list[RawMessage]
    version: int
    tag: str
    tokens: int


class ServiceClient:
    def __init__(self, base_url: str, api_key: str, *, timeout: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise CompactionError(f"service_url must be an http(s) URL, got {base_url!r}")
        if not api_key:
            raise CompactionError("api_key is required with service_url (a project API key of the service)")
        self.base_url = base_url.rstrip("/")
        self._key = api_key
        self.timeout = timeout
        self._sleep = sleep

    # -- requests --------------------------------------------------------------------
    def _call(self, method: str, path: str, what: str, body: Any = None,
              headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._key}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - caller's URL, http(s) checked
                raw = response.read()
                return response.status, (json.loads(raw) if raw else None), dict(response.headers)
        except urllib.error.HTTPError as exc:
            if exc.code == 304:
                return 304, None, dict(exc.headers)
            raise RemoteError(what, exc.code, _detail(exc.read())) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RemoteError(what, None, str(getattr(exc, "reason", exc))) from None

    # -- sessions --------------------------------------------------------------------
    def import_session(self, messages: list[RawMessage], *, title: str, external_id: str | None,
                       auto_compact: bool = True) -> JSONObject:
        body: JSONObject = {"messages": messages, "format": "openai", "title": title, "auto_compact": auto_compact}
        if external_id:
            body["external_id"] = external_id
        _, answer, _ = self._call("POST", "/api/sessions", "importing the session", body)
        result: JSONObject = answer
        return result

    def append(self, session_id: int, messages: list[RawMessage], *, auto_compact: bool = True) -> JSONObject:
        _, answer, _ = self._call("POST", f"/api/sessions/{session_id}/messages", "appending messages",
                                  {"messages": messages, "auto_compact": auto_compact})
        result: JSONObject = answer
        return result

    def context(self, session_id: int, tag: str | None = None) -> RemoteContext | None:
        """The live context, or None when it is still the version tagged ``tag`` (304)."""
        headers = {"If-None-Match": f'"{tag}"'} if tag else None
        status, answer, _ = self._call("GET", f"/api/sessions/{session_id}/context", "fetching the context",
                                       headers=headers)
        if status == 304:
            return None
        return RemoteContext(answer["messages"], answer["version"], answer["tag"], answer["tokens"]["total"])

    def wait_for_run(self, ref: JSONObject | None, timeout: float) -> str | None:
        """Poll a queued run until it is final (or ``timeout`` seconds pass); its last status."""
        if not ref:
            return None
        status: str = ref.get("status", "")
        deadline = time.monotonic() + timeout
        while status not in FINAL_RUN_STATES and time.monotonic() < deadline:
            self._sleep(0.2)
            _, answer, _ = self._call("GET", f"/api/runs/{int(ref['run_id'])}", "reading the run")
            status = answer.get("status", "")
        return status

    # -- policy ----------------------------------------------------------------------
    def use_policy(self, session_id: int, name: str, policy: JSONObject) -> int:
        """Store ``policy`` under ``name`` (or find the one already stored under it) and make
        it the session's override; returns the stored policy's id."""
        try:
            _, row, _ = self._call("POST", "/api/policies", "storing the policy", {"name": name, "policy": policy})
            policy_id = int(row["id"])
        except RemoteError as exc:
            if exc.status != 409:
                raise
            policy_id = self._find_policy(name)
        self._call("PUT", f"/api/sessions/{session_id}/policy", "setting the session's policy",
                   {"policy_id": policy_id})
        return policy_id

    def _find_policy(self, name: str) -> int:
        cursor: str | None = None
        while True:
            query = "?limit=500" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
            _, page, _ = self._call("GET", "/api/policies" + query, "listing policies")
            for row in page["items"]:
                if row.get("name") == name:
                    return int(row["id"])
            cursor = page.get("next_cursor")
            if not cursor:
                raise RemoteError("storing the policy", 409, f"a policy named {name!r} exists but was not listed")


def _detail(body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:500]
    detail = parsed.get("detail") if isinstance(parsed, dict) else None
    return json.dumps(detail, ensure_ascii=False) if not isinstance(detail, str) else detail
