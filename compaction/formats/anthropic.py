"""``anthropic``: Anthropic Messages requests ``{"system"?, "messages", "tools"?, "model"?}``
(or a bare list of Anthropic messages); blocks are converted as ``_blocks`` describes."""
from __future__ import annotations

from typing import Any

from ._base import NO, SURE, Format, ImportedSession, Options, Sample, Where, err, finish
from ._blocks import BlockConverter, anthropic_tools, has_anthropic_blocks


def _detect(sample: Sample) -> int:
    data = sample.value
    if sample.lines:
        return NO
    if isinstance(data, dict) and "messages" in data:
        tools = data.get("tools") or []
        if ("system" in data or has_anthropic_blocks(data.get("messages"))
                or (isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools))):
            return SURE
        return NO
    if isinstance(data, list):
        items = [x for x in data if isinstance(x, dict)]
        if items and not all("messages" in x for x in items) and has_anthropic_blocks(items):
            return SURE
    return NO


def _anthropic(data: Any, source: str | None) -> ImportedSession:
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise err("expected an object with a 'messages' list (Anthropic Messages format)", "bad_session", source)
    conv = BlockConverter(source)
    if data.get("system") is not None:
        conv.system(data["system"], Where(source))
    for j, m in enumerate(data["messages"]):
        where = Where(source, index=j)
        if not isinstance(m, dict):
            raise where.fail(f"expected a message object, got {type(m).__name__}", "not_an_object")
        conv.message(m.get("role"), m.get("content"), where)
    return finish(conv.messages, conv.origins, anthropic_tools(data.get("tools"), source),
                  title=data.get("title"), external_id=data.get("id"), model=data.get("model"),
                  fmt="anthropic", source=source)


def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    return [_anthropic(data, source)]


FORMAT = Format(name="anthropic", order=30, detect=_detect, convert=_convert,
                label="Anthropic Messages (tool_use / tool_result blocks)")
