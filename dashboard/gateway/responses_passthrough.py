"""``POST /v1/responses`` passed through to an upstream that serves the Responses API itself.

The operator declares such an upstream (``GATEWAY_RESPONSES_PASSTHROUGH``: the default
upstream and/or model connections, by name; ``upstream.resolve`` marks it); the client's
request cannot choose it. The request is checked, placed and compacted exactly as on the
translated path (``responses_create`` through ``chat.prepare``: compaction items and
``previous_response_id`` are expanded to the history they stand for, server-side compaction
runs when due). What changes is the call: the live context, rendered back to Responses input
items, goes to the upstream's ``/responses`` with the client's own fields (tools, text
format, reasoning, include, prompt caching...), and the upstream's response, or its events,
come back with their output items as the upstream made them.

What the gateway changes on the way: the request loses ``previous_response_id`` and
``context_management`` (the gateway's: the upstream gets the whole context instead), its
``model`` is the upstream's name for it, ``instructions`` stay the client's when the live
context still starts with them; the answer gets the gateway's response id (the one a next
request may name), the client's ``previous_response_id``, and the gateway's compaction item
first in its output when one was asked for and ran (output indexes and sequence numbers of
the events shift to make room). The reply is stored in the session in its chat form (its
text and function calls), with the reasoning items it came with kept on that message
(``wire.REASONING``), as reasoning input items are kept on the turn they precede; the
upstream is sent them again before that turn, as the client sent them or it made them. Upstream failures are mapped as on the translated path
(``errors.upstream_failure``, with the operator's secrets redacted)."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.conf import settings

from compaction.integrations.responses_items import messages_to_items
from compaction.redaction import redact_json

from ..services import connections
from ..services.call_bodies import SentBody
from . import chat, relay
from .errors import GatewayError, upstream_failure
from .responses_body import ResponsesRequest
from .wire import REASONING

# The request's fields that are the gateway's own business, never forwarded.
_OURS = frozenset({"model", "instructions", "previous_response_id", "context_management"})


def _items(messages: list[dict[str, Any]], reasoning: dict[int, list[dict[str, Any]]], first: int) -> list[Any]:
    """Input items for the live context's ``messages`` (the first of them at index ``first``
    of the context), each assistant turn after the reasoning items kept with it, as the
    client sent them or the upstream made them."""
    if not reasoning:
        return messages_to_items(messages)
    out: list[Any] = []
    for k, message in enumerate(messages):
        out += reasoning.get(first + k, ())
        out += messages_to_items([message])
    return out


def body(prep: chat.Prepared, req: ResponsesRequest) -> SentBody:
    """The body for the upstream's ``/responses``: the client's fields and the live context
    as input items (its text spliced in as the call inspector keeps it)."""
    messages = json.loads(prep.messages_text)
    fields: dict[str, Any] = {k: v for k, v in req.fields.items() if k not in _OURS}
    fields["model"] = prep.up.model.removeprefix("openai/")
    first = messages[0] if messages else {}
    skipped = 0
    if req.instructions and first.get("role") == "system" and first.get("content") == req.instructions:
        # still the context's first message: sent as the instructions they came as
        fields["instructions"] = req.instructions
        messages, skipped = messages[1:], 1
    items_text = json.dumps(_items(messages, prep.reasoning, skipped), ensure_ascii=False)
    before = json.dumps(fields, ensure_ascii=False)[:-1] + ', "input": '
    to = f"{prep.up.via}: POST {(prep.up.api_base or '').rstrip('/')}/responses"
    return SentBody(before, items_text, "}", exact=True, to=to, data=(before + items_text + "}").encode("utf-8"))


def reply_of(output: list[Any]) -> dict[str, Any]:
    """The assistant chat message the session stores for a response's output items: the
    text of its messages, then its function calls, with its reasoning items kept beside
    them as the upstream made them (``wire.REASONING``: they have no chat form, and go back
    to the upstream before this turn in the next request)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning":
            reasoning.append(item)
        elif item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    texts.append(str(part.get("text") if part.get("type") == "output_text" else part.get("refusal")))
        elif item.get("type") == "function_call":
            calls.append({"id": str(item.get("call_id") or ""), "type": "function",
                          "function": {"name": str(item.get("name") or ""),
                                       "arguments": str(item.get("arguments") or "")}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or (None if calls else "")}
    if calls:
        reply["tool_calls"] = calls
    if reasoning:
        reply[REASONING] = reasoning
    return reply


def chat_usage(usage: Any) -> dict[str, int] | None:
    """A response's usage in the chat form the session stores."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion} \
        if prompt or completion else None


def _ours(response: dict[str, Any], response_id: str, req: ResponsesRequest,
          leading: list[dict[str, Any]]) -> dict[str, Any]:
    """The upstream's response object as the client gets it (see the module's docstring)."""
    output = response.get("output")
    return dict(response, id=response_id, previous_response_id=req.previous_response_id,
                output=leading + (output if isinstance(output, list) else []))


_T = TypeVar("_T")


def _send(prep: chat.Prepared, req: ResponsesRequest, call: Callable[[str, str, float, bytes], _T]) -> tuple[_T, float]:
    """The body for the upstream kept for the inspector, then sent by ``call``
    (``relay.respond`` or ``relay.respond_stream``); what ``call`` returns and when it was
    sent. A refusal is recorded on the call before it reaches the view."""
    sent = body(prep, req)
    prep.keep_sent(sent)
    started = time.perf_counter()
    try:
        return call(prep.up.api_base or "", prep.up.api_key or connections.NO_KEY, settings.GATEWAY_TIMEOUT,
                    sent.payload()), started
    except GatewayError as exc:
        prep.record(exc.status, upstream_s=time.perf_counter() - started, error=exc)
        raise


def complete(prep: chat.Prepared, req: ResponsesRequest, response_id: str, leading: list[dict[str, Any]],
             keep: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Non-streaming: the response object. The reply is stored after the answer is sent
    (``prep.after``), as on the translated path; ``keep`` keeps the response for a next
    request's ``previous_response_id`` before that."""
    response, started = _send(prep, req, relay.respond)
    upstream_s = time.perf_counter() - started
    answer = _ours(response, response_id, req, leading)
    reply, usage = reply_of(response.get("output") or []), chat_usage(response.get("usage"))
    keep(reply)
    prep.answered = time.perf_counter()
    prep.reply = answer
    prep.after = lambda: chat.store_call_reply(prep, reply, usage, upstream_s)
    return answer


