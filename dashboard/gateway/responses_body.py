"""The body of ``POST /v1/responses``, checked and read before anything is stored.

Every field is read here, forwarded upstream in its chat-completions form, or refused with a
400 naming it; none is dropped unread. What maps to what (the table is in docs/SERVICE.md):

=========================  ==========================================================
Responses field            chat completions / the gateway
=========================  ==========================================================
``input``, ``instructions``  the messages (``items``; instructions first, as system)
``tools`` (function)       ``tools`` (hosted tools such as ``web_search`` are refused,
                           in pass-through too)
``tool_choice``            ``tool_choice`` (a named function becomes its chat form)
``parallel_tool_calls``    ``parallel_tool_calls``
``max_output_tokens``      ``max_tokens``
``temperature``, ``top_p``   the same
``text.format``            ``response_format`` (text, json_object, json_schema)
``reasoning.effort``       ``reasoning_effort``
``reasoning.summary``,     refused when translated (chat completions has no reasoning
``text.verbosity``,        summary, verbosity or output logprobs); forwarded as sent to an
``top_logprobs``,          upstream that serves Responses itself (pass-through)
logprob/image ``include``
``metadata``, ``user``       the session's identity and metadata, as on chat completions
``previous_response_id``   the kept response's history, then this input
``context_management``     compaction entries: the policy's trigger for this request
``store``, ``truncation``    accepted: the gateway keeps every conversation as a session,
                           and compacts instead of truncating (either value)
``include``                ``reasoning.encrypted_content`` accepted (no reasoning item is
                           produced); anything else refused
``stream``, ``stream_options``  the answer as server-sent events
prompt caching, ``service_tier``  accepted, no effect (OpenAI's own servers' business)
=========================  ==========================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compaction import Policy
from compaction.errors import SessionValidationError
from compaction.messages import validate_tools

from .body import Hint, RawMessages, Skipped, json_object_with_spans, model_name
from .errors import GatewayError, bad_request

IGNORED = frozenset({"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "service_tier"})
KNOWN = IGNORED | {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
    "temperature", "top_p", "metadata", "user", "store", "previous_response_id", "truncation", "stream",
    "stream_options", "context_management", "include", "text", "reasoning", "top_logprobs",
}
# Include values with nothing to add here (no reasoning item is ever produced).
INCLUDES = frozenset({"reasoning.encrypted_content"})
# What only an upstream serving Responses itself can answer: accepted in pass-through, where the
# client's fields go as sent, and refused naming the field when the call is translated to chat.
PASSTHROUGH_INCLUDES = frozenset({"message.output_text.logprobs", "message.input_image.image_url"})
PASSTHROUGH_TEXT = frozenset({"verbosity"})
PASSTHROUGH_REASONING = frozenset({"summary", "generate_summary"})
_TRANSLATED = "when this gateway translates to chat completions; an upstream the operator passes Responses " \
              "requests through to (GATEWAY_RESPONSES_PASSTHROUGH) receives it"


@dataclass
class ResponsesRequest:
    model: str
    input: Any
    instructions: str | None = None
    stream: bool = False
    tools: list[dict[str, Any]] = field(default_factory=list)  # chat form
    params: dict[str, Any] = field(default_factory=dict)  # forwarded upstream (chat names)
    metadata: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    previous_response_id: str | None = None
    # context_management: whether a compaction entry was given, and its threshold if any
    compaction: bool = False
    compact_threshold: int | None = None
    # request fields the Response object repeats
    echo: dict[str, Any] = field(default_factory=dict)
    # the body's fields other than its input, as sent (the call's inspector page)
    fields: dict[str, Any] = field(default_factory=dict)
    # where the ``input`` array lies in the body's text (None: not a list, or not plain JSON)
    raw: RawMessages | None = None
    # parsed with a hint the input matched: its first items left undecoded (``input`` holds
    # the items after them; ``whole_input`` decodes all)
    skipped: Skipped | None = None
    # refusals that hold only when the call is translated (``check_translatable``)
    passthrough_only: list[GatewayError] = field(default_factory=list)

    def check_translatable(self) -> None:
        """Raise the first field only a pass-through upstream can answer (the call is translated)."""
        if self.passthrough_only:
            raise self.passthrough_only[0]

    def whole_input(self) -> Any:
        """The whole ``input``, decoding the skipped items if any were."""
        if self.skipped is not None:
            self.input = self.skipped.decode() + self.input
            self.skipped = None
        return self.input

    def overrides(self, base: Policy) -> dict[str, Any] | None:
        """The policy overrides of this request's compaction entry, checked against ``base``."""
        if self.compact_threshold is None:
            return None
        overrides = {"summarize": True, "trigger": {"kind": "tokens", "threshold": self.compact_threshold}}
        try:
            base.with_overrides(overrides)
        except Exception as exc:  # noqa: BLE001 - PolicyError or pydantic's, both name the setting
            raise GatewayError(400, f"context_management[0].compact_threshold: does not fit the project's policy: "
                                    f"{exc}", param="context_management[0].compact_threshold") from None
        return overrides


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_request(f"{name}: give a number from {low:g} to {high:g}", param=name)
    return value


