"""Anthropic's Messages wire format, converted to and from the OpenAI message form the
gateway stores and forwards.

Requests: the ``system`` prompt becomes a leading system message; a user message's
``tool_result`` blocks become ``tool`` messages (before the user's other blocks, so every
result follows its call); an assistant message's ``tool_use`` blocks become tool calls whose
arguments are the input as canonical JSON; ``thinking`` blocks and ``cache_control`` marks
are dropped (the OpenAI form has no place for them) and a ``compaction`` block, the
gateway's own summary sent back, is dropped too: the stored session already holds the
history it stands for and the live context forwarded upstream already has the summary in
its place (which is how Anthropic's "blocks before the compaction block are dropped" reads
here). A history that starts at a compaction block (the client dropped the blocks before it
itself) keeps the summary as its opening user message. The conversion is deterministic, so a client resending its history is recognised.

Answers: an OpenAI completion becomes a ``message`` (text and ``tool_use`` blocks, a
``stop_reason``, ``usage`` in input/output tokens); a stream of OpenAI chunks becomes
Anthropic's event sequence (``message_start``, ``content_block_*``, ``message_delta``,
``message_stop``). Errors are Anthropic's ``{"type": "error", "error": {...}}``."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .errors import GatewayError, bad_request
from .wire import tool_input

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
                "content_filter": "refusal"}
# Anthropic's error type for each status (what its SDK maps back to its exception classes).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error",
               529: "overloaded_error"}
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking", "compaction"})


def canonical_arguments(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


# -- requests ------------------------------------------------------------------------------

def _text_of(block: dict[str, Any], where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise bad_request(f"{where}.text: give a string", param=f"{where}.text")
    return text


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise bad_request(f"{where}: give a string or a list of content blocks", param=where)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise bad_request(f"{where}.{i}: give a content block object with a 'type'", param=f"{where}.{i}")
    return content


def _image_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type")
        if not isinstance(media, str):
            raise bad_request(f"{where}.source.media_type: give the image's media type", param=f"{where}.source")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{source['data']}"}}
    # A url source is refused: litellm downloads image URLs for some providers, and the
    # server must not fetch an address a client chose.
    raise bad_request(f"{where}.source: give a base64 image source (url sources are not served: the "
                      f"gateway does not fetch addresses a client names)", param=f"{where}.source")


def _parts(blocks: list[tuple[int, dict[str, Any]]], where: str) -> str | list[dict[str, Any]] | None:
    """Text and image blocks as OpenAI content: one text block stays a string."""
    parts: list[dict[str, Any]] = []
    for i, block in blocks:
        kind = block["type"]
        if kind == "text":
            parts.append({"type": "text", "text": _text_of(block, f"{where}.{i}")})
        elif kind == "image":
            parts.append(_image_part(block, f"{where}.{i}"))
        else:
            raise bad_request(f"{where}.{i}.type: a {kind!r} block is not served by this gateway here",
                              param=f"{where}.{i}.type")
    if not parts:
        return None
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.tool_use_id: give the id of the tool_use this answers", param=f"{where}.tool_use_id")
    content = block.get("content", "")
    if isinstance(content, str):
        text: str | list[dict[str, Any]] = content
    else:
        inner = _blocks(content, f"{where}.content")
        converted = _parts(list(enumerate(inner)), f"{where}.content")
        text = "" if converted is None else converted
    if block.get("is_error") is True:
        # OpenAI's tool message has no error flag; the marker keeps the fact in the text.
        text = f"[tool error] {text}" if isinstance(text, str) else [{"type": "text", "text": "[tool error]"}, *text]
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _user(content: Any, where: str) -> list[dict[str, Any]]:
    blocks = _blocks(content, where)
    results = [_tool_result(b, f"{where}.{i}") for i, b in enumerate(blocks) if b["type"] == "tool_result"]
    rest = [(i, b) for i, b in enumerate(blocks) if b["type"] != "tool_result" and b["type"] not in _DROPPED_BLOCKS]
    out = list(results)
    parts = _parts(rest, where)
    if parts is not None or not results:
        out.append({"role": "user", "content": "" if parts is None else parts})
    return out


def _assistant(content: Any, where: str) -> list[dict[str, Any]]:
    blocks = _blocks(content, where)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    compaction_only = bool(blocks)
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind != "compaction":
            compaction_only = False
        if kind == "text":
            texts.append(_text_of(block, f"{where}.{i}"))
        elif kind == "tool_use":
            cid, name, args = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(cid, str) or not cid or not isinstance(name, str) or not name:
                raise bad_request(f"{where}.{i}: a tool_use block needs an 'id' and a 'name'", param=f"{where}.{i}")
            if not isinstance(args, dict):
                raise bad_request(f"{where}.{i}.input: give an object", param=f"{where}.{i}.input")
            calls.append({"id": cid, "type": "function",
                          "function": {"name": name, "arguments": canonical_arguments(args)}})
        elif kind not in _DROPPED_BLOCKS:
            raise bad_request(f"{where}.{i}.type: a {kind!r} block is not served by this gateway",
                              param=f"{where}.{i}.type")
    if compaction_only:
        # A paused answer (only the compaction block) sent back: nothing of the conversation.
        return []
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _leading_summary(content: Any) -> list[dict[str, Any]]:
    """A history that starts at a compaction block (the client dropped what came before it,
    as Anthropic allows): its summary becomes the opening user message, so the context and
    a session started from this history keep it."""
    if not isinstance(content, list):
        return []
    return [{"role": "user", "content": block["content"]} for block in content
            if isinstance(block, dict) and block.get("type") == "compaction"
            and isinstance(block.get("content"), str) and block["content"]][:1]


def system_message(system: Any) -> dict[str, Any] | None:
    if system is None:
        return None
    if isinstance(system, str):
        return {"role": "system", "content": system} if system else None
    if not isinstance(system, list):
        raise bad_request("system: give a string or a list of text blocks", param="system")
    texts = []
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise bad_request(f"system.{i}: give a text block", param=f"system.{i}")
        texts.append(_text_of(block, f"system.{i}"))
    return {"role": "system", "content": "\n\n".join(texts)} if texts else None


def to_openai_messages(system: Any, messages: Any) -> list[dict[str, Any]]:
    """The request's system prompt and messages in the OpenAI form; a 400 naming the field."""
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: give a non-empty list of messages", param="messages")
    out: list[dict[str, Any]] = []
    first = system_message(system)
    if first is not None:
        out.append(first)
    for i, raw in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(raw, dict):
            raise bad_request(f"{where}: give a message object", param=where)
        unknown = sorted(set(raw) - {"role", "content"})
        if unknown:
            raise bad_request(f"{where}.{unknown[0]}: Extra inputs are not permitted", param=f"{where}.{unknown[0]}")
        role = raw.get("role")
        if "content" not in raw:
            raise bad_request(f"{where}.content: Field required", param=f"{where}.content")
        if role == "user":
            out.extend(_user(raw["content"], f"{where}.content"))
        elif role == "assistant":
            if i == 0:
                out.extend(_leading_summary(raw["content"]))
            out.extend(_assistant(raw["content"], f"{where}.content"))
        else:
            raise bad_request(f"{where}.role: give 'user' or 'assistant', not {role!r}", param=f"{where}.role")
    return out


