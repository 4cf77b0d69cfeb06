"""``otlp``: OpenTelemetry spans of model calls, in OTLP's JSON encoding (an
``ExportTraceServiceRequest``: ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``, or
one such request a line as the collector's file exporter writes them). The OTLP receiver
(``POST /v1/traces``) reads its requests, JSON or protobuf, with the same functions.

A span is a model call when it carries messages in one of the shapes the GenAI semantic
conventions have had:

- **v1.37 and later**: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON: a list of
  ``{"role", "parts": [...]}``, parts ``text``, ``tool_call`` ``{id, name, arguments}``,
  ``tool_call_response`` ``{id, response}``), ``gen_ai.system_instructions`` (parts, placed
  first), ``gen_ai.tool.definitions``; as span attributes or on the
  ``gen_ai.client.inference.operation.details`` event;
- **events**: ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message`` (``content``, ``tool_calls``), ``gen_ai.tool.message``
  (``content``, ``id``), ``gen_ai.choice`` (``message`` or ``content``/``tool_calls``), and
  the oldest ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events
  (``gen_ai.prompt`` / ``gen_ai.completion``, OpenAI messages as JSON);
- **indexed attributes**: ``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_call_id`` /
  ``.tool_calls.K.{id,name,arguments}`` and ``gen_ai.completion.N.*``;
- **OpenInference** (``openinference.span.kind``): read as the ``phoenix`` format reads it.

Only inference spans count (``gen_ai.operation.name`` ``chat``, ``text_completion``,
``generate_content``, or none): an agent or tool span repeating a conversation's messages
is not a second copy of it. The model is ``gen_ai.response.model`` else
``gen_ai.request.model``; the provider's counts are ``gen_ai.usage.input_tokens`` /
``output_tokens`` (older: ``prompt_tokens`` / ``completion_tokens``). Conversations are
grouped by ``gen_ai.conversation.id`` (else ``session.id``), else by trace.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..messages import JSONObject, RawMessage
from . import phoenix
from ._base import DISTINCT, NO, Format, ImportedSession, JsonLines, Options, Sample, err
from ._calls import (
    Call,
    CallError,
    calls_from,
    chat_message,
    chat_messages,
    fold,
    maybe_json,
    text_id,
    timestamp,
    tools_of,
    usage,
)

_INFERENCE = frozenset({"chat", "text_completion", "generate_content"})
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_ROLE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _is_request(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans", obj.get("resource_spans")), list)


def _detect(sample: Sample) -> int:
    data = sample.value
    if isinstance(data, list):
        return DISTINCT if data and any(_is_request(x) for x in data[:20]) else NO
    return DISTINCT if _is_request(data) else NO


def spans_of(request: JSONObject) -> Iterator[tuple[str, JSONObject]]:
    """(where, span) of every span of an export request, JSON encoding (either spelling)."""
    for r, rs in enumerate(request.get("resourceSpans", request.get("resource_spans")) or []):
        if not isinstance(rs, dict):
            continue
        for s, ss in enumerate(rs.get("scopeSpans", rs.get("scope_spans")) or []):
            if not isinstance(ss, dict):
                continue
            for k, span in enumerate(ss.get("spans") or []):
                yield f"resourceSpans[{r}].scopeSpans[{s}].spans[{k}]", span


def _events(span: JSONObject) -> list[tuple[str, JSONObject]]:
    out = []
    for event in span.get("events") or []:
        if isinstance(event, dict):
            attrs: JSONObject = {}
            phoenix.flatten_kv(event.get("attributes"), attrs)
            out.append((str(event.get("name") or ""), attrs))
    return out


def _parts_message(raw: Any, what: str, default_role: str) -> list[RawMessage]:
    """One message of the v1.37 shape; a tool message with several responses gives several."""
    if not isinstance(raw, dict):
        raise CallError(f"{what}: a message must be an object")
    role = raw.get("role") or default_role
    parts = raw.get("parts")
    if not isinstance(parts, list):
        if "content" in raw:  # an OpenAI-shaped message where parts were expected
            return [chat_message(raw, what, default_role)]
        raise CallError(f"{what}: a message without parts")
    texts: list[str] = []
    calls: list[JSONObject] = []
    results: list[RawMessage] = []
    for j, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind == "tool_call":
            calls.append({"id": part.get("id"), "name": part.get("name"), "args": part.get("arguments")})
        elif kind == "tool_call_response":
            response = part.get("response")
            results.append({"role": "tool", "tool_call_id": part.get("id"),
                            "content": response if isinstance(response, str) else json.dumps(response)})
        elif kind in ("reasoning", "thinking"):
            continue
        else:
            raise CallError(f"{what}: part {j} of type {kind!r} cannot be imported")
    if results:
        return [chat_message(r, f"{what} response {i}") for i, r in enumerate(results)]
    obj: JSONObject = {"role": role, "content": "\n".join(texts) if texts else None}
    if calls:
        obj["tool_calls"] = calls
    return [chat_message(obj, what, default_role)]


def _parts_list(value: Any, what: str, default_role: str) -> list[RawMessage]:
    value = maybe_json(value, what)
    if value is None:
        return []
    if not isinstance(value, list):
        raise CallError(f"{what} must be a JSON list of messages")
    out: list[RawMessage] = []
    for i, raw in enumerate(value):
        out.extend(_parts_message(raw, f"{what}[{i}]", default_role))
    return out


def _system(value: Any, what: str) -> list[RawMessage]:
    value = maybe_json(value, what)
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "system", "content": value}]
    if not isinstance(value, list):
        raise CallError(f"{what} must be a list of parts")
    texts = [str(p.get("content") or "") for p in value if isinstance(p, dict) and p.get("type") == "text"]
    return [{"role": "system", "content": "\n".join(texts)}] if texts else []


def _indexed_messages(attrs: JSONObject, prefix: str, what: str, default_role: str) -> list[RawMessage]:
    out = []
    for i, fields in enumerate(phoenix.indexed(attrs, prefix, what)):
        calls = [{"id": tc.get("id"), "name": tc.get("name"), "args": tc.get("arguments")}
                 for tc in phoenix.indexed(fields, "tool_calls", f"{what} {prefix}.{i}")]
        obj: JSONObject = {"role": fields.get("role") or default_role, "content": fields.get("content")}
        if calls:
            obj["tool_calls"] = calls
        if fields.get("tool_call_id") is not None:
            obj["tool_call_id"] = fields["tool_call_id"]
        out.append(chat_message(obj, f"{what} {prefix}.{i}", default_role))
    return out


def _event_messages(events: list[tuple[str, JSONObject]], what: str) -> tuple[list[RawMessage], list[RawMessage]]:
    inputs: list[RawMessage] = []
    outputs: list[RawMessage] = []
    for n, (name, attrs) in enumerate(events):
        where = f"{what} event {n} ({name})"
        if name in _ROLE_EVENTS:
            obj: JSONObject = {"role": _ROLE_EVENTS[name], "content": maybe_json(attrs.get("content"), where)
                               if name != "gen_ai.tool.message" else attrs.get("content")}
            if attrs.get("tool_calls") is not None:
                obj["tool_calls"] = maybe_json(attrs["tool_calls"], f"{where} tool_calls")
            if name == "gen_ai.tool.message":
                obj["tool_call_id"] = attrs.get("id")
            inputs.append(chat_message(obj, where))
        elif name == "gen_ai.choice":
            message = maybe_json(attrs.get("message"), f"{where} message")
            if not isinstance(message, dict):
                message = {"role": "assistant", "content": attrs.get("content")}
                if attrs.get("tool_calls") is not None:
                    message["tool_calls"] = maybe_json(attrs["tool_calls"], f"{where} tool_calls")
            outputs.append(chat_message({"role": "assistant", **message}, where, "assistant"))
        elif name == "gen_ai.content.prompt":
            inputs.extend(chat_messages(attrs.get("gen_ai.prompt"), f"{where} gen_ai.prompt"))
        elif name == "gen_ai.content.completion":
            outputs.extend(chat_messages(attrs.get("gen_ai.completion"), f"{where} gen_ai.completion", "assistant"))
    return inputs, outputs


def call_of(where: str, span: JSONObject) -> Call | None:
    """The model call a span records, None for any other span; a fault raises CallError."""
    span_id = text_id(span.get("spanId", span.get("span_id")))
    if span_id is None:
        raise CallError("a span without a spanId")
    what = f"span {span_id}"
    attrs = phoenix.attributes_of(span)
    if phoenix.SPAN_KIND in attrs:
        return phoenix.call_of(where, span)
    operation = attrs.get("gen_ai.operation.name")
    if operation is not None and operation not in _INFERENCE:
        return None
    events = _events(span)
    details = next((a for name, a in events if name == _DETAILS_EVENT), {})
    source = attrs if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs else details
    system = _system(source.get("gen_ai.system_instructions"), f"{what} gen_ai.system_instructions")
    inputs = _parts_list(source.get("gen_ai.input.messages"), f"{what} gen_ai.input.messages", "user")
    outputs = _parts_list(source.get("gen_ai.output.messages"), f"{what} gen_ai.output.messages", "assistant")
    if not inputs and not outputs:  # the older shapes: events, then indexed attributes
        event_in, event_out = _event_messages(events, what)
        inputs = event_in or _indexed_messages(attrs, "gen_ai.prompt", what, "user")
        outputs = event_out or _indexed_messages(attrs, "gen_ai.completion", what, "assistant")
    inputs = system + inputs
    if inputs and inputs[0]["role"] == "system" and len(inputs) > 1 and inputs[1]["role"] == "system" \
            and inputs[0]["content"] == inputs[1]["content"]:
        del inputs[0]  # the instructions also came as the first input message
    if not inputs:
        if operation is None:
            return None  # a span of another kind, not a model call
        raise CallError(f"{what} is a {operation} span without input messages (content capture off?)",
                        "no_messages")
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    return Call(
        id=span_id, where=f"{what} ({where})", trace_id=text_id(span.get("traceId", span.get("trace_id"))),
        conversation=text_id(attrs.get("gen_ai.conversation.id")) or text_id(attrs.get("session.id")),
        start=timestamp(span.get("startTimeUnixNano", span.get("start_time_unix_nano")), f"{what} start time"),
        end=timestamp(span.get("endTimeUnixNano", span.get("end_time_unix_nano")), f"{what} end time"),
        input=inputs, output=outputs,
        tools=tools_of(maybe_json(source.get("gen_ai.tool.definitions"), f"{what} gen_ai.tool.definitions")),
        model=model if isinstance(model, str) else None,
        usage=usage(attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens")),
                    attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens"))),
    )


def calls_of(request: JSONObject, source: str | None, label: str = "") -> list[Call]:
    """Every model call of one export request; the first bad span raises, naming it."""
    return calls_from(((f"{label}{where}", span) for where, span in spans_of(request)), call_of, source, item="span")


def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    if isinstance(data, JsonLines):
        requests = [(f"line {n}: ", r) for n, r in data]
    elif isinstance(data, list):
        requests = [(f"request {i}: ", r) for i, r in enumerate(data)]
    else:
        requests = [("", data)]
    calls: list[Call] = []
    for label, request in requests:
        if not _is_request(request):
            raise err(f"{label}expected an OTLP export request (resourceSpans)", "bad_record", source)
        calls.extend(calls_of(request, source, label))
    return fold(calls, "otlp", source, "model-call spans")


FORMAT = Format(name="otlp", order=80, detect=_detect, convert=_convert, reads_jsonl=True,
                label="OpenTelemetry OTLP JSON (GenAI or OpenInference spans)")
