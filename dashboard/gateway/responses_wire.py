"""OpenAI's Responses shapes for what the gateway got back in chat-completions form: the
``response`` object, its output items, and the server-sent events of a streamed response
in the order the OpenAI SDK reads them (``response.created``, ``response.in_progress``,
each output item ``added``, its deltas and ``done`` events, ``response.completed``; an
``error`` event when the upstream fails mid-stream)."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import GatewayError


def usage(chat_usage: dict[str, int] | None) -> dict[str, Any]:
    prompt = int((chat_usage or {}).get("prompt_tokens") or 0)
    completion = int((chat_usage or {}).get("completion_tokens") or 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


def _suffix(response_id: str) -> str:
    return response_id.removeprefix("resp_")


def message_item(response_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{_suffix(response_id)}", "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed"
            else []}


def call_item(response_id: str, k: int, call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    fn = call.get("function") or {}
    return {"type": "function_call", "id": f"fc_{_suffix(response_id)}_{k}", "call_id": call.get("id") or "",
            "name": fn.get("name") or "", "arguments": fn.get("arguments") or "", "status": status}


def output_items(response_id: str, reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply (an assistant chat message) as output items: its text, then its calls."""
    out = []
    if reply.get("content") or not reply.get("tool_calls"):
        out.append(message_item(response_id, reply.get("content") or ""))
    out += [call_item(response_id, k, call) for k, call in enumerate(reply.get("tool_calls") or [])]
    return out


def response_object(response_id: str, model: str, echo: dict[str, Any], *, created: int,
                    output: list[dict[str, Any]], status: str = "completed", finish: str | None = None,
                    chat_usage: dict[str, int] | None = None) -> dict[str, Any]:
    """The ``response`` object; ``finish`` is the upstream's finish reason (a reply cut at
    the token limit is ``incomplete``, as OpenAI marks it)."""
    incomplete = status == "completed" and finish == "length"
    return dict(echo, id=response_id, object="response", created_at=created, model=model, output=output,
                status="incomplete" if incomplete else status, error=None,
                incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
                completed_at=int(time.time()) if status == "completed" else None,
                usage=usage(chat_usage) if status != "in_progress" else None)


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: ".encode() + json.dumps(event).encode() + b"\n\n"


@dataclass
class _Open:
    """An output item being streamed."""

    index: int
    item: dict[str, Any]
    text: list[str] = field(default_factory=list)


class EventWriter:
    """Turns the gateway's chat chunks into Responses events, numbering them in order."""

    def __init__(self, response_id: str, model: str, echo: dict[str, Any], created: int,
                 leading: list[dict[str, Any]]):
        self.response_id, self.model, self.echo, self.created = response_id, model, echo, created
        self.seq = 0
        self.output: list[dict[str, Any]] = list(leading)
        self.message: _Open | None = None
        self.calls: dict[int, _Open] = {}
        self.finish: str | None = None
        self.chat_usage: dict[str, int] | None = None

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = dict(type=kind, sequence_number=self.seq, **fields)
        self.seq += 1
        return event

    def _response(self, status: str) -> dict[str, Any]:
        done = status != "in_progress"
        return response_object(self.response_id, self.model, self.echo, created=self.created,
                               output=self.output if done else [], status=status, finish=self.finish,
                               chat_usage=self.chat_usage)

    def start(self) -> Iterator[dict[str, Any]]:
        yield self._event("response.created", response=self._response("in_progress"))
        yield self._event("response.in_progress", response=self._response("in_progress"))
        for index, item in enumerate(self.output):  # the compaction item, whole from the start
            yield self._event("response.output_item.added", output_index=index, item=item)
            yield self._event("response.output_item.done", output_index=index, item=item)

    def _add(self, item: dict[str, Any]) -> _Open:
        opened = _Open(len(self.output), item)
        self.output.append(item)
        return opened

    def chunk(self, chunk: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The events of one ``chat.completion.chunk`` (from ``chat.stream``)."""
        if chunk.get("usage"):
            self.chat_usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                if self.message is None:
                    self.message = self._add(message_item(self.response_id, "", status="in_progress"))
                    item_id = self.message.item["id"]
                    yield self._event("response.output_item.added", output_index=self.message.index,
                                      item=dict(self.message.item))
                    yield self._event("response.content_part.added", item_id=item_id, output_index=self.message.index,
                                      content_index=0, part={"type": "output_text", "text": "", "annotations": []})
                self.message.text.append(text)
                yield self._event("response.output_text.delta", item_id=self.message.item["id"],
                                  output_index=self.message.index, content_index=0, delta=text, logprobs=[])
            for tc in delta.get("tool_calls") or []:
                index = int(tc.get("index") or 0)
                opened = self.calls.get(index)
                fn = tc.get("function") or {}
                if opened is None:
                    call = {"id": tc.get("id") or "", "function": {"name": fn.get("name") or "", "arguments": ""}}
                    opened = self.calls[index] = self._add(call_item(self.response_id, len(self.calls), call,
                                                                     status="in_progress"))
                    yield self._event("response.output_item.added", output_index=opened.index, item=dict(opened.item))
                elif fn.get("name"):
                    opened.item["name"] += fn["name"]
                if fn.get("arguments"):
                    opened.text.append(fn["arguments"])
                    yield self._event("response.function_call_arguments.delta", item_id=opened.item["id"],
                                      output_index=opened.index, delta=fn["arguments"])
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def finish_events(self) -> Iterator[dict[str, Any]]:
        """Every open item's done events, in output order, then ``response.completed``."""
        if self.message is None and not self.calls:  # an empty answer is still a message
            self.message = self._add(message_item(self.response_id, "", status="in_progress"))
            yield self._event("response.output_item.added", output_index=self.message.index,
                              item=dict(self.message.item))
            yield self._event("response.content_part.added", item_id=self.message.item["id"],
                              output_index=self.message.index, content_index=0,
                              part={"type": "output_text", "text": "", "annotations": []})
        opened = ([self.message] if self.message is not None else []) + [self.calls[i] for i in sorted(self.calls)]
        for item in sorted(opened, key=lambda o: o.index):
            if item.item["type"] == "message":
                text = "".join(item.text)
                part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                yield self._event("response.output_text.done", item_id=item.item["id"], output_index=item.index,
                                  content_index=0, text=text, logprobs=[])
                yield self._event("response.content_part.done", item_id=item.item["id"], output_index=item.index,
                                  content_index=0, part=part)
                done = dict(item.item, status="completed", content=[part])
            else:
                arguments = "".join(item.text)
                yield self._event("response.function_call_arguments.done", item_id=item.item["id"],
                                  output_index=item.index, name=item.item["name"], arguments=arguments)
                done = dict(item.item, status="completed", arguments=arguments)
            self.output[item.index] = done
            yield self._event("response.output_item.done", output_index=item.index, item=done)
        yield self._event("response.completed", response=self._response("completed"))

    def error(self, exc: GatewayError) -> dict[str, Any]:
        err = exc.error_object()
        code = err.get("code") if err.get("code") is not None else err.get("type")
        return self._event("error", code=str(code) if code is not None else None,
                           message=str(err.get("message") or ""), param=err.get("param"))