def to_openai_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise bad_request("tools: give a list of tools", param="tools")
    out = []
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, dict):
            raise bad_request(f"{where}: give a tool object", param=where)
        if tool.get("type") not in (None, "custom"):
            raise bad_request(f"{where}.type: the server tool {tool.get('type')!r} is not served by this gateway "
                              f"(only client tools with an input_schema)", param=f"{where}.type")
        name, schema = tool.get("name"), tool.get("input_schema")
        if not isinstance(name, str) or not name:
            raise bad_request(f"{where}.name: Field required", param=f"{where}.name")
        if not isinstance(schema, dict):
            raise bad_request(f"{where}.input_schema: give a JSON schema object", param=f"{where}.input_schema")
        function: dict[str, Any] = {"name": name, "parameters": schema}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def to_openai_tool_choice(choice: Any) -> dict[str, Any]:
    """OpenAI's ``tool_choice`` (and ``parallel_tool_calls``) for Anthropic's ``tool_choice``."""
    if choice is None:
        return {}
    if not isinstance(choice, dict):
        raise bad_request("tool_choice: give an object with a 'type'", param="tool_choice")
    kind = choice.get("type")
    params: dict[str, Any] = {}
    if kind == "auto":
        params["tool_choice"] = "auto"
    elif kind == "any":
        params["tool_choice"] = "required"
    elif kind == "none":
        params["tool_choice"] = "none"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        params["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise bad_request("tool_choice.type: give 'auto', 'any', 'none' or 'tool' with a name",
                          param="tool_choice.type")
    if choice.get("disable_parallel_tool_use") is True and kind != "none":
        params["parallel_tool_calls"] = False
    return params


# -- answers -------------------------------------------------------------------------------

def usage(openai_usage: dict[str, int] | None, input_estimate: int = 0) -> dict[str, int]:
    u = openai_usage or {}
    return {"input_tokens": int(u.get("prompt_tokens") or input_estimate),
            "output_tokens": int(u.get("completion_tokens") or 0)}


def compaction_block(summary: str) -> dict[str, Any]:
    return {"type": "compaction", "content": summary}


