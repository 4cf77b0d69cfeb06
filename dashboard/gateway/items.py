"""OpenAI Responses items and the chat messages the service stores, both ways.

In: ``message`` items (or role-only "easy" messages), ``function_call``,
``function_call_output``, and the ``compaction`` items this gateway returned earlier
(their summary is in clear, so they read back as the summary text). A ``reasoning`` item
is the model's own (encrypted) and chat messages have no place for it: it is kept, as
sent, with the assistant turn that follows it (``wire.REASONING`` on that message, which
the gateway stores but never compares nor sends to a chat-completions upstream; an upstream
that serves Responses gets it back before that turn). One followed by no assistant turn (a
user message, a tool output, the input's end) is dropped. Anything else is refused, naming
the item.

Out: the live context after a compaction, as Responses output items. A compaction's
summary becomes one ``compaction`` item whose text is readable (``summary``, and
``encrypted_content`` too, since OpenAI's SDKs read that field; nothing here is
encrypted) with the archive handle that gives back what it replaced; the acknowledgement
turn the engine may add after a summary has no item of its own."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from compaction.messages import text_of

from .errors import bad_request
from .wire import REASONING

# Marks the compaction items this gateway writes: only those can be read back.
CREATED_BY = "compaction-studio"

_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def _text_of_part(part: dict[str, Any]) -> str:
    return str(part.get("text") if part.get("type") != "refusal" else part.get("refusal") or "")


def _content(content: Any, where: str, role: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"{where}.content: give a string or a list of content parts", param=f"{where}.content")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS:
            parts.append({"type": "text", "text": _text_of_part(part)})
        elif kind == "input_image" and isinstance(part.get("image_url"), str) and role == "user":
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            raise bad_request(f"{where}.content[{j}]: content part {kind!r} is not served here (text parts, and images "
                              f"given by image_url in user messages, are)", param=f"{where}.content[{j}]")
    if role == "assistant" or (len(parts) == 1 and parts[0]["type"] == "text"):
        return "".join(p.get("text", "") for p in parts)
    return parts


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise bad_request(f"{where}.{key}: give a non-empty string", param=f"{where}.{key}")
    return value


# The id this gateway gives a compaction item: ``cmp_cs_<session>_<end>_<run>``, the item
# standing for the session's first ``end`` stored messages. The id is what every client
# keeps (the Agents SDK drops ``created_by`` and may drop fields it does not know).
_REFERENCE = re.compile(r"^cmp_cs_(\d{1,18})_(\d{1,18})_(\d{1,18})$")


@dataclass(frozen=True)
class Reference:
    """What a compaction item stands for: the first ``end`` stored messages of ``session``."""

    session: int
    end: int
    index: int  # the item's place in the input


def compaction_id(session: int, end: int, run: int) -> str:
    return f"cmp_cs_{session}_{end}_{run}"


def compaction_item(summary: str, *, session: int, end: int, run: int, archive: dict[str, Any]) -> dict[str, Any]:
    """A readable ``compaction`` item: the summary in clear (``summary``, and
    ``encrypted_content``, which OpenAI's SDKs read and send back) and the archive handle of
    what it replaced; its id says which stored messages it stands for."""
    return {"type": "compaction", "id": compaction_id(session, end, run), "created_by": CREATED_BY,
            "summary": summary, "encrypted_content": summary, "archive": archive}


def reference(item: Any, index: int) -> Reference | None:
    """The stored messages a compaction item of this gateway stands for, if it says."""
    if not isinstance(item, dict) or item.get("type") != "compaction":
        return None
    found = _REFERENCE.match(str(item.get("id") or ""))
    return Reference(int(found.group(1)), int(found.group(2)), index) if found else None


def last_reference(items: Any) -> Reference | None:
    """The last compaction item of the input that names what it stands for (what comes
    before it is part of that, so it alone decides the history up to it)."""
    if not isinstance(items, list):
        return None
    for i in range(len(items) - 1, -1, -1):
        found = reference(items[i], i)
        if found is not None:
            return found
    return None


def to_messages(items: Any, instructions: str | None) -> list[dict[str, Any]]:
    """Chat messages for a Responses ``input`` (a string or a list of items), with
    ``instructions`` first as a system message."""
    out: list[dict[str, Any]] = [{"role": "system", "content": instructions}] if instructions else []
    if isinstance(items, str):
        return out + [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise bad_request("input: give a string or a non-empty list of items", param="input")
    return convert(items, 0, out)


def convert(items: list[Any], start: int, out: list[dict[str, Any]], base: int = 0) -> list[dict[str, Any]]:
    """``items[start:]`` appended to ``out`` as chat messages (errors name ``input[i]``, ``i``
    counted from ``base``: the index of ``items[0]`` in the request's input). ``reasoning``
    items go with the assistant turn that follows them (``wire.REASONING``)."""
    reasoning: list[dict[str, Any]] = []  # reasoning items waiting for the turn they belong to
    for i in range(start, len(items)):
        item = items[i]
        where = f"input[{i + base}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where}: each item is an object", param=where)
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise bad_request(f"{where}.role: one of user, assistant, system, developer", param=f"{where}.role")
            message: dict[str, Any] = {"role": role, "content": _content(item.get("content"), where, role)}
            if reasoning and role == "assistant":
                message[REASONING] = reasoning
            reasoning = []
            out.append(message)
        elif kind == "function_call":
            call = {"id": _string(item, "call_id", where), "type": "function",
                    "function": {"name": _string(item, "name", where), "arguments": item.get("arguments") or ""}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)  # parallel calls share one assistant turn
                if reasoning:
                    last[REASONING] = [*(last.get(REASONING) or []), *reasoning]
            else:
                last = {"role": "assistant", "content": None, "tool_calls": [call]}
                if reasoning:
                    last[REASONING] = reasoning
                out.append(last)
            reasoning = []
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _content(output, where, "assistant")
            out.append({"role": "tool", "tool_call_id": _string(item, "call_id", where), "content": text})
            reasoning = []
        elif kind == "compaction":
            # one without the id that says what it stands for: its readable summary is all there is
            summary = item.get("summary")
            if item.get("created_by") != CREATED_BY or not isinstance(summary, str):
                raise bad_request(f"{where}: this compaction item was not made by this gateway, and its encrypted content "
                                  f"cannot be read here; send the conversation's items instead", param=where)
            out.append({"role": "user", "content": summary})
            reasoning = []
        elif kind == "reasoning":
            reasoning.append(item)  # as sent: an upstream that serves Responses gets it back verbatim
        else:
            raise bad_request(f"{where}: item type {kind!r} is not served here (message, function_call, "
                              f"function_call_output and this gateway's compaction items are)", param=f"{where}.type")
    return out


def _message_item(role: str, content: Any, item_id: str) -> dict[str, Any]:
    if role == "assistant":
        return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text_of(content), "annotations": []}]}
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [{"type": "text", "text": content or ""}]:
        if isinstance(part, dict) and part.get("type") == "image_url":
            parts.append({"type": "input_image", "image_url": (part.get("image_url") or {}).get("url"), "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": text_of([part]) if isinstance(part, dict) else str(part)})
    return {"type": "message", "id": item_id, "role": role, "status": "completed", "content": parts}


def _first_kept(live: list[dict[str, Any]], after: int, stored: int) -> int:
    """The stored position of the first original message kept after live item ``after``
    (what a summary there stands for ends just before it); ``stored`` when none is."""
    for entry in live[after + 1:]:
        if entry.get("provenance") == "original" and isinstance(entry.get("ordinal"), int):
            return int(entry["ordinal"])
    return stored


def to_output(live: list[dict[str, Any]], *, archive: dict[str, Any], prefix: str, run: int, stored: int,
              skip_first: bool = False) -> list[dict[str, Any]]:
    """Responses output items for the live context items (``SessionContext.load_items``) of
    ``archive["session"]``, which has ``stored`` messages; ``skip_first`` leaves out the
    instructions message the request gave (the client sends them again with its next
    request)."""
    out: list[dict[str, Any]] = []
    # The user messages a summary re-inserts follow it in the live context, but they are
    # copies of what it replaced: they go out before its compaction item, which the client
    # sends back as the point its new items follow (after it, they would read as new turns).
    pending: dict[str, Any] | None = None
    for n, entry in enumerate(live):
        if skip_first and n == 0:
            continue
        raw, provenance = entry.get("message") or {}, entry.get("provenance")
        if pending is not None and provenance not in ("preserved", "acknowledgement"):
            out.append(pending)
            pending = None
        item_id = f"{prefix}_{n}"
        if provenance == "summary":
            pending = compaction_item(text_of(raw.get("content")), session=int(archive["session"]),
                                      end=_first_kept(live, n, stored), run=run, archive=archive)
            continue
        if provenance == "acknowledgement":
            continue
        role = raw.get("role")
        if role == "tool":
            out.append({"type": "function_call_output", "id": item_id, "call_id": raw.get("tool_call_id"),
                        "output": text_of(raw.get("content")), "status": "completed"})
            continue
        if role != "assistant" or raw.get("content") not in (None, ""):
            out.append(_message_item(str(role), raw.get("content"), item_id))
        for k, call in enumerate(raw.get("tool_calls") or []):
            fn = call.get("function") or {}
            out.append({"type": "function_call", "id": f"{item_id}_{k}", "call_id": call.get("id"),
                        "name": fn.get("name"), "arguments": fn.get("arguments") or "", "status": "completed"})
    if pending is not None:
        out.append(pending)
    return out
