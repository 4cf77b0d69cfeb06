"""A scripted OpenAI-compatible chat server for tests that must go over real HTTP.

The server listens on 127.0.0.1 with an ephemeral port and answers
``POST /v1/chat/completions`` (and ``/chat/completions``). What it answers is
decided by a queue of behaviours that a test scripts in advance::

    with ScriptedLLMServer() as server:
        server.script(error(500), ok("the summary"))
        litellm.completion(model="openai/anything", api_base=server.api_base,
                           api_key="test", messages=[...])
        assert len(server.requests) == 2

:func:`echo_auth` answers an error that repeats the request's ``Authorization`` header, as
some providers and proxies do (the redaction tests' upstream).

Behaviours are consumed one per request. A queue can be bound to a model name
(``server.script(ok("x"), model="backup")``) so failover tests can script each
model separately; requests for other models use the shared queue. When every
queue is empty the server answers 500 with "no scripted behaviour left", so an
unexpected extra request shows up as a failure instead of a silent success.

A behaviour may answer with tool calls (``ok("", tool_calls=[tool_call("read", {...})])``).
A request with ``"stream": true`` gets the same answer as server-sent events, in
chunks as OpenAI streams them (role, content pieces, tool-call pieces, finish reason, a
usage chunk when ``stream_options.include_usage`` is set, then ``data: [DONE]``).

``POST /v1/responses`` (and ``/responses``) is served too, as an upstream that speaks
OpenAI's Responses API: the same behaviours answer with a ``response`` object (the
behaviour's ``reasoning`` items first, a message item for the text, a ``function_call``
item per tool call, usage in input/output tokens), or
with its server-sent events when ``"stream": true`` (``response.created``,
``response.in_progress``, each item's ``added``, deltas, ``done`` events, then
``response.completed``). :func:`stream_error` answers an event stream that fails after its
first events (an ``error`` event), in either API.

Every request is recorded (path, headers, raw body bytes, parsed JSON) in the
order it arrived, including requests whose client gave up before the answer.
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
RESPONSES_PATHS = ("/v1/responses", "/responses")


@dataclass(frozen=True)
class Behaviour:
    """One scripted answer. Build them with :func:`ok`, :func:`error`, :func:`slow`,
    :func:`empty` and :func:`garbage` rather than directly."""

    kind: str
    text: str = ""
    usage: dict | None = None
    status: int = 200
    retry_after: float | None = None
    delay: float = 0.0
    body: bytes | None = None
    tool_calls: tuple = ()
    reasoning: tuple = ()


def ok(text: str, usage: dict | None = None, tool_calls: list[dict] | None = None,
       reasoning: list[dict] | None = None) -> Behaviour:
    """A normal completion whose message content is ``text`` (and ``tool_calls``, made with
    :func:`tool_call`). ``reasoning``: Responses ``reasoning`` items the answer starts with
    on ``/v1/responses`` (chat completions have no place for them and leave them out)."""
    return Behaviour("ok", text=text, usage=usage, tool_calls=tuple(tool_calls or ()), reasoning=tuple(reasoning or ()))


def tool_call(name: str, arguments: dict | str, call_id: str) -> dict:
    """One OpenAI tool call for :func:`ok`."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def error(status: int = 500, message: str | None = None, retry_after: float | None = None) -> Behaviour:
    """An HTTP error with an OpenAI-style error body (and a Retry-After header if given)."""
    return Behaviour("error", text=message or f"scripted error {status}", status=status, retry_after=retry_after)


def echo_auth(status: int = 401) -> Behaviour:
    """An error that echoes the request's credentials, as some providers and proxies do:
    ``status`` with an OpenAI-style error body whose message repeats the key (bare) and the
    whole ``Authorization`` (and ``x-api-key``) header the request came with."""
    return Behaviour("echo_auth", status=status)


