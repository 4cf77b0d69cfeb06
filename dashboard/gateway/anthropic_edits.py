"""Anthropic's ``context_management.edits``, read as settings of the project's policy for one
request of ``POST /v1/messages``.

A client that asks Anthropic's API for server-side compaction or tool-result clearing gets
the same from the gateway, done by the policy engine: each edit becomes dotted overrides of
the session's effective policy for this request's compaction (nothing is saved; the next
request's edits decide again). The table is also in docs/SERVICE.md.

==========================================  =================================================
edit field                                  policy setting
==========================================  =================================================
compact_20260112 ``trigger`` (input_tokens, ``trigger = {"kind": "tokens", "threshold": N}``
default 150,000, at least 50,000)
compact_20260112 ``instructions``           ``summarizer.prompt`` (replaces the default prompt;
                                            the conversation is appended after it)
compact_20260112 ``pause_after_compaction`` the gateway answers with the compaction block only
clear_tool_uses_20250919 (present)          ``reduction.enabled``, ``reduction.clearing.enabled``
``trigger`` (input_tokens, default 100,000) ``reduction.clearing.trigger_tokens`` (the share
                                            of the window no longer applies)
``keep`` (tool_uses, default 3)             ``reduction.clearing.keep``, ``keep_unit = tool_uses``
``clear_at_least`` (input_tokens, default 0) ``reduction.clearing.clear_at_least_tokens``
                                            (``guard``) and ``landing.min_freed``
``exclude_tools``                           ``reduction.clearing.exclude_tools``
``clear_tool_inputs`` true / false          ``reduction.clearing.clear_tool_inputs``
``clear_tool_inputs`` [names]               ``reduction.tools.<name>.clear_inputs = true``
==========================================  =================================================

Anything else (another edit type, a ``tool_uses`` trigger, a malformed value) is refused with
a 400 naming the field, never ignored: a client must not believe an edit applied that did not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from compaction import Policy

from .errors import GatewayError, bad_request

COMPACT = "compact_20260112"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
COMPACT_DEFAULT_TRIGGER = 150_000
COMPACT_MIN_TRIGGER = 50_000
CLEAR_DEFAULT_TRIGGER = 100_000
CLEAR_DEFAULT_KEEP = 3
# Anthropic's rule for tool names; it also keeps a name usable as a policy key.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


@dataclass(frozen=True)
class ContextEdits:
    """What the request's edits ask for: the policy overrides and the compaction behaviour."""

    overrides: dict[str, Any] = field(default_factory=dict)
    compact: bool = False
    pause_after_compaction: bool = False
    clear_tool_uses: bool = False
    # The per-tool ``clear_inputs`` names, merged into the policy's own per-tool settings.
    clear_inputs_tools: tuple[str, ...] = ()

    def overrides_for(self, base: Policy) -> dict[str, Any]:
        """The dotted overrides of ``base`` (per-tool settings merged, not replaced)."""
        out = dict(self.overrides)
        if self.clear_inputs_tools:
            tools = {name: t.model_dump(mode="json") for name, t in base.reduction.tools.items()}
            for name in self.clear_inputs_tools:
                tools[name] = dict(tools.get(name, {}), clear_inputs=True)
            out["reduction.tools"] = tools
        return out


def _tokens(value: Any, where: str, kinds: tuple[str, ...] = ("input_tokens",)) -> int:
    if not isinstance(value, dict):
        raise bad_request(f"{where}: give an object {{\"type\": \"{kinds[0]}\", \"value\": N}}", param=where)
    unknown = sorted(set(value) - {"type", "value"})
    if unknown:
        raise bad_request(f"{where}.{unknown[0]}: Extra inputs are not permitted", param=f"{where}.{unknown[0]}")
    if value.get("type") not in kinds:
        served = " or ".join(repr(k) for k in kinds)
        raise bad_request(f"{where}.type: the gateway serves {served} here, not {value.get('type')!r}",
                          param=f"{where}.type")
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise bad_request(f"{where}.value: give a whole number of at least 0", param=f"{where}.value")
    return number


def _check_fields(edit: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(edit) - allowed)
    if unknown:
        raise bad_request(f"{where}.{unknown[0]}: Extra inputs are not permitted", param=f"{where}.{unknown[0]}")


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and _TOOL_NAME.match(v) for v in value):
        raise bad_request(f"{where}: give a list of tool names", param=where)
    return list(value)


