"""The wire form of a message: what the gateway compares between requests and forwards.

A client sends back the assistant replies it received, but not byte for byte: the OpenAI
SDK adds null fields, drops ``usage``, and says ``content: null`` where another says "".
Two messages are the same when their wire forms are: role, content (null and "" alike),
name, tool calls (id, function name, arguments) and the tool call answered."""
from __future__ import annotations

import hashlib
from typing import Any

from compaction import jsontext
from compaction.messages import canonical_json

# The Responses ``reasoning`` items an assistant turn came with, as the client sent them (or
# the upstream made them), kept on the turn's stored message (``items``): never part of its
# wire form, so never compared nor sent to a chat-completions upstream; an upstream that
# serves Responses is sent them again before the turn (``responses_passthrough``).
REASONING = "responses_reasoning"


def reasoning_of(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning items kept on an assistant message (none for any other)."""
    found = raw.get(REASONING) if raw.get("role") == "assistant" else None
    if not isinstance(found, list):
        return []
    return [item for item in found if isinstance(item, dict) and item.get("type") == "reasoning"]


def wire_form(raw: dict[str, Any]) -> dict[str, Any]:
    """The message as sent to an OpenAI-compatible server: only OpenAI's message fields
    (whatever else a stored message carries, such as provider usage, stays here)."""
    out: dict[str, Any] = {"role": raw.get("role")}
    content = raw.get("content")
    if content not in (None, ""):
        out["content"] = content
    elif raw.get("role") != "assistant" or not raw.get("tool_calls"):
        out["content"] = ""
    else:
        out["content"] = None
    if raw.get("name"):
        out["name"] = raw["name"]
    calls = raw.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [{"id": c.get("id"), "type": "function",
                              "function": {"name": (c.get("function") or {}).get("name"),
                                           "arguments": (c.get("function") or {}).get("arguments", "")}}
                             for c in calls]
    if raw.get("tool_call_id"):
        out["tool_call_id"] = raw["tool_call_id"]
    return out


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as an object (Anthropic's ``tool_use.input``): text that is not a
    JSON object (or nests deeper than ``jsontext.MAX_DEPTH``) is kept under ``arguments``."""
    try:
        value = jsontext.loads(arguments) if arguments else {}
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": arguments}


def digest(raw: dict[str, Any]) -> str:
    form = wire_form(raw)
    if form.get("content") is None:
        form["content"] = ""
    # Arguments compare as the object they encode: a client that decodes and re-encodes
    # them (Anthropic's tool_use.input does) sends back the same call in other spacing.
    for call in form.get("tool_calls") or []:
        call["function"]["arguments"] = tool_input(call["function"]["arguments"] or "")
    return hashlib.sha256(canonical_json(form).encode("utf-8", "surrogatepass")).hexdigest()


def extend_chain(chain: str, raws: list[dict[str, Any]]) -> list[str]:
    """The running digest after each of ``raws``, starting from ``chain``."""
    out = []
    for raw in raws:
        chain = hashlib.sha256((chain + digest(raw)).encode("ascii")).hexdigest()
        out.append(chain)
    return out


def lead_length(raws: list[Any]) -> int:
    """How many messages the leading digest covers: the leading system/developer messages
    and the first message after them."""
    for i, raw in enumerate(raws):
        if not isinstance(raw, dict) or raw.get("role") not in ("system", "developer"):
            return i + 1
    return len(raws)


def leading_digest(raws: list[dict[str, Any]]) -> str:
    """Digest of the leading system/developer messages and the first user message: what
    stays the same while an agent's conversation grows."""
    lead = raws[:lead_length(raws)]
    return hashlib.sha256("".join(digest(r) for r in lead).encode("ascii")).hexdigest()


def broken_pair(raws: list[dict[str, Any]]) -> str | None:
    """Why the list would be refused upstream for its tool calls, or None: every tool result
    answers a call made before it, and every call is answered before the next non-tool message."""
    return pair_state(raws, 0, set())[0]


def pair_state(raws: list[dict[str, Any]], first: int, open_calls: set[str]) -> tuple[str | None, set[str]]:
    """``broken_pair`` carried on from a list's first ``first`` messages, whose calls still
    open are ``open_calls``: (why the whole list would be refused or None, the calls open at its end)."""
    for i, raw in enumerate(raws, start=first):
        role = raw.get("role")
        if role == "tool":
            cid = raw.get("tool_call_id")
            if cid not in open_calls:
                return (f"message {i} answers tool call {cid!r}, which no earlier message made or which was "
                        f"answered"), open_calls
            open_calls.discard(cid)
            continue
        if open_calls:
            return f"message {i} follows tool calls that were not answered ({', '.join(sorted(open_calls))})", open_calls
        for call in raw.get("tool_calls") or []:
            open_calls.add(call.get("id"))
    return None, open_calls