def stream_error(message: str, text: str = "partial answer") -> Behaviour:
    """A stream that starts answering ``text`` and then fails with an error event whose
    message is ``message`` (chat: a ``data: {"error": ...}`` chunk; Responses: an ``error``
    event). Without ``"stream": true`` it is a 500 with ``message``."""
    return Behaviour("stream_error", text=text, body=message.encode())


def slow(seconds: float, text: str = "late summary") -> Behaviour:
    """Sleep ``seconds`` before answering ``text`` (to exercise client timeouts)."""
    return Behaviour("slow", text=text, delay=seconds)


def empty() -> Behaviour:
    """A well-formed completion whose content is the empty string."""
    return Behaviour("empty", text="")


def garbage(body: bytes = b"<html>this is not JSON at all") -> Behaviour:
    """Status 200, JSON content type, body that does not parse."""
    return Behaviour("garbage", body=body)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    behaviour: str | None = None

    @property
    def model(self) -> str | None:
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def messages(self) -> list[dict]:
        return list(self.json.get("messages") or []) if isinstance(self.json, dict) else []

    @property
    def input(self) -> list[dict]:
        """A Responses request's input items (a string input as its one user message)."""
        value = self.json.get("input") if isinstance(self.json, dict) else None
        return [{"role": "user", "content": value}] if isinstance(value, str) else list(value or [])


@dataclass
class _State:
    shared: deque = field(default_factory=deque)
    by_model: dict[str, deque] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0


def _usage_for(request_json: Any, text: str, usage: dict | None) -> dict:
    if usage is not None:
        return usage
    # A rough, deterministic stand-in for provider usage: 4 characters a token.
    sent = request_json.get("messages", request_json.get("input", [])) if isinstance(request_json, dict) else ""
    prompt_chars = len(json.dumps(sent))
    prompt, completion = max(1, prompt_chars // 4), max(0, len(text) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class _Handler(BaseHTTPRequestHandler):
    server_version = "ScriptedLLM/1.0"
    protocol_version = "HTTP/1.1"

    # Quiet: the default handler prints every request to stderr.
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              extra: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            # One request per connection keeps the client's pool from reusing a socket
            # the server already dropped (which would look like a network error).
            self.send_header("Connection", "close")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left; the attempt is already recorded
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, json.dumps({"object": "list", "data": []}).encode())
            return
        self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        record = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body, parsed)
        state = self.state
        with state.lock:
            state.requests.append(record)
            state.counter += 1
            number = state.counter
            model = parsed.get("model") if isinstance(parsed, dict) else None
            queue = state.by_model.get(model) if model is not None else None
            if queue:
                behaviour = queue.popleft()
            elif state.shared:
                behaviour = state.shared.popleft()
            else:
                behaviour = None
        if self.path.split("?", 1)[0] not in CHAT_PATHS + RESPONSES_PATHS:
            record.behaviour = "not_found"
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
            return
        if behaviour is None:
            record.behaviour = "exhausted"
            self._send(500, json.dumps({"error": {"message": "no scripted behaviour left",
                                                  "type": "server_error"}}).encode())
            return
        record.behaviour = behaviour.kind
        self._answer(behaviour, parsed, number)

    def _answer(self, b: Behaviour, request_json: Any, number: int) -> None:
        if b.kind == "error":
            extra = {"Retry-After": f"{b.retry_after:g}"} if b.retry_after is not None else None
            payload = {"error": {"message": b.text, "type": "server_error" if b.status >= 500 else "invalid_request_error",
                                 "code": b.status}}
            self._send(b.status, json.dumps(payload).encode(), extra=extra)
            return
        if b.kind == "echo_auth":
            auth = self.headers.get("Authorization") or ""
            key = auth.split(" ", 1)[1] if " " in auth else auth
            message = (f"Incorrect API key provided: {key}. Request headers: Authorization: {auth}; "
                       f"x-api-key: {self.headers.get('x-api-key') or ''}")
            payload = {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key",
                                 "param": None}}
            self._send(b.status, json.dumps(payload).encode())
            return
        if b.kind == "garbage":
            self._send(200, b.body or b"", content_type="application/json")
            return
        if b.kind == "slow":
            time.sleep(b.delay)
        model = request_json.get("model", "scripted") if isinstance(request_json, dict) else "scripted"
        streamed = isinstance(request_json, dict) and bool(request_json.get("stream"))
        if b.kind == "stream_error" and not streamed:
            payload = {"error": {"message": (b.body or b"").decode(), "type": "server_error", "code": 500}}
            self._send(500, json.dumps(payload).encode())
            return
        if self.path.split("?", 1)[0] in RESPONSES_PATHS:
            responses = _Responses(b, request_json, number, model)
            if streamed:
                self._send(200, responses.events(), content_type="text/event-stream")
            else:
                self._send(200, json.dumps(responses.response()).encode())
            return
        if isinstance(request_json, dict) and request_json.get("stream"):
            self._stream(b, request_json, number, model)
            return
        message: dict = {"role": "assistant", "content": b.text}
        if b.tool_calls:
            message["tool_calls"] = list(b.tool_calls)
            message["content"] = b.text or None
        payload = {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls" if b.tool_calls else "stop",
                         "message": message}],
            "usage": _usage_for(request_json, b.text, b.usage),
        }
        self._send(200, json.dumps(payload).encode())

    def _stream(self, b: Behaviour, request_json: dict, number: int, model: str) -> None:
        head = {"id": f"chatcmpl-scripted-{number}", "object": "chat.completion.chunk",
                "created": 1_700_000_000, "model": model}

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])

        events = [chunk({"role": "assistant", "content": ""})]
        half = len(b.text) // 2
        events += [chunk({"content": piece}) for piece in (b.text[:half], b.text[half:]) if piece]
        for i, call in enumerate(b.tool_calls):
            args = call["function"]["arguments"]
            cut = len(args) // 2
            events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                  "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                       for piece in (args[:cut], args[cut:]) if piece]
        if b.kind == "stream_error":
            events.append({"error": {"message": (b.body or b"").decode(), "type": "server_error", "code": 500}})
            body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
            self._send(200, body, content_type="text/event-stream")
            return
        events.append(chunk({}, "tool_calls" if b.tool_calls else "stop"))
        if (request_json.get("stream_options") or {}).get("include_usage"):
            events.append(dict(head, choices=[], usage=_usage_for(request_json, b.text, b.usage)))
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        self._send(200, body, content_type="text/event-stream")