def _compact(edit: dict[str, Any], where: str) -> tuple[dict[str, Any], bool]:
    _check_fields(edit, {"type", "trigger", "instructions", "pause_after_compaction"}, where)
    trigger = COMPACT_DEFAULT_TRIGGER
    if edit.get("trigger") is not None:
        trigger = _tokens(edit["trigger"], f"{where}.trigger")
        if trigger < COMPACT_MIN_TRIGGER:
            raise bad_request(f"{where}.trigger.value: must be at least {COMPACT_MIN_TRIGGER} tokens",
                              param=f"{where}.trigger.value")
    overrides: dict[str, Any] = {"summarize": True, "trigger": {"kind": "tokens", "threshold": trigger}}
    instructions = edit.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str) or not instructions.strip():
            raise bad_request(f"{where}.instructions: give a non-empty string", param=f"{where}.instructions")
        # The engine formats the prompt with {conversation_text}: the client's braces are text.
        escaped = instructions.replace("{", "{{").replace("}", "}}")
        overrides["summarizer.prompt"] = f"{escaped}\n\n<conversation>\n{{conversation_text}}\n</conversation>"
    pause = edit.get("pause_after_compaction", False)
    if not isinstance(pause, bool):
        raise bad_request(f"{where}.pause_after_compaction: give true or false",
                          param=f"{where}.pause_after_compaction")
    return overrides, pause


def _clear(edit: dict[str, Any], where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    _check_fields(edit, {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}, where)
    trigger = CLEAR_DEFAULT_TRIGGER
    if edit.get("trigger") is not None:
        if isinstance(edit["trigger"], dict) and edit["trigger"].get("type") == "tool_uses":
            raise bad_request(f"{where}.trigger.type: a 'tool_uses' trigger is not served by this gateway "
                              f"(the policy counts tokens); give {{\"type\": \"input_tokens\", \"value\": N}}",
                              param=f"{where}.trigger.type")
        trigger = _tokens(edit["trigger"], f"{where}.trigger")
        if trigger < 1:
            raise bad_request(f"{where}.trigger.value: must be at least 1", param=f"{where}.trigger.value")
    keep = CLEAR_DEFAULT_KEEP
    if edit.get("keep") is not None:
        keep = _tokens(edit["keep"], f"{where}.keep", kinds=("tool_uses",))
    overrides: dict[str, Any] = {
        "reduction.enabled": True, "reduction.clearing.enabled": True,
        "reduction.clearing.trigger_tokens": trigger, "reduction.clearing.trigger_fraction": None,
        "reduction.clearing.keep": keep, "reduction.clearing.keep_unit": "tool_uses",
    }
    # Anthropic clears whenever the trigger is passed unless clear_at_least asks for more;
    # the policy's own minimum (clearing's and the landing's) gives way to that.
    at_least = 0
    if edit.get("clear_at_least") is not None:
        at_least = _tokens(edit["clear_at_least"], f"{where}.clear_at_least")
    overrides["reduction.clearing.clear_at_least_tokens"] = at_least
    overrides["reduction.clearing.at_least_mode"] = "guard"
    # Two tokens, not 0: a summarizing policy reads 0 as "no minimum of its own" and waits for
    # 10% of the window; 1 would read as a share (the whole window). Any clearing frees more.
    overrides["landing.min_freed"] = max(at_least, 2)
    if edit.get("exclude_tools") is not None:
        overrides["reduction.clearing.exclude_tools"] = _names(edit["exclude_tools"], f"{where}.exclude_tools")
    inputs = edit.get("clear_tool_inputs")
    per_tool: tuple[str, ...] = ()
    if isinstance(inputs, bool):
        overrides["reduction.clearing.clear_tool_inputs"] = inputs
    elif inputs is not None:
        per_tool = tuple(_names(inputs, f"{where}.clear_tool_inputs"))
    return overrides, per_tool


def parse_context_management(value: Any) -> ContextEdits:
    """The request's ``context_management`` checked and read; a 400 naming the field otherwise."""
    if value is None:
        return ContextEdits()
    if not isinstance(value, dict):
        raise bad_request("context_management: give an object with an 'edits' list", param="context_management")
    _check_fields(value, {"edits"}, "context_management")
    edits = value.get("edits") or []
    if not isinstance(edits, list):
        raise bad_request("context_management.edits: give a list", param="context_management.edits")
    overrides: dict[str, Any] = {}
    compact = clear = pause = False
    per_tool: tuple[str, ...] = ()
    for i, edit in enumerate(edits):
        where = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind == COMPACT and not compact:
            more, pause = _compact(edit, where)
            compact = True
        elif kind == CLEAR_TOOL_USES and not clear:
            more, per_tool = _clear(edit, where)
            clear = True
        elif kind in (COMPACT, CLEAR_TOOL_USES):
            raise bad_request(f"{where}: {kind} is given twice", param=where)
        else:
            raise bad_request(f"{where}.type: the gateway serves {COMPACT!r} and {CLEAR_TOOL_USES!r}, "
                              f"not {kind!r}", param=f"{where}.type")
        overrides.update(more)
    return ContextEdits(overrides, compact, pause, clear, per_tool)


def check_against(edits: ContextEdits, base: Policy) -> dict[str, Any]:
    """The overrides for ``base``, refused with a 400 when the resulting policy is invalid
    (for instance a trigger above the window the operator set for the model)."""
    overrides = edits.overrides_for(base)
    if not overrides:
        return overrides
    try:
        base.with_overrides(overrides)
    except Exception as exc:  # noqa: BLE001 - PolicyError or pydantic's, both name the setting
        raise GatewayError(400, f"context_management: the edits do not fit the project's policy: {exc}",
                           param="context_management") from None
    return overrides
