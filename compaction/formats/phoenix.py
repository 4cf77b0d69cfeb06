"""``phoenix``: Arize Phoenix span exports (OpenInference semantic conventions), JSON or JSONL.

Shapes read:

- Phoenix's REST spans (``GET /v1/projects/{project}/spans``, ``{"data": [...],
  "next_cursor"}``, or the client's list of them): ``{"name", "context": {"trace_id",
  "span_id"}, "span_kind", "parent_id", "start_time", "end_time", "status_code",
  "attributes": {...}}``, attributes flat (``"llm.input_messages.0.message.role"``) or nested
  (``{"llm": {"input_messages": [{"message": {...}}]}}``);
- spans-dataframe records (``get_spans_dataframe().to_json(orient="records")``):
  ``"context.span_id"``, ``"attributes.llm.input_messages"`` columns;
- OTLP-shaped spans (``/spans/otlpv1`` and OTLP JSON): ``trace_id``/``traceId``,
  ``span_id``/``spanId``, ``start_time_unix_nano``, ``attributes`` as ``[{"key", "value":
  {"string_value": ...}}]``.

Model calls are the spans of kind ``LLM`` (``span_kind`` or ``openinference.span.kind``).
Their messages are ``llm.input_messages.N.message.*`` and ``llm.output_messages.N.message.*``:
``role``, ``content`` or ``contents.J.message_content.{type,text,image.image.url}``,
``tool_calls.K.tool_call.{id,function.name,function.arguments}``, ``tool_call_id``. A span
without them falls back to ``input.value``/``output.value`` holding an OpenAI request or
completion as JSON. ``llm.model_name`` names the model, ``llm.token_count.prompt`` /
``.completion`` are the provider's counts, ``llm.tools.N.tool.json_schema`` the tools.
Conversations are grouped by ``session.id``, else by trace. A message list with a gap in its
numbering (attributes dropped by a count limit) is refused, naming the span and the index.
"""
from __future__ import annotations

from typing import Any

from ..messages import JSONObject, RawMessage
from ._base import Format, ImportedSession, Options, Sample
from ._calls import (
    Call,
    CallError,
    calls_from,
    chat_message,
    chat_messages,
    detect_records,
    fold,
    maybe_json,
    pick,
    records,
    text_id,
    timestamp,
    tools_of,
    unwrapped,
    usage,
)

SPAN_KIND = "openinference.span.kind"


def flatten(value: Any, prefix: str, out: JSONObject) -> None:
    """Nested attributes to OpenInference's dotted keys (lists by index)."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            flatten(v, f"{prefix}.{i}", out)
    else:
        out[prefix] = value


def _any_value(value: Any) -> Any:
    """An OTLP AnyValue (JSON encoding, either spelling) as a plain value."""
    if not isinstance(value, dict):
        return value
    for key in ("string_value", "stringValue", "bool_value", "boolValue", "double_value", "doubleValue"):
        if key in value:
            return value[key]
    for key in ("int_value", "intValue"):
        if key in value:
            raw = value[key]
            return int(raw) if isinstance(raw, str) and raw.lstrip("-").isdigit() else raw
    for key in ("array_value", "arrayValue"):
        if key in value:
            return [_any_value(v) for v in (value[key] or {}).get("values") or []]
    return None


def flatten_kv(raw: Any, out: JSONObject) -> None:
    """OTLP's key/value list (or a plain dict) into ``out``."""
    if isinstance(raw, list):
        for kv in raw:
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                out[kv["key"]] = _any_value(kv.get("value"))
    elif isinstance(raw, dict):
        flatten(raw, "", out)


def attributes_of(span: JSONObject) -> JSONObject:
    """The span's attributes as one flat dict of dotted keys."""
    out: JSONObject = {}
    raw = span.get("attributes")
    if isinstance(raw, list):  # OTLP key/value list
        flatten_kv(raw, out)
    elif isinstance(raw, dict):
        flatten(raw, "", out)
    for key, value in span.items():  # dataframe columns
        if key.startswith("attributes."):
            flatten(value, key[len("attributes."):], out)
    return out


def _span_id(span: JSONObject) -> Any:
    ctx = span.get("context") if isinstance(span.get("context"), dict) else {}
    return pick(ctx, "span_id", "spanId") or pick(span, "context.span_id", "span_id", "spanId")


def _trace_id(span: JSONObject) -> Any:
    ctx = span.get("context") if isinstance(span.get("context"), dict) else {}
    return pick(ctx, "trace_id", "traceId") or pick(span, "context.trace_id", "trace_id", "traceId")


def _is_span(obj: Any) -> bool:
    if not isinstance(obj, dict) or _span_id(obj) is None:
        return False
    if "span_kind" in obj or "attributes" in obj or any(k.startswith("attributes.") for k in obj):
        return True
    return False


def _is_openinference(obj: Any) -> bool:
    if not _is_span(obj):
        return False
    if "span_kind" in obj:
        return True
    keys = attributes_of(obj)
    return SPAN_KIND in keys or any(k.startswith(("llm.", "input.value")) for k in keys)


def _detect(sample: Sample) -> int:
    return detect_records(sample, _is_openinference, "data")


