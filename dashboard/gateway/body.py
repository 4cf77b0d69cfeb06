"""The body of ``POST /v1/chat/completions``, checked before anything is stored.

Only fields of OpenAI's chat completion request are accepted; an unknown field is refused
(as OpenAI does) rather than silently dropped or, worse, handed to litellm, where a field
such as ``api_base`` would choose the server's network peer. Fields that shape the model's
answer are forwarded upstream (:data:`FORWARDED`); ``metadata`` and ``stream_options`` are
the gateway's to read."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from compaction.errors import SessionValidationError
from compaction.messages import validate_message, validate_tools

from ..services.common import text_problem
from .errors import bad_request

# Sent upstream as given (litellm passes them on to an OpenAI-compatible server).
FORWARDED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "presence_penalty",
    "frequency_penalty", "logit_bias", "seed", "tool_choice", "parallel_tool_calls", "response_format",
    "user", "reasoning_effort", "logprobs", "top_logprobs",
})
READ_HERE = frozenset({"model", "messages", "stream", "stream_options", "tools", "n", "metadata", "store"})
KNOWN = FORWARDED | READ_HERE


@dataclass
class ChatBody:
    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    tools: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    user: str | None = None


def _drop_nulls(raw: dict[str, Any]) -> dict[str, Any]:
    """A message as the OpenAI SDK dumps it carries null fields (refusal, audio, function_call,
    tool_calls...); they say nothing and are not stored."""
    out = {k: v for k, v in raw.items() if v is not None}
    if out.get("tool_calls") == []:
        del out["tool_calls"]
    return out


def json_object(data: bytes) -> dict[str, Any]:
    """The body as a JSON object; a 400 saying why not."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


def model_name(body: dict[str, Any]) -> str:
    """The body's ``model``, checked (a 400 naming it otherwise) and stripped."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("model: give the model name as a non-empty string", param="model")
    if len(model) > 200 or text_problem(model):
        raise bad_request("model: at most 200 characters of valid text", param="model")
    return model.strip()


def parse(data: bytes) -> ChatBody:
    """The checked body; a GatewayError (400) naming the field otherwise."""
    body = json_object(data)
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise bad_request(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    model = model_name(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: give a non-empty list of messages", param="messages")
    cleaned = []
    for i, raw in enumerate(messages):
        if isinstance(raw, dict):
            raw = _drop_nulls(raw)
        try:
            validate_message(raw, i)
        except SessionValidationError as exc:
            where = f"messages[{i}]" + (f".{exc.field}" if exc.field else "")
            raise bad_request(f"{where}: {str(exc).split(': ', 1)[-1]}", param=where) from None
        cleaned.append(raw)
    n = body.get("n", 1)
    if n is not None and n != 1:
        raise bad_request("n: only n=1 is served", param="n")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("stream: give true or false", param="stream")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise bad_request("stream_options: an object, only with stream: true", param="stream_options")
    tools = body.get("tools") or []
    try:
        tools = validate_tools(tools) if tools else []
    except SessionValidationError as exc:
        raise bad_request(f"tools: {exc}", param="tools") from None
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad_request("metadata: an object of string values", param="metadata")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise bad_request("user: give a string", param="user")
    params = {k: v for k, v in body.items() if k in FORWARDED and v is not None}
    return ChatBody(model=model, messages=cleaned, stream=bool(stream),
                    include_usage=bool((options or {}).get("include_usage")), tools=tools,
                    metadata=metadata, params=params, user=user)