def stream(prep: chat.Prepared, req: ResponsesRequest, response_id: str, leading: list[dict[str, Any]],
           keep: Callable[[dict[str, Any]], None]) -> Iterator[dict[str, Any]]:
    """Streaming: the events to send. The upstream is called here, so a failure before its
    first event raises (the view answers with its status); one after it ends the stream with
    an ``error`` event."""
    events, started = _send(prep, req, relay.respond_stream)
    return _Relay(prep, req, response_id, leading, keep, started).events(events)


class _Relay:
    """The upstream's events as the client gets them, numbered again from 0 (the gateway's
    compaction item comes first, after ``response.in_progress``), the stored reply taken from
    the finished response."""

    _RESPONSE_EVENTS = ("response.created", "response.in_progress", "response.completed", "response.incomplete",
                        "response.failed", "response.queued")

    def __init__(self, prep: chat.Prepared, req: ResponsesRequest, response_id: str, leading: list[dict[str, Any]],
                 keep: Callable[[dict[str, Any]], None], started: float):
        self.prep, self.req, self.response_id, self.leading, self.keep = prep, req, response_id, leading, keep
        self.started = started
        self.seq = 0
        self.done: list[dict[str, Any]] = []  # the upstream's finished output items, in order
        self.leading_sent = not leading
        self.finished = False  # a finished response (completed, incomplete or failed) came

    def _numbered(self, event: dict[str, Any]) -> dict[str, Any]:
        event = dict(event, sequence_number=self.seq)
        self.seq += 1
        return event

    def _leading_events(self) -> Iterator[dict[str, Any]]:
        for index, item in enumerate(self.leading):
            yield self._numbered({"type": "response.output_item.added", "output_index": index, "item": item})
            yield self._numbered({"type": "response.output_item.done", "output_index": index, "item": item})
        self.leading_sent = True

    def _error(self, exc: GatewayError) -> dict[str, Any]:
        self.prep.record(exc.status, upstream_s=time.perf_counter() - self.started, error=exc)
        err = exc.error_object()
        code = err.get("code") if err.get("code") is not None else err.get("type")
        return self._numbered({"type": "error", "code": str(code) if code is not None else None,
                               "message": str(err.get("message") or ""), "param": err.get("param")})

    def events(self, upstream: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        shift = len(self.leading)
        try:
            for event in upstream:
                kind = event.get("type")
                if kind == "error":
                    message = event.get("message") or (event.get("error") or {}).get("message") or "error event"
                    code = event.get("code")
                    status = code if isinstance(code, int) else 500
                    yield self._error(upstream_failure(status, str(message)))
                    return
                if not self.leading_sent and kind not in ("response.created", "response.in_progress",
                                                          "response.queued"):
                    yield from self._leading_events()
                event = dict(event)
                if isinstance(event.get("output_index"), int):
                    event["output_index"] += shift
                if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
                    self.done.append(event["item"])
                if kind in self._RESPONSE_EVENTS and isinstance(event.get("response"), dict):
                    finished = kind not in ("response.created", "response.in_progress", "response.queued")
                    response = _ours(event["response"], self.response_id, self.req,
                                     self.leading if finished else [])
                    if kind == "response.failed":  # its error is the upstream's text
                        cleaned = redact_json(response)
                        response = cleaned if isinstance(cleaned, dict) else response
                    event["response"] = response
                    if finished:
                        self._store(event["response"], kind)
                yield self._numbered(event)
        except GatewayError as exc:
            yield self._error(exc)
            return
        if not self.finished:  # cut off before its response was finished: nothing to store
            yield self._error(GatewayError(502, "the upstream's event stream ended before its response was finished",
                                           type="server_error"))

    def _store(self, response: dict[str, Any], kind: str) -> None:
        """The reply stored (before the stream's last event: a streaming client has read all
        along, so the write is not what it waits for) and the response kept."""
        self.finished = True
        output = [o for o in response.get("output") or [] if o not in self.leading] or self.done
        upstream_s = time.perf_counter() - self.started
        if kind == "response.failed":
            failure = GatewayError(502, "the upstream's response failed", type="server_error")
            self.prep.reply = response
            self.prep.record(failure.status, chat_usage(response.get("usage")), upstream_s, error=failure)
            return
        reply = reply_of(output)
        self.prep.reply = response
        self.keep(reply)
        chat.store_call_reply(self.prep, reply, chat_usage(response.get("usage")), upstream_s)
