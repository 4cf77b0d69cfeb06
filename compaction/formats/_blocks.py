"""Anthropic content blocks to OpenAI messages, shared by the Anthropic Messages and Claude
Code formats:

- ``text`` blocks become text; ``image`` blocks (base64 or url source) become ``image_url``
  parts (base64 as a ``data:`` URL); ``document`` blocks become ``file`` parts (base64 PDF)
  or text (text source);
- ``tool_use`` blocks become assistant ``tool_calls`` (``arguments = json.dumps(input)``);
- ``tool_result`` blocks of a user message become separate ``tool`` messages placed
  *before* the rest of that user message (OpenAI needs results right after the call);
  ``is_error: true`` results are prefixed with ``[tool error]``;
- ``thinking`` and ``redacted_thinking`` blocks are **dropped**: they are the model's
  private reasoning, providers do not accept them back in another format, and their
  signatures are only valid for Anthropic;
- server-side tool blocks (``server_tool_use``, ``web_search_tool_result`` and other
  ``*_tool_result`` blocks that the API executed itself) are kept as text in the
  assistant message, since no client tool call exists to pair them with;
- tools ``{"name", "description", "input_schema"}`` become OpenAI function schemas;
  server tools (a ``type`` and no ``input_schema``) are skipped.
"""
from __future__ import annotations

import json
from typing import Any

from ..messages import JSONObject, RawMessage
from ._base import Where, err

ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "image", "thinking", "redacted_thinking",
                                   "document", "server_tool_use"})
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def has_anthropic_blocks(messages: Any) -> bool:
    if not isinstance(messages, list):
        return False
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") in ANTHROPIC_ONLY_BLOCKS:
                    return True
    return False


def _image_part(block: JSONObject, where: Where) -> JSONObject:
    src = block.get("source")
    if not isinstance(src, dict):
        raise where.fail("image block without a source", "bad_image")
    kind = src.get("type")
    if kind == "base64":
        data, media = src.get("data"), src.get("media_type") or "image/png"
        if not isinstance(data, str):
            raise where.fail("base64 image without data", "bad_image")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url" and isinstance(src.get("url"), str):
        return {"type": "image_url", "image_url": {"url": src["url"]}}
    raise where.fail(f"image source type {kind!r} cannot be converted (expected base64 or url)", "bad_image")


def _document_part(block: JSONObject, where: Where) -> JSONObject:
    src = block.get("source") or {}
    kind = src.get("type")
    if kind == "base64" and isinstance(src.get("data"), str):
        part: JSONObject = {"type": "file", "file": {"file_data": f"data:{src.get('media_type') or 'application/pdf'};"
                                                         f"base64,{src['data']}"}}
        if block.get("title"):
            part["file"]["filename"] = str(block["title"])
        return part
    if kind == "text" and isinstance(src.get("data"), str):
        return {"type": "text", "text": src["data"]}
    if kind == "url" and isinstance(src.get("url"), str):
        return {"type": "text", "text": f"[document: {src['url']}]"}
    raise where.fail(f"document source type {kind!r} cannot be converted", "bad_document")


def _server_block_text(block: JSONObject) -> str:
    kind = block.get("type")
    if kind == "server_tool_use":
        return f"[server tool {block.get('name')} {json.dumps(block.get('input'), ensure_ascii=False)}]"
    return f"[{kind} {json.dumps(block.get('content'), ensure_ascii=False)}]"


def _is_server_block(kind: Any) -> bool:
    """Blocks the API produced and executed itself (web search, code execution, MCP...)."""
    if not isinstance(kind, str):
        return False
    return kind in ("server_tool_use", "mcp_tool_use") or (kind.endswith("_tool_result") and kind != "tool_result")


def _tool_result_content(block: JSONObject, where: Where) -> str | list[JSONObject]:
    content = block.get("content")
    prefix = "[tool error] " if block.get("is_error") else ""
    if content is None:
        return prefix.strip()
    if isinstance(content, str):
        return prefix + content
    if not isinstance(content, list):
        raise where.fail(f"tool_result content must be a string or blocks, got {type(content).__name__}",
                         "bad_tool_result")
    parts: list[JSONObject] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": b.get("text") or ""})
        elif kind == "image":
            parts.append(_image_part(b, where))
        elif kind == "document":
            parts.append(_document_part(b, where))
        else:
            raise where.fail(f"unsupported block type {kind!r} inside a tool_result", "bad_block")
    if all(p["type"] == "text" for p in parts):
        return prefix + "\n".join(p["text"] for p in parts)
    if prefix:
        parts.insert(0, {"type": "text", "text": prefix.strip()})
    return parts