def to_message(completion: dict[str, Any], model: str, leading: list[dict[str, Any]]) -> dict[str, Any]:
    """The Anthropic ``message`` for an OpenAI completion, after the ``leading`` blocks."""
    choice = completion["choices"][0]
    reply = choice["message"]
    content = list(leading)
    if reply.get("content"):
        content.append({"type": "text", "text": reply["content"]})
    for call in reply.get("tool_calls") or []:
        content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                        "input": tool_input(call["function"]["arguments"])})
    return {"id": message_id(completion["id"]), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
            "stop_sequence": None, "usage": usage(completion.get("usage"))}


def paused_message(session_id: int, run_id: int, model: str, summary: str, input_tokens: int) -> dict[str, Any]:
    """The answer of a request whose compaction pauses: the compaction block only."""
    return {"id": f"msg_gw_{session_id}_run_{run_id}", "type": "message", "role": "assistant", "model": model,
            "content": [compaction_block(summary)], "stop_reason": "compaction", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0}}


def message_id(upstream_id: str) -> str:
    return upstream_id if upstream_id.startswith("msg_") else f"msg_{upstream_id}"


def events(chunks: Iterator[dict[str, Any]], start: dict[str, Any], leading: list[dict[str, Any]],
           context_management: dict[str, Any] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Anthropic's stream events (name, data) for OpenAI chunk objects. ``start`` is the
    message of ``message_start`` (content empty); ``leading`` blocks (the compaction block)
    are sent whole before the upstream's; ``context_management`` rides on ``message_delta``."""
    yield "message_start", {"type": "message_start", "message": start}
    index = 0
    for block in leading:
        opening = dict(block, content=None) if block["type"] == "compaction" else block
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        if block["type"] == "compaction":
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "compaction_delta", "content": block["content"]}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    open_kind: tuple[str, int] | None = None  # ("text", 0) or ("tool", OpenAI tool index)
    # The open tool block's arguments, sent as one input_json_delta when it closes: the
    # client parses what it is sent as an object, and only whole arguments can be checked
    # to be one (tool_input keeps other text, or JSON nested too deep, under "arguments").
    arguments = ""
    finish: str | None = None
    usage_seen: dict[str, int] | None = None
    for chunk in chunks:
        usage_seen = chunk.get("usage") or usage_seen
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason") or finish
            if delta.get("content"):
                if open_kind != ("text", 0):
                    if open_kind is not None:
                        yield from _close_block(index, arguments)
                        index, arguments = index + 1, ""
                    open_kind = ("text", 0)
                    yield "content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": {"type": "text", "text": ""}}
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": delta["content"]}}
            for call in delta.get("tool_calls") or []:
                key = ("tool", int(call.get("index") or 0))
                if open_kind != key:
                    if open_kind is not None:
                        yield from _close_block(index, arguments)
                        index, arguments = index + 1, ""
                    open_kind = key
                    fn = call.get("function") or {}
                    yield "content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": {"type": "tool_use", "id": call.get("id") or "",
                                                                    "name": fn.get("name") or "", "input": {}}}
                arguments += (call.get("function") or {}).get("arguments") or ""
    if open_kind is not None:
        yield from _close_block(index, arguments)
    closing: dict[str, Any] = {"type": "message_delta",
                               "delta": {"stop_reason": STOP_REASONS.get(finish or "stop", "end_turn"),
                                         "stop_sequence": None},
                               "usage": {"output_tokens": usage(usage_seen)["output_tokens"]}}
    if context_management is not None:
        closing["context_management"] = context_management
    yield "message_delta", closing
    yield "message_stop", {"type": "message_stop"}


def _close_block(index: int, arguments: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The end of block ``index``: a tool block's whole input first (a text block has no
    ``arguments``)."""
    if arguments:
        partial = json.dumps(tool_input(arguments), ensure_ascii=False)
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": {"type": "input_json_delta", "partial_json": partial}}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def paused_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stream of a paused answer: the compaction block, then ``stop_reason: compaction``."""
    start = dict(message, content=[], stop_reason=None)
    for name, data in events(iter(()), start, message["content"]):
        if name == "message_delta":
            data["delta"]["stop_reason"] = "compaction"
        yield name, data


def sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: ".encode() + json.dumps(data).encode() + b"\n\n"


# -- errors ------------------------------------------------------------------------------

def error_object(exc: GatewayError) -> dict[str, Any]:
    """Anthropic's error body for a gateway refusal (an upstream's own error message kept)."""
    kind = ERROR_TYPES.get(exc.status, "api_error" if exc.status >= 500 else "invalid_request_error")
    message = exc.message
    if exc.body is not None and isinstance(exc.body.get("message"), str):
        message = exc.body["message"]
    if exc.param and not message.startswith(f"{exc.param}:"):
        message = f"{exc.param}: {message}"
    return {"type": "error", "error": {"type": kind, "message": message}}
