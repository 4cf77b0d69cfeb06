"""Turn a span of messages into the plain-text transcript the summarizer reads.

One block per message, blocks separated by a blank line::

    [user]: fix the failing test in tests/test_api.py
    [assistant]: I'll run the tests first.
    [Called tool: bash with args: {"command": "pytest -x"}]
    [bash returned: 1 failed, 12 passed ...]

Tool results are labelled with the name of the tool that produced them (looked up
from the calls in the span). Images become ``[image]``. Summaries and
acknowledgements that earlier compactions wrote are skipped: the previous summary
reaches the prompt through its own placeholder, and the acknowledgement says
nothing. Optional formatters replace the default text of a tool call
(``formatter(name, arguments)``) or a tool result (``formatter(name, content)``);
returning ``None`` keeps the default and returning ``""`` leaves the item out.

:func:`render_blocks` returns the blocks with the message each came from, so the
input budget (:mod:`.fit`) can clip one block's body and leave its label intact.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..messages import Message, Provenance, tool_name_index

ToolCallFormatter = Callable[[str, str], "str | None"]
ToolResultFormatter = Callable[[str, str], "str | None"]

BLOCK_SEPARATOR = "\n\n"
SKIPPED_PROVENANCE = (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT)


@dataclass
class Block:
    """A rendered message: ``prefix + body + suffix``. Only ``body`` is ever clipped,
    so a clipped block keeps its label (``[user]: ``, ``[bash returned: ...]``)."""

    index: int              # position of the message in the span
    message_id: str
    role: str
    kind: str               # "user" | "assistant" | "system" | "tool_result"
    prefix: str
    body: str
    suffix: str = ""
    tool_name: str | None = None

    @property
    def text(self) -> str:
        return self.prefix + self.body + self.suffix


def _content_text(content: Any, *, image_marker: str = "[image]") -> str:
    """Text of a content value with non-text parts shown as short markers."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            pieces.append(part.get("text") or "")
        elif kind == "refusal":
            pieces.append(part.get("refusal") or "")
        elif kind == "image_url":
            pieces.append(image_marker)
        elif kind == "input_audio":
            pieces.append("[audio]")
        elif kind == "file":
            pieces.append("[file]")
    return "\n".join(p for p in pieces if p)


def default_tool_call(name: str, arguments: str) -> str:
    return f"[Called tool: {name} with args: {arguments}]"


def render_blocks(span: Iterable[Message], *, tool_call_formatter: ToolCallFormatter | None = None,
                  tool_result_formatter: ToolResultFormatter | None = None) -> list[Block]:
    span = list(span)
    names = tool_name_index(span)
    blocks: list[Block] = []
    for i, msg in enumerate(span):
        if msg.provenance in SKIPPED_PROVENANCE:
            continue
        raw = msg.raw
        role = raw.get("role", "user")
        text = _content_text(raw.get("content"))
        if role == "tool":
            name = names.get(raw.get("tool_call_id") or "", "") or raw.get("name") or "tool"
            if tool_result_formatter is not None:
                custom = tool_result_formatter(name, text)
                if custom is not None:
                    if custom:
                        blocks.append(Block(i, msg.id, role, "tool_result", "", custom, "", name))
                    continue
            blocks.append(Block(i, msg.id, role, "tool_result", f"[{name} returned: ", text, "]", name))
            continue
        if role == "assistant":
            calls: list[str] = []
            for call in msg.tool_calls:
                fn = call.get("function") or {}
                name, args = fn.get("name") or "tool", fn.get("arguments") or ""
                line = tool_call_formatter(name, args) if tool_call_formatter is not None else None
                if line is None:
                    line = default_tool_call(name, args)
                if line:
                    calls.append(line)
            if not text.strip() and not calls:
                continue
            # The calls are part of the body so that huge arguments (a whole file being
            # written) can be clipped like any other large message.
            body = "\n".join(([text] if text.strip() else []) + calls)
            blocks.append(Block(i, msg.id, role, "assistant", "[assistant]: ", body))
            continue
        if not text.strip():
            continue
        label = "system" if role in ("system", "developer") else "user"
        blocks.append(Block(i, msg.id, role, label, f"[{role}]: ", text))
    return blocks


def join_blocks(blocks: Iterable[Block]) -> str:
    return BLOCK_SEPARATOR.join(b.text for b in blocks)


def render_conversation(span: Iterable[Message], *, tool_call_formatter: ToolCallFormatter | None = None,
                        tool_result_formatter: ToolResultFormatter | None = None) -> str:
    """The transcript of ``span`` as one string (see the module docstring for the format)."""
    return join_blocks(render_blocks(span, tool_call_formatter=tool_call_formatter,
                                     tool_result_formatter=tool_result_formatter))
