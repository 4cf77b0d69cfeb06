"""One ``POST /v1/messages`` (Anthropic's Messages API) through the gateway.

The body is checked and converted to the OpenAI form (``anthropic_wire``), then the request
goes the same way as a chat completion (``chat``): the same session identity and storage,
the same compaction before the call, the same upstream through litellm (so an Anthropic
client can be served by any upstream the operator configured). Only the ends differ: the
``context_management`` edits become overrides of the policy for this request
(``anthropic_edits``), and the answer is Anthropic's message or event stream.

When a compaction ran before the call and the request asked for ``compact_20260112``, the
answer starts with a ``compaction`` block holding the run's summary (a client that did not
ask gets no block it may not know; the ``X-Compaction-Run`` header says it in both cases).
With ``pause_after_compaction`` the answer is that block alone, ``stop_reason:
"compaction"``, and the model is not called; the client sends its history again (with the
block) to continue."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compaction.errors import SessionValidationError
from compaction.messages import validate_message, validate_tools

from ..models import Project
from ..services.policies import project_policy
from . import anthropic_wire as wire
from . import chat
from .anthropic_edits import ContextEdits, check_against, parse_context_management
from .body import ChatBody, json_object, model_name
from .errors import bad_request

# Read here or forwarded upstream (as OpenAI's parameter of the same meaning).
KNOWN = frozenset({"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
                   "temperature", "top_p", "tools", "tool_choice", "context_management", "service_tier"})
# Anthropic fields an OpenAI-compatible upstream has no equivalent for: refused by name.
NOT_SERVED = frozenset({"top_k", "thinking", "container", "mcp_servers", "output_format", "output_config"})
# The API version is a date; the gateway serves one wire shape for all of them (the fields
# it does not serve are refused by name, whatever the version).
_VERSION = re.compile(r"^20\d\d-[01]\d-[0-3]\d$")


@dataclass
class MessagesRequest:
    chat: ChatBody
    edits: ContextEdits
    fields: dict[str, Any]  # the body's fields other than its messages, as sent (the call's inspector page)


def check_version(value: str | None) -> None:
    if not value:
        raise bad_request("anthropic-version: header is required (the Anthropic SDK sends it; e.g. 2023-06-01)")
    if not _VERSION.match(value):
        raise bad_request(f"anthropic-version: {value[:40]!r} is not an API version (a date such as 2023-06-01)")


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_request(f"{name}: give a number from {low:g} to {high:g}", param=name)
    return value


def _validated(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, raw in enumerate(messages):
        try:
            validate_message(raw, i)
        except SessionValidationError as exc:
            raise bad_request(f"messages: converted message {i} ({raw.get('role')}) is refused: "
                              f"{str(exc).split(': ', 1)[-1]}", param="messages") from None
    try:
        return validate_tools(tools) if tools else []
    except SessionValidationError as exc:
        raise bad_request(f"tools: {exc}", param="tools") from None


def parse(data: bytes) -> MessagesRequest:
    """The checked, converted body; a GatewayError (400) naming the field otherwise."""
    body = json_object(data)
    for name in sorted(set(body) - KNOWN):
        if name in NOT_SERVED:
            raise bad_request(f"{name}: not served by this gateway (its upstream is reached through an "
                              f"OpenAI-compatible call, which has no such parameter)", param=name)
        raise bad_request(f"{name}: Extra inputs are not permitted", param=name)
    model = model_name(body)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise bad_request("max_tokens: give a whole number of at least 1 (it is required)", param="max_tokens")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("stream: give true or false", param="stream")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or set(metadata) - {"user_id"}:
        raise bad_request("metadata: only 'user_id' is accepted", param="metadata")
    user = metadata.get("user_id")
    if user is not None and not isinstance(user, str):
        raise bad_request("metadata.user_id: give a string", param="metadata.user_id")
    params: dict[str, Any] = {"max_tokens": max_tokens}
    for name, high in (("temperature", 1.0), ("top_p", 1.0)):
        value = _number(body, name, 0.0, high)
        if value is not None:
            params[name] = value
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise bad_request("stop_sequences: give a list of non-empty strings", param="stop_sequences")
        if stops:
            params["stop"] = stops
    tier = body.get("service_tier")
    if tier is not None and tier not in ("auto", "standard_only"):
        raise bad_request("service_tier: give 'auto' or 'standard_only'", param="service_tier")
    tools = wire.to_openai_tools(body.get("tools"))
    if body.get("tool_choice") is not None and not tools:
        raise bad_request("tool_choice: give tools as well", param="tool_choice")
    params.update(wire.to_openai_tool_choice(body.get("tool_choice")))
    messages = wire.to_openai_messages(body.get("system"), body.get("messages"))
    tools = _validated(messages, tools)
    edits = parse_context_management(body.get("context_management"))
    return MessagesRequest(ChatBody(model=model, messages=messages, stream=bool(stream), include_usage=True,
                                    tools=tools, params=params, user=user), edits,
                           {k: v for k, v in body.items() if k != "messages"})


@dataclass
class Answer:
    """What the view sends: a message object, or (name, data) stream events."""

    prep: chat.Prepared
    message: dict[str, Any] | None = None
    events: Iterator[tuple[str, dict[str, Any]]] | None = None


def _leading(prep: chat.Prepared, edits: ContextEdits) -> list[dict[str, Any]]:
    run = prep.run
    if not edits.compact or run is None or not run.summary:
        return []
    return [wire.compaction_block(run.summary)]


def _applied(prep: chat.Prepared, edits: ContextEdits) -> dict[str, Any] | None:
    """Anthropic's ``context_management`` of the answer (a request with edits only): the
    tool results the run before the call cleared, as a ``clear_tool_uses_20250919`` edit."""
    if not (edits.compact or edits.clear_tool_uses):
        return None
    applied: list[dict[str, Any]] = []
    run = prep.run
    cleared = [row for row in (run.ledger if run is not None else []) if row.get("fate") == "cleared"]
    if edits.clear_tool_uses and cleared:
        freed = sum(int(row.get("tokens_before") or 0) - int(row.get("tokens_after") or 0) for row in cleared)
        applied.append({"type": "clear_tool_uses_20250919", "cleared_tool_uses": len(cleared),
                        "cleared_input_tokens": max(freed, 0)})
    return {"applied_edits": applied}


def answer(project: Project, req: MessagesRequest, session_header: str | None) -> Answer:
    """Run the request; a GatewayError before anything is sent (the view shapes it)."""
    base, _row = project_policy(project)
    overrides = check_against(req.edits, base)
    prep = chat.prepare(project, req.chat, session_header, overrides or None, endpoint="messages",
                        request_fields=req.fields)
    leading = _leading(prep, req.edits)
    model = req.chat.model
    if leading and req.edits.pause_after_compaction and prep.run is not None:
        paused = wire.paused_message(prep.session.pk, prep.run.pk, model, leading[0]["content"],
                                     prep.session.context_total)
        if not req.chat.stream:
            return Answer(prep, message=paused)
        return Answer(prep, events=wire.paused_events(paused))
    managed = _applied(prep, req.edits)
    if not req.chat.stream:
        message = wire.to_message(chat.complete(prep), model, leading)
        if managed is not None:
            message["context_management"] = managed
        prep.reply = dict(prep.reply or {}, answer=message)  # the reply as this client got it
        return Answer(prep, message=message)
    chunks = chat.stream(prep)
    # The first chunk is awaited here, so an upstream that fails at once answers with its
    # own status (what the SDK turns into RateLimitError and the like).
    first = next(chunks, None)
    start: dict[str, Any] = {"id": wire.message_id(first["id"] if first else f"gw-{prep.session.pk}"), "type": "message",
             "role": "assistant", "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": prep.session.context_total, "output_tokens": 0}}
    return Answer(prep, events=wire.events(_chained(first, chunks), start, leading, managed))


def _chained(first: dict[str, Any] | None, rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    if first is not None:
        yield first
    yield from rest
