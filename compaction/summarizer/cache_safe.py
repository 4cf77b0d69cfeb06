"""Cache-safe summary requests: fork the agent's own last request instead of building a new one.

Providers with prompt caching (OpenAI, Anthropic, DeepSeek, vLLM/llama.cpp prefix
caches...) bill and serve a request faster when it starts with bytes they have already
seen. The agent's last model request has just been cached, so a summary request that
*is* that request, with one more user message at the end, reads almost all of its
input from the cache:

    parent:   [system, m1 ... mN]                      tools = T
    summary:  [system, m1 ... mN, compacting instruction]   tools = T

The parent messages and tool schemas are passed through untouched (the very same
objects, so they serialise to the same bytes); nothing is clipped, rendered or
reordered. The instruction asks for the summary with the same sections as the default
prompt; ``summarizer.cache_safe_prompt`` replaces it and may use
``{max_summary_words}`` but never ``{conversation_text}`` (the conversation is already
in the request).

The standalone request (rendered transcript in one prompt) is used instead, with the
reason recorded, when

- no parent request is known (asynchronous or manual runs, a fresh service);
- the summarizer is the offline extractive one, which has no cache and reads a
  transcript;
- the parent request does not contain every message being summarized (it is stale);
- the parent request plus the instruction and the summary's own output would not fit
  the summarizer's window.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, Provenance, canonical_json
from ..policy import SummarizerPolicy
from ..prompt_templates import validate_cache_safe_prompt
from ..tokens import MESSAGE_OVERHEAD, MessageCounter
from .prompts import language_name, prompt_texts

# Room for the summary's own generation when the settings give no max_tokens: about
# 1.35 tokens a word plus the headings, and at least this much.
MIN_OUTPUT_TOKENS = 1024


def default_cache_safe_prompt(max_summary_words: int, language: str = "en") -> str:
    """The built-in compacting instruction of ``language`` (English for codes without a locale file)."""
    table, native = prompt_texts(language)
    text = table["cache_safe"].format(length_rule=table["length_rule"] if max_summary_words > 0 else "")
    name = language_name(language)
    if not native and name not in (None, "English"):
        text += table["language_rule"].format(language=name)
    return text


def compacting_instruction(settings: SummarizerPolicy, language: str = "en") -> str:
    """The filled instruction appended to the parent request."""
    words = int(getattr(settings, "max_summary_words", 0) or 0)
    template = getattr(settings, "cache_safe_prompt", None) or default_cache_safe_prompt(words, language)
    return template.replace("{max_summary_words}", str(words)).replace("{{", "{").replace("}}", "}")


@dataclass
class ParentRequest:
    """The prefix of the agent's last model request: messages (system included) and tools."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | ParentRequest | None) -> ParentRequest | None:
        """Accepts ``{"messages": [...], "tools": [...], "tool_choice": ...}`` (an OpenAI request
        body; other keys are ignored). A separate ``"system"`` string (Anthropic style) becomes
        the first message unless the messages already start with a system message."""
        if data is None:
            return None
        if isinstance(data, ParentRequest):
            return data
        if not isinstance(data, dict):
            raise TypeError("parent_request must be a dict with 'messages' (and optionally 'tools')")
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m
                                                                     for m in messages):
            raise ValueError("parent_request['messages'] must be a non-empty list of message dicts")
        system = data.get("system")
        if isinstance(system, str) and system and messages[0].get("role") not in ("system", "developer"):
            messages = [{"role": "system", "content": system}] + list(messages)
        tools = data.get("tools") or None
        if tools is not None and not isinstance(tools, list):
            raise ValueError("parent_request['tools'] must be a list")
        return cls(list(messages), tools, data.get("tool_choice"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"messages": self.messages}
        if self.tools:
            out["tools"] = self.tools
        if self.tool_choice is not None:
            out["tool_choice"] = self.tool_choice
        return out


@dataclass
class CacheSafePlan:
    mode: str                         # "cache_safe" | "standalone"
    reason: str                       # why (for the run page and events)
    messages: list[dict[str, Any]] = field(default_factory=list)   # cache-safe: parent messages + instruction
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    input_tokens: int = 0

    @property
    def cache_safe(self) -> bool:
        return self.mode == "cache_safe"

    def extra_params(self) -> dict[str, Any]:
        """Extra ``litellm.completion`` parameters carrying the parent's tools."""
        params: dict[str, Any] = {}
        if self.tools:
            params["tools"] = self.tools
            # litellm imports its MCP gateway whenever tools are passed; plain function tools
            # never need it, and its optional dependency may be missing.
            params["_skip_mcp_handler"] = True
        if self.tool_choice is not None:
            params["tool_choice"] = self.tool_choice
        return params


def build_request(parent: ParentRequest, settings: SummarizerPolicy, language: str = "en") -> tuple[list[dict[str, Any]], str]:
    """(messages, instruction): the parent's messages, untouched, plus the instruction."""
    instruction = compacting_instruction(settings, language)
    return list(parent.messages) + [{"role": "user", "content": instruction}], instruction


def output_reserve(settings: SummarizerPolicy) -> int:
    """Tokens kept free in the summarizer window for the summary itself."""
    params = getattr(settings, "params", None) or {}
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = params.get(key)
        if isinstance(value, int) and value > 0:
            return value
    words = int(getattr(settings, "max_summary_words", 0) or 0)
    return max(MIN_OUTPUT_TOKENS, int(words * 1.35) + 128)


def _fingerprints(raw: dict[str, Any]) -> set[str]:
    keys = {canonical_json(raw)}
    if raw.get("role") == "tool" and raw.get("tool_call_id"):
        keys.add("tool:" + str(raw["tool_call_id"]))
    for call in raw.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id"):
            keys.add("call:" + str(call["id"]))
    return keys


def missing_from_parent(parent: ParentRequest, span: list[Message]) -> list[str]:
    """Ids of span messages the parent request does not contain. A message that reduction
    edited since (cleared or truncated tool output) is matched by its tool call id."""
    seen: set[str] = set()
    for raw in parent.messages:
        seen |= _fingerprints(raw)
    missing = []
    for m in span:
        if m.provenance in (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT):
            continue  # the previous summary sits in the parent in its rendered form
        if canonical_json(m.raw) in seen:
            continue
        if m.reduction is not None or m.meta.get("reduction") is not None:
            ids = {"tool:" + m.tool_call_id} if m.tool_call_id else set()
            ids |= {"call:" + str(c.get("id")) for c in m.tool_calls if c.get("id")}
            if ids and ids <= seen:
                continue
        missing.append(m.id)
    return missing


def plan(parent_request: dict[str, Any] | ParentRequest | None, span: list[Message], settings: SummarizerPolicy, *,
         counter: MessageCounter, window: int, language: str = "en", extractive: bool = False) -> CacheSafePlan:
    """Decide between the cache-safe and the standalone request (see the module docstring)."""
    if not getattr(settings, "cache_safe", False):
        return CacheSafePlan("standalone", "cache-safe requests are off in this policy")
    if parent_request is None:
        return CacheSafePlan("standalone", "no parent request is known; sent the standalone summary request")
    try:
        parent = ParentRequest.from_dict(parent_request)
    except (TypeError, ValueError) as exc:
        return CacheSafePlan("standalone", f"the parent request is not usable ({exc}); sent the standalone request")
    if parent is None:  # from_dict answers None only when given None, ruled out above
        return CacheSafePlan("standalone", "no parent request is known; sent the standalone summary request")
    if extractive:
        return CacheSafePlan("standalone", "the offline extractive summarizer has no prompt cache; "
                                           "sent the standalone request")
    missing = missing_from_parent(parent, span)
    if missing:
        return CacheSafePlan("standalone", f"the parent request lacks {len(missing)} of the {len(span)} messages to "
                                           f"summarize (first: {missing[0]}); sent the standalone request")
    messages, _ = build_request(parent, settings, language)
    tokens = sum(counter.count_text(_text(m)) + MESSAGE_OVERHEAD for m in messages)
    if parent.tools:
        count_tools = getattr(counter, "count_tools", None)
        tokens += count_tools(parent.tools) if count_tools else counter.count_text(canonical_json(parent.tools))
    limit = window - output_reserve(settings)
    if tokens > limit:
        return CacheSafePlan("standalone", f"the parent request ({tokens:,} tokens with the instruction) does not fit "
                                           f"the summarizer window ({window:,} minus {output_reserve(settings):,} for "
                                           f"the summary); sent the standalone request")
    return CacheSafePlan("cache_safe", "forked the agent's last request and appended the compacting instruction",
                         messages, parent.tools, parent.tool_choice, tokens)


def _text(raw: dict[str, Any]) -> str:
    content = raw.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    for call in raw.get("tool_calls") or []:
        fn = (call or {}).get("function") or {}
        parts.append(str(fn.get("name") or ""))
        parts.append(str(fn.get("arguments") or ""))
    return "\n".join(parts)


__all__ = ["CacheSafePlan", "ParentRequest", "build_request", "compacting_instruction", "default_cache_safe_prompt",
           "missing_from_parent", "output_reserve", "plan", "validate_cache_safe_prompt"]