def indexed(attrs: JSONObject, prefix: str, what: str) -> list[JSONObject]:
    """``prefix.N.rest`` keys as a list of {rest: value}, refusing gaps in N."""
    found: dict[int, JSONObject] = {}
    dotted = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(dotted):
            continue
        index, _, rest = key[len(dotted):].partition(".")
        if not index.isdigit():
            continue
        found.setdefault(int(index), {})[rest] = value
    if not found:
        return []
    if sorted(found) != list(range(len(found))):
        missing = next(i for i in range(max(found) + 1) if i not in found)
        raise CallError(f"{what}: {prefix} has no entry {missing} (entries run to {max(found)}): attributes "
                        "were dropped or cut off")
    return [found[i] for i in range(len(found))]


def _message(fields: JSONObject, what: str, default_role: str) -> RawMessage:
    role = fields.get("message.role")
    if role is None:
        raise CallError(f"{what} has no message.role (attributes dropped or cut off?)")
    content: Any = fields.get("message.content")
    parts = indexed(fields, "message.contents", what)
    if content is None and parts:
        content = []
        for j, part in enumerate(parts):
            kind = part.get("message_content.type")
            if kind == "text":
                content.append({"type": "text", "text": part.get("message_content.text") or ""})
            elif kind == "image":
                content.append({"type": "image_url", "image_url": {"url": part.get("message_content.image.image.url")}})
            else:
                raise CallError(f"{what}: content part {j} of type {kind!r} cannot be imported")
    calls = []
    for tc in indexed(fields, "message.tool_calls", what):
        args = tc.get("tool_call.function.arguments")
        calls.append({"id": tc.get("tool_call.id"), "function": {
            "name": tc.get("tool_call.function.name"), "arguments": args if args is not None else "{}"}})
    obj: JSONObject = {"role": role, "content": content}
    if calls:
        obj["tool_calls"] = calls
    if fields.get("message.tool_call_id") is not None:
        obj["tool_call_id"] = fields["message.tool_call_id"]
    return chat_message(obj, what, default_role)


def _messages(attrs: JSONObject, side: str, what: str) -> list[RawMessage]:
    default_role = "user" if side == "input" else "assistant"
    listed = indexed(attrs, f"llm.{side}_messages", what)
    if listed:
        return [_message(m, f"{what} llm.{side}_messages.{i}", default_role) for i, m in enumerate(listed)]
    value = attrs.get(f"{side}.value")
    if value is None:
        return []
    mime = attrs.get(f"{side}.mime_type")
    if mime == "application/json" or (isinstance(value, str) and value.lstrip()[:1] in ("{", "[")):
        parsed = maybe_json(value, f"{what} {side}.value")
        if isinstance(parsed, dict) and isinstance(parsed.get("choices"), list):
            return [chat_message(c.get("message"), f"{what} {side}.value", default_role)
                    for c in parsed["choices"][:1] if isinstance(c, dict)]
        if isinstance(parsed, dict) and "messages" in parsed or isinstance(parsed, list):
            return chat_messages(parsed, f"{what} {side}.value", default_role)
        raise CallError(f"{what}: {side}.value is JSON but no message list or completion")
    return chat_messages(value, f"{what} {side}.value", default_role)


def _tools(attrs: JSONObject, what: str) -> list[JSONObject]:
    schemas = [maybe_json(t.get("tool.json_schema"), f"{what} llm.tools.{i}")
               for i, t in enumerate(indexed(attrs, "llm.tools", what))]
    return tools_of([s for s in schemas if isinstance(s, dict)])


def call_of(where: str, span: JSONObject) -> Call | None:
    """The model call an LLM span records, None for any other span; a fault raises CallError."""
    span_id = text_id(_span_id(span))
    if span_id is None:
        raise CallError("a span without a span_id")
    what = f"span {span_id}"
    attrs = attributes_of(span)
    kind = span.get("span_kind") or attrs.get(SPAN_KIND)
    if kind != "LLM":
        return None
    messages = _messages(attrs, "input", what)
    if not messages:
        raise CallError(f"{what} is an LLM span without input messages (no llm.input_messages, no input.value)",
                        "no_messages")
    return Call(
        id=span_id, where=f"{what} ({where})", trace_id=text_id(_trace_id(span)),
        conversation=text_id(attrs.get("session.id")),
        start=timestamp(pick(span, "start_time", "startTime", "start_time_unix_nano", "startTimeUnixNano"),
                        f"{what} start time"),
        end=timestamp(pick(span, "end_time", "endTime", "end_time_unix_nano", "endTimeUnixNano"),
                      f"{what} end time"),
        input=messages, output=_messages(attrs, "output", what), tools=_tools(attrs, what),
        model=attrs.get("llm.model_name") if isinstance(attrs.get("llm.model_name"), str) else None,
        usage=usage(attrs.get("llm.token_count.prompt"), attrs.get("llm.token_count.completion")),
    )


def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    calls = calls_from(records(unwrapped(data, "data"), "span"), call_of, source, item="span")
    return fold(calls, "phoenix", source, "LLM spans")


FORMAT = Format(name="phoenix", order=60, detect=_detect, convert=_convert, reads_jsonl=True,
                label="Phoenix / OpenInference spans (JSON or JSONL export)")