class _Responses:
    """A behaviour's answer in OpenAI's Responses form."""

    def __init__(self, b: Behaviour, request_json: Any, number: int, model: str):
        self.b, self.request_json, self.number, self.model = b, request_json, number, model
        self.id = f"resp_scripted_{number}"

    def _items(self) -> list[dict]:
        items = [dict(r) for r in self.b.reasoning]
        if self.b.text or not self.b.tool_calls:
            items.append({"type": "message", "id": f"msg_scripted_{self.number}", "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": self.b.text, "annotations": []}]})
        for i, call in enumerate(self.b.tool_calls):
            items.append({"type": "function_call", "id": f"fc_scripted_{self.number}_{i}", "call_id": call["id"],
                          "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                          "status": "completed"})
        return items

    def response(self, status: str = "completed") -> dict:
        done = status == "completed"
        usage = _usage_for(self.request_json, self.b.text, self.b.usage)
        fields = self.request_json if isinstance(self.request_json, dict) else {}
        return {"id": self.id, "object": "response", "created_at": 1_700_000_000, "model": self.model,
                "status": status, "error": None, "incomplete_details": None,
                "instructions": fields.get("instructions"), "metadata": fields.get("metadata") or {},
                "parallel_tool_calls": True, "temperature": None, "top_p": None, "tool_choice": "auto",
                "tools": fields.get("tools") or [], "previous_response_id": fields.get("previous_response_id"),
                "output": self._items() if done else [],
                "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                          "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}} if done else None}

    def events(self) -> bytes:
        out: list[dict] = [{"type": "response.created", "response": self.response("in_progress")},
                           {"type": "response.in_progress", "response": self.response("in_progress")}]
        for index, item in enumerate(self._items()):
            if item["type"] == "message":
                text = self.b.text
                out.append({"type": "response.output_item.added", "output_index": index,
                            "item": dict(item, status="in_progress", content=[])})
                part = {"type": "output_text", "text": "", "annotations": []}
                out.append({"type": "response.content_part.added", "item_id": item["id"], "output_index": index,
                            "content_index": 0, "part": part})
                half = len(text) // 2
                out += [{"type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                         "content_index": 0, "delta": piece} for piece in (text[:half], text[half:]) if piece]
                if self.b.kind == "stream_error":
                    out.append({"type": "error", "code": "server_error", "message": (self.b.body or b"").decode(),
                                "param": None})
                    break
                out.append({"type": "response.output_text.done", "item_id": item["id"], "output_index": index,
                            "content_index": 0, "text": text})
                out.append({"type": "response.content_part.done", "item_id": item["id"], "output_index": index,
                            "content_index": 0, "part": dict(part, text=text)})
            elif item["type"] == "reasoning":
                out.append({"type": "response.output_item.added", "output_index": index, "item": item})
            else:
                args = item["arguments"]
                out.append({"type": "response.output_item.added", "output_index": index,
                            "item": dict(item, status="in_progress", arguments="")})
                cut = len(args) // 2
                out += [{"type": "response.function_call_arguments.delta", "item_id": item["id"],
                         "output_index": index, "delta": piece} for piece in (args[:cut], args[cut:]) if piece]
                out.append({"type": "response.function_call_arguments.done", "item_id": item["id"],
                            "output_index": index, "arguments": args})
            out.append({"type": "response.output_item.done", "output_index": index, "item": item})
        else:
            out.append({"type": "response.completed", "response": self.response()})
        return b"".join(f"event: {e['type']}\ndata: ".encode() + json.dumps(dict(e, sequence_number=n)).encode()
                        + b"\n\n" for n, e in enumerate(out))


class ScriptedLLMServer:
    """Threaded OpenAI-compatible server on 127.0.0.1; see the module docstring."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._state = _State()

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> ScriptedLLMServer:
        httpd = ThreadingHTTPServer((self._host, self._port), _Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a handler sleeping in slow() must not hold up stop()
        httpd.state = self._state  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"scripted-llm-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return self._httpd.server_address[1]

    @property
    def api_base(self) -> str:
        """What to pass as litellm's ``api_base`` (model string ``openai/<anything>``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -----------------------------------------------------------------
    def script(self, *behaviours: Behaviour, model: str | None = None) -> ScriptedLLMServer:
        """Queue behaviours, for any model or only for requests naming ``model``
        (the name as sent on the wire, i.e. without litellm's ``openai/`` prefix)."""
        with self._state.lock:
            if model is None:
                self._state.shared.extend(behaviours)
            else:
                self._state.by_model.setdefault(model, deque()).extend(behaviours)
        return self

    def pending(self) -> int:
        """Behaviours scripted but not consumed yet."""
        with self._state.lock:
            return len(self._state.shared) + sum(len(q) for q in self._state.by_model.values())

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def clear(self) -> None:
        with self._state.lock:
            self._state.shared.clear()
            self._state.by_model.clear()
            self._state.requests.clear()


@contextlib.contextmanager
def scripted_llm_server() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


try:  # a ready-made fixture for test modules that import it (pytest may be absent at runtime)
    import pytest

    @pytest.fixture
    def llm_server() -> Iterator[ScriptedLLMServer]:
        """A started :class:`ScriptedLLMServer`, stopped after the test."""
        with scripted_llm_server() as server:
            yield server
except ImportError:  # pragma: no cover
    pass