def _content_value(parts: list[JSONObject]) -> str | list[JSONObject]:
    """A single text part becomes a plain string; anything else stays a part list."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


class BlockConverter:
    """Turns Anthropic-style role/content-block messages into OpenAI messages."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.messages: list[RawMessage] = []
        self.origins: list[str] = []
        self.open_calls: dict[str, int] = {}   # tool_use id -> index of its assistant message
        self.seen_calls: set[str] = set()
        self.last_assistant: RawMessage | None = None
        self.last_assistant_key: Any = None

    def _emit(self, msg: RawMessage, where: Where) -> None:
        self.messages.append(msg)
        self.origins.append(where.label())

    def system(self, system: Any, where: Where) -> None:
        if isinstance(system, str):
            text = system
        elif isinstance(system, list):
            texts = []
            for b in system:
                if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
                    raise where.fail("system blocks must be text blocks", "bad_system")
                texts.append(b["text"])
            text = "\n\n".join(texts)
        else:
            raise where.fail(f"system must be a string or text blocks, got {type(system).__name__}", "bad_system")
        if text:
            self._emit({"role": "system", "content": text}, where)

    def message(self, role: Any, content: Any, where: Where, merge_key: Any = None) -> None:
        if role == "assistant":
            self.assistant(content, where, merge_key)
        elif role == "user":
            self.user(content, where)
        else:
            raise where.fail(f"unknown role {role!r} (expected user or assistant)", "unknown_role")

    def user(self, content: Any, where: Where) -> None:
        if isinstance(content, str):
            self._emit({"role": "user", "content": content}, where)
            self.last_assistant = None
            return
        if not isinstance(content, list):
            raise where.fail(f"content must be a string or a list of blocks, got {type(content).__name__}",
                             "bad_content")
        parts: list[JSONObject] = []
        for k, b in enumerate(content):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_result":
                cid = b.get("tool_use_id")
                if not isinstance(cid, str) or not cid:
                    raise where.fail(f"block {k}: tool_result without tool_use_id", "missing_tool_call_id")
                if cid not in self.open_calls:
                    why = "was already answered" if cid in self.seen_calls else "matches no earlier tool_use"
                    raise where.fail(f"block {k}: tool_result for {cid!r} {why}", "orphan_tool_result")
                del self.open_calls[cid]
                self._emit({"role": "tool", "tool_call_id": cid, "content": _tool_result_content(b, where)}, where)
            elif kind == "text":
                if not isinstance(b.get("text"), str):
                    raise where.fail(f"block {k}: text block without text", "bad_block")
                parts.append({"type": "text", "text": b["text"]})
            elif kind == "image":
                parts.append(_image_part(b, where))
            elif kind == "document":
                parts.append(_document_part(b, where))
            elif kind in _DROPPED_BLOCKS:
                continue
            else:
                raise where.fail(f"block {k}: unsupported block type {kind!r} in a user message", "bad_block")
        if parts:
            self._emit({"role": "user", "content": _content_value(parts)}, where)
            self.last_assistant = None
        elif not content:
            self._emit({"role": "user", "content": ""}, where)
            self.last_assistant = None

    def assistant(self, content: Any, where: Where, merge_key: Any = None) -> None:
        texts: list[str] = []
        calls: list[JSONObject] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for k, b in enumerate(content):
                kind = b.get("type") if isinstance(b, dict) else None
                if kind == "text":
                    if not isinstance(b.get("text"), str):
                        raise where.fail(f"block {k}: text block without text", "bad_block")
                    texts.append(b["text"])
                elif kind == "tool_use":
                    calls.append(self._tool_use(b, k, where))
                elif kind in _DROPPED_BLOCKS:
                    continue
                elif _is_server_block(kind):
                    texts.append(_server_block_text(b))
                else:
                    raise where.fail(f"block {k}: unsupported block type {kind!r} in an assistant message",
                                     "bad_block")
        else:
            raise where.fail(f"content must be a string or a list of blocks, got {type(content).__name__}",
                             "bad_content")
        target = self.last_assistant
        if merge_key is not None and target is not None and merge_key == self.last_assistant_key \
                and self._only_results_since(target):
            # A Claude Code continuation line of the same API message.
            if texts:
                joined = "\n\n".join(texts)
                target["content"] = joined if not target.get("content") else target["content"] + "\n\n" + joined
            if calls:
                target.setdefault("tool_calls", []).extend(calls)
            owner = self._index_of(target)
            for c in calls:
                self.open_calls[c["id"]] = owner
            return
        if self.open_calls:
            cid = next(iter(self.open_calls))
            raise where.fail(f"tool_use {cid!r} has no tool_result before this assistant message",
                             "unanswered_tool_call")
        msg: RawMessage = {"role": "assistant", "content": "\n\n".join(texts) if texts else (None if calls else "")}
        if calls:
            msg["tool_calls"] = calls
        self._emit(msg, where)
        for c in calls:
            self.open_calls[c["id"]] = len(self.messages) - 1
        self.last_assistant = msg
        self.last_assistant_key = merge_key

    def _tool_use(self, b: JSONObject, k: int, where: Where) -> JSONObject:
        cid, name, args = b.get("id"), b.get("name"), b.get("input", {})
        if not isinstance(cid, str) or not cid:
            raise where.fail(f"block {k}: tool_use without id", "missing_call_id")
        if not isinstance(name, str) or not name:
            raise where.fail(f"block {k}: tool_use without name", "bad_tool_call")
        if cid in self.seen_calls:
            raise where.fail(f"block {k}: duplicate tool_use id {cid!r}", "duplicate_call_id")
        self.seen_calls.add(cid)
        return {"id": cid, "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}

    def _index_of(self, target: RawMessage) -> int:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i] is target:
                return i
        raise AssertionError("assistant message vanished")  # pragma: no cover

    def _only_results_since(self, target: RawMessage) -> bool:
        for m in reversed(self.messages):
            if m is target:
                return True
            if m.get("role") != "tool":
                return False
        return False


def anthropic_tools(tools: Any, source: str | None) -> list[JSONObject]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise err("tools must be a list", "bad_tools", source)
    out = []
    for t, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise err(f"tools[{t}] must be an object", "bad_tools", source)
        if "input_schema" not in tool and tool.get("type") not in (None, "custom"):
            continue  # a server tool (web_search_..., bash_..., text_editor_...): nothing to call
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise err(f"tools[{t}] has no name", "bad_tools", source)
        schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        if not isinstance(schema, dict):
            raise err(f"tools[{t}].input_schema must be an object", "bad_tools", source)
        fn: JSONObject = {"name": name}
        if tool.get("description"):
            fn["description"] = tool["description"]
        fn["parameters"] = schema
        out.append({"type": "function", "function": fn})
    return out

