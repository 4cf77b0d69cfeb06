"""Conversion between OpenAI Responses input items (what the Agents SDK stores in a
session) and OpenAI chat messages (what the engine and the service compact).

items -> messages: a message item keeps its role and text; ``function_call`` items join the
assistant message just before them (or start one) as ``tool_calls``; a
``function_call_output`` becomes a ``tool`` message; ``reasoning`` items are left out (a
chat history has no place for them). Any other item type is refused by name.

messages -> items: the reverse, with an assistant message that carries both text and tool
calls split into a message item followed by its ``function_call`` items.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..messages import JSONObject, RawMessage
from ._common import IntegrationError

# item types with no chat counterpart that a history may drop without changing its meaning
DROPPED_TYPES = frozenset({"reasoning"})
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


def _text_of_parts(parts: Sequence[Any]) -> str:
    texts = []
    for part in parts:
        if isinstance(part, dict):
            if part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
    return "".join(texts)


def _chat_content(content: Any, role: str, fail: Any) -> Any:
    """An item's content as chat content: text stays text; user images become image parts."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise fail(f"content must be a string or a list of parts, got {type(content).__name__}", "bad_content")
    if role == "assistant" or all(isinstance(p, dict) and p.get("type") in TEXT_PARTS | {"refusal"}
                                  for p in content):
        return _text_of_parts(content)
    parts: list[JSONObject] = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind in TEXT_PARTS:
            parts.append({"type": "text", "text": part.get("text")})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            raise fail(f"content part {n} has unsupported type {kind!r}", "bad_content_part")
    return parts


def items_to_messages(integration: str, items: Sequence[Any], start: int) -> list[RawMessage]:
    """Chat messages for ``items``; ``start`` is the position the first of them will take
    in the conversation (errors name positions, and the item they came from)."""
    out: list[RawMessage] = []
    merge_calls = False     # the last message is an assistant turn that calls may still join
    for n, item in enumerate(items):
        def fail(text: str, fault: Any, n: int = n) -> IntegrationError:
            return IntegrationError(integration, f"item {n}: {text}", index=start + len(out), fault=fault)

        if not isinstance(item, dict):
            raise fail(f"expected an object, got {type(item).__name__}", "not_an_object")
        kind = item.get("type", "message")
        if kind in DROPPED_TYPES:
            continue
        if kind == "message":
            role = item.get("role")
            message: RawMessage = {"role": role, "content": _chat_content(item.get("content"), str(role), fail)}
            out.append(message)
            merge_calls = role == "assistant"
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments", "")}}
            if merge_calls:
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
                merge_calls = True
        elif kind == "function_call_output":
            output = item.get("output")
            content = output if isinstance(output, str) else (
                _text_of_parts(output) if isinstance(output, list) else json.dumps(output))
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": content})
            merge_calls = False
        else:
            raise fail(f"item type {kind!r} has no chat-message form", "bad_record")
    return out


def _item_content(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[JSONObject] = []
    for part in content:
        if part.get("type") == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = part.get("image_url")
            parts.append({"type": "input_image", "image_url": url.get("url") if isinstance(url, dict) else url,
                          "detail": "auto"})
    return parts


def messages_to_items(messages: Sequence[RawMessage]) -> list[JSONObject]:
    """Responses input items for chat ``messages`` (a compacted context included)."""
    items: list[JSONObject] = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": m.get("content") if isinstance(m.get("content"), str)
                          else _text_of_parts(_item_content(m.get("content")))})
            continue
        calls = m.get("tool_calls") or [] if role == "assistant" else []
        content = m.get("content")
        if role == "assistant":
            text = content if isinstance(content, str) else _text_of_parts(_item_content(content) or [])
            if text or not calls:
                items.append({"role": "assistant", "content": text})
        else:
            items.append({"role": role, "content": _item_content(content)})
        for call in calls:
            fn = call.get("function") or {}
            items.append({"type": "function_call", "call_id": call["id"], "name": fn.get("name", ""),
                          "arguments": fn.get("arguments", "")})
    return items
