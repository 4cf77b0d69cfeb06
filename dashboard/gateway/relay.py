"""The call to an OpenAI-compatible upstream, made directly over HTTP.

An OpenAI-compatible server takes the chat request the client would have sent it, so
there is nothing to translate: the gateway posts the request's fields with the live
context spliced in as the JSON text it keeps (``live``), and reads the answer back as it
came. Going through litellm here cost more than everything else the gateway does at a
thousand messages (its per-message checks, then serialising the list again); litellm
remains the path for every other provider (``upstream.call``).

Answers are returned as ``Payload`` objects (attribute access over the JSON, None for an
absent field), so the code that reads litellm's response objects reads these unchanged.
Failures become the same ``GatewayError`` as litellm's do (``errors.upstream_failure``)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import httpx

from compaction import jsontext

from .errors import GatewayError, upstream_failure


class Payload:
    """A JSON object read as attributes: ``chunk.choices[0].delta.content``; an absent field
    is None (as on litellm's objects), a nested object or list of objects is wrapped too."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]):
        self._data = data

    def __getattr__(self, name: str) -> Any:
        return _payload(self._data.get(name))


def _payload(value: Any) -> Any:
    if isinstance(value, dict):
        return Payload(value)
    if isinstance(value, list):
        return [_payload(v) for v in value]
    return value


@lru_cache(maxsize=32)
def _client(api_base: str, timeout: float) -> httpx.Client:
    """One client per upstream, kept: its connection pool is reused from call to call."""
    return httpx.Client(base_url=api_base.rstrip("/") + "/", timeout=httpx.Timeout(timeout),
                        limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))


def body_parts(model: str, fields: dict[str, Any]) -> tuple[str, str]:
    """The request body's text before and after the messages' text (see ``body``)."""
    rest = json.dumps(dict(fields, model=model), ensure_ascii=False)
    return rest[:-1] + ', "messages": ', "}"


def body(model: str, messages_text: str, fields: dict[str, Any]) -> bytes:
    """The request body: ``fields`` as JSON with the messages' text spliced in as it is."""
    before, after = body_parts(model, fields)
    return (before + messages_text + after).encode("utf-8")


def _error(status: int, text: str, headers: httpx.Headers) -> GatewayError:
    try:
        parsed = jsontext.loads(text, max_depth=None)  # NaN or nested too deep: not an answer to relay
    except ValueError:
        parsed = None
    inner = parsed.get("error") if isinstance(parsed, dict) else None
    obj = inner if isinstance(inner, dict) else parsed if isinstance(parsed, dict) else None
    message = obj.get("message") if isinstance(obj, dict) else None
    if not isinstance(message, str):
        obj, message = None, (text.strip()[:500] or f"HTTP {status}")
    return upstream_failure(status, message, body=obj, retry_after=headers.get("retry-after"))


def _post(api_base: str, api_key: str, timeout: float, data: bytes, stream: bool,
          path: str = "chat/completions") -> httpx.Response:
    client = _client(api_base, timeout)
    request = client.build_request("POST", path, content=data,
                                   headers={"Authorization": f"Bearer {api_key}",
                                            "Content-Type": "application/json",
                                            "Accept": "text/event-stream" if stream else "application/json"})
    try:
        return client.send(request, stream=stream)
    except httpx.TimeoutException as exc:
        raise upstream_failure(None, str(exc) or type(exc).__name__, timeout=True) from None
    except httpx.HTTPError as exc:
        raise upstream_failure(None, f"{type(exc).__name__}: {exc}") from None


def complete(api_base: str, api_key: str, timeout: float, data: bytes) -> Payload:
    """A non-streaming completion."""
    response = _post(api_base, api_key, timeout, data, stream=False)
    text = response.text
    if response.status_code >= 400:
        raise _error(response.status_code, text, response.headers)
    return Payload(_object(text, "answer is not a chat completion"))


def _object(text: str, what: str) -> dict[str, Any]:
    """``text`` as a JSON object; a 502 saying the upstream's ``what`` otherwise."""
    try:
        parsed = jsontext.loads(text, max_depth=None)  # NaN or nested too deep: not an answer to relay
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise GatewayError(502, f"the upstream's {what}: {text.strip()[:200]!r}", type="server_error")
    return parsed


def stream(api_base: str, api_key: str, timeout: float, data: bytes) -> Iterator[Payload]:
    """A streaming completion: its chunks, parsed from the upstream's server-sent events. An
    HTTP error status raises at once (before the first chunk); an error event mid-stream
    raises where it comes."""
    return _events(_event_stream(api_base, api_key, timeout, data, "chat/completions"))


def respond(api_base: str, api_key: str, timeout: float, data: bytes) -> dict[str, Any]:
    """``POST /responses`` to an upstream that serves OpenAI's Responses API: its
    ``response`` object."""
    response = _post(api_base, api_key, timeout, data, stream=False, path="responses")
    text = response.text
    if response.status_code >= 400:
        raise _error(response.status_code, text, response.headers)
    return _object(text, "answer is not a response object")


def respond_stream(api_base: str, api_key: str, timeout: float, data: bytes) -> Iterator[dict[str, Any]]:
    """``POST /responses`` streamed: the upstream's Responses events (each a JSON object
    with its ``type``), as they come. An HTTP error status raises at once; the events,
    ``error`` ones included, are the caller's to read."""
    return _response_events(_event_stream(api_base, api_key, timeout, data, "responses"))


def _event_stream(api_base: str, api_key: str, timeout: float, data: bytes, path: str) -> httpx.Response:
    """The upstream's open event stream; a GatewayError when it answered anything else."""
    response = _post(api_base, api_key, timeout, data, stream=True, path=path)
    if response.status_code >= 400 or not response.headers.get("content-type", "").startswith("text/event-stream"):
        try:
            text = response.read().decode("utf-8", "replace")
        finally:
            response.close()
        if response.status_code >= 400:
            raise _error(response.status_code, text, response.headers)
        raise GatewayError(502, f"the upstream did not answer with an event stream: {text.strip()[:200]!r}",
                           type="server_error")
    return response


def _response_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    try:
        for line in response.iter_lines():
            if not line.startswith("data:"):  # ("event:" lines repeat the type the data carries)
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            yield _object(data, "event is not a JSON object")
    except httpx.TimeoutException as exc:
        raise upstream_failure(None, str(exc) or type(exc).__name__, timeout=True) from None
    except httpx.HTTPError as exc:
        raise upstream_failure(None, f"the upstream broke off its stream: {type(exc).__name__}: {exc}") from None
    finally:
        response.close()


def _events(response: httpx.Response) -> Iterator[Payload]:
    seen = False
    try:
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            seen = True
            chunk = _object(data, "event is not a JSON object")
            if isinstance(chunk.get("error"), dict):
                error = chunk["error"]
                status = error.get("code") if isinstance(error.get("code"), int) else 500
                raise _error(status, json.dumps(chunk), response.headers)
            yield Payload(chunk)
        # ended without [DONE]: cut off; an answer begun is kept, a stream with nothing in it is a failure
        if not seen:
            raise GatewayError(502, "the upstream's event stream ended without an answer", type="server_error")
    except httpx.TimeoutException as exc:
        raise upstream_failure(None, str(exc) or type(exc).__name__, timeout=True) from None
    except httpx.HTTPError as exc:
        raise upstream_failure(None, f"the upstream broke off its stream: {type(exc).__name__}: {exc}") from None
    finally:
        response.close()