def _bool(body: dict[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise bad_request(f"{name}: give true or false", param=name)
    return value


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request("tools: give a list of function tools", param="tools")
    hosted = [(i, tool.get("type") if isinstance(tool, dict) else None) for i, tool in enumerate(value)
              if not (isinstance(tool, dict) and tool.get("type") == "function")]
    if hosted:
        # Refused whichever upstream serves the model, the one passed Responses through
        # included: a hosted tool's calls and results come back as items (web_search_call...)
        # that the session, kept as chat messages, could not store, and the client's next
        # input, sending them back, would be refused.
        (i, kind), others = hosted[0], ", ".join(f"{k!r} (tools[{j}])" for j, k in hosted[1:])
        raise bad_request(f"tools[{i}]: the hosted tool {kind!r} is not served by this gateway"
                          f"{f', nor are {others}' if others else ''}: it keeps each conversation as chat messages, "
                          f"which have no place for a hosted tool's calls and results, whether the model's upstream "
                          f"serves Responses or chat completions; function tools are", param=f"tools[{i}].type")
    out = []
    for i, tool in enumerate(value):
        unknown = sorted(set(tool) - {"type", "name", "description", "parameters", "strict"})
        if unknown:
            raise bad_request(f"tools[{i}].{unknown[0]}: not a field of a function tool", param=f"tools[{i}].{unknown[0]}")
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        out.append({"type": "function", "function": function})
    try:
        return validate_tools(out) if out else []
    except SessionValidationError as exc:
        raise bad_request(f"tools: {exc}", param="tools") from None


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> Any:
    if value is None:
        return None
    if value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        if value["name"] not in {t["function"]["name"] for t in tools}:
            raise bad_request(f"tool_choice.name: no function tool named {value['name']!r} is given",
                              param="tool_choice.name")
        return {"type": "function", "function": {"name": value["name"]}}
    kind = value.get("type") if isinstance(value, dict) else value
    raise bad_request(f"tool_choice: {kind!r} is not served by this gateway (none, auto, required or "
                      f"{{\"type\": \"function\", \"name\": ...}} are)", param="tool_choice")


def _text(value: Any, deferred: list[GatewayError]) -> dict[str, Any] | None:
    """``text`` as chat's ``response_format`` (None for plain text)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request("text: give an object with a 'format'", param="text")
    unknown = sorted(set(value) - {"format"} - PASSTHROUGH_TEXT)
    if unknown:
        raise bad_request(f"text.{unknown[0]}: not served by this gateway (text.format is)", param=f"text.{unknown[0]}")
    for name in sorted(set(value) & PASSTHROUGH_TEXT):
        deferred.append(bad_request(f"text.{name}: not served {_TRANSLATED}", param=f"text.{name}"))
    fmt = value.get("format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is None or kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema" and isinstance(fmt.get("schema"), dict) and isinstance(fmt.get("name"), str):
        schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if fmt.get(k) is not None}
        return {"type": "json_schema", "json_schema": schema}
    raise bad_request("text.format: give {\"type\": \"text\"}, {\"type\": \"json_object\"} or a json_schema format "
                      "with name and schema", param="text.format")


def _reasoning(value: Any, deferred: list[GatewayError]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request("reasoning: give an object", param="reasoning")
    unknown = sorted(k for k, v in value.items() if k != "effort" and v is not None)
    for name in unknown:
        if name not in PASSTHROUGH_REASONING:
            raise bad_request(f"reasoning.{name}: not served by this gateway (reasoning.effort is forwarded)",
                              param=f"reasoning.{name}")
        deferred.append(bad_request(f"reasoning.{name}: not served {_TRANSLATED} (no reasoning summary is produced "
                                    f"here; reasoning.effort is forwarded)", param=f"reasoning.{name}"))
    effort = value.get("effort")
    if effort is not None and not isinstance(effort, str):
        raise bad_request("reasoning.effort: give a string such as 'low'", param="reasoning.effort")
    return effort


def _context_management(value: Any) -> tuple[bool, int | None]:
    """(whether a compaction entry was given, its threshold)."""
    if value is None:
        return False, None
    if not isinstance(value, list):
        raise bad_request("context_management: give a list of entries", param="context_management")
    found, threshold = False, None
    for i, entry in enumerate(value):
        where = f"context_management[{i}]"
        if not isinstance(entry, dict) or entry.get("type") != "compaction":
            kind = entry.get("type") if isinstance(entry, dict) else None
            raise bad_request(f"{where}.type: the gateway serves 'compaction' entries, not {kind!r}", param=f"{where}.type")
        unknown = sorted(set(entry) - {"type", "compact_threshold"})
        if unknown:
            raise bad_request(f"{where}.{unknown[0]}: not a field of a compaction entry", param=f"{where}.{unknown[0]}")
        if found:
            raise bad_request(f"{where}: a compaction entry is given twice", param=where)
        found = True
        limit = entry.get("compact_threshold")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise bad_request(f"{where}.compact_threshold: give a whole number of tokens, at least 1",
                              param=f"{where}.compact_threshold")
        threshold = limit
    return found, threshold


def _include(value: Any, deferred: list[GatewayError]) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request("include: give a list of strings", param="include")
    for i, name in enumerate(value):
        if name in PASSTHROUGH_INCLUDES:
            deferred.append(bad_request(f"include[{i}]: {name!r} is not served {_TRANSLATED}", param=f"include[{i}]"))
        elif name not in INCLUDES:
            raise bad_request(f"include[{i}]: {name!r} is not served by this gateway", param=f"include[{i}]")


def parse(data: bytes, hint: Hint | None = None) -> ResponsesRequest:
    """The checked body; a GatewayError (400) naming the field otherwise. The input items
    are converted later (``responses_history``, ``responses_input``): a previous response or
    a compaction item decides what they follow. A ``hint`` the input array starts with
    leaves the items it covers undecoded (``ResponsesRequest.skipped``)."""
    body, raw, skipped = json_object_with_spans(data, hint, "input")
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise bad_request(f"Unrecognized request argument supplied: {unknown[0]} (this gateway serves "
                          f"{', '.join(sorted(KNOWN - IGNORED))})", param=unknown[0])
    model = model_name(body)
    if "input" not in body and body.get("previous_response_id") is None:
        raise bad_request("input: give a string or a list of items", param="input")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("instructions: give a string", param="instructions")
    stream = bool(_bool(body, "stream"))
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream
                                or set(options) - {"include_obfuscation"}):
        raise bad_request("stream_options: an object with include_obfuscation only, with stream: true",
                          param="stream_options")
    tools = _tools(body.get("tools"))
    deferred: list[GatewayError] = []
    params: dict[str, Any] = {}
    choice = _tool_choice(body.get("tool_choice"), tools)
    if choice is not None:
        params["tool_choice"] = choice
    parallel = _bool(body, "parallel_tool_calls")
    if parallel is not None and tools:
        params["parallel_tool_calls"] = parallel
    max_output = body.get("max_output_tokens")
    if max_output is not None:
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1:
            raise bad_request("max_output_tokens: give a whole number of at least 1", param="max_output_tokens")
        params["max_tokens"] = max_output
    for name, high in (("temperature", 2.0), ("top_p", 1.0)):
        value = _number(body, name, 0.0, high)
        if value is not None:
            params[name] = value
    response_format = _text(body.get("text"), deferred)
    if response_format is not None:
        params["response_format"] = response_format
    effort = _reasoning(body.get("reasoning"), deferred)
    if effort is not None:
        params["reasoning_effort"] = effort
    _include(body.get("include"), deferred)
    top_logprobs = body.get("top_logprobs")
    if top_logprobs is not None:
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 0 <= top_logprobs <= 20:
            raise bad_request("top_logprobs: give a whole number from 0 to 20", param="top_logprobs")
        deferred.append(bad_request(f"top_logprobs: not served {_TRANSLATED}", param="top_logprobs"))
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad_request("metadata: an object of string values", param="metadata")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise bad_request("user: give a string", param="user")
    store = _bool(body, "store")
    truncation = body.get("truncation")
    if truncation not in (None, "auto", "disabled"):
        raise bad_request("truncation: give 'auto' or 'disabled'", param="truncation")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous or len(previous) > 64):
        raise bad_request("previous_response_id: give a response id", param="previous_response_id")
    compaction, threshold = _context_management(body.get("context_management"))
    echo = {"instructions": instructions, "max_output_tokens": max_output, "metadata": metadata,
            "parallel_tool_calls": True if parallel is None else parallel, "previous_response_id": previous,
            "store": True if store is None else store, "temperature": body.get("temperature"),
            "text": body.get("text") or {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [], "top_p": body.get("top_p"), "truncation": truncation or "disabled",
            "user": user, "reasoning": {"effort": effort, "summary": None}}
    return ResponsesRequest(model=model, input=body.get("input", []), instructions=instructions or None, stream=stream,
                            tools=tools, params=params, metadata=metadata, user=user, previous_response_id=previous,
                            compaction=compaction, compact_threshold=threshold, echo=echo,
                            fields={k: v for k, v in body.items() if k != "input"},
                            raw=raw if isinstance(body.get("input"), list) else None, skipped=skipped,
                            passthrough_only=deferred)
