"""Settings of tool-output reduction, plus preset fragments for the systems we mirror.

Three phases share one policy (``Policy.reduction``):

- **truncation** runs when a tool message arrives (``pipeline.on_append``): a result over a
  size limit keeps a head+tail preview and its full text goes to the archive (Eino);
- **clearing** runs before a model call (``pipeline.before_call``) once the context is over a
  threshold: old tool results outside the protected recent rounds become placeholders
  (Eino, Anthropic ``clear_tool_uses``, LangChain ``ClearToolUsesEdit``);
- **passes** run before every model call (tRPC): pass 0 force-cleans named tools in history,
  pass 1 replaces large historical results, pass 2 truncates oversized results anywhere.

Tool lists: ``keep_tools`` are never touched by any phase and win over every other list;
the per-phase ``exclude_tools`` and per-tool ``skip_*`` flags also beat ``force_clean_tools``
("do not touch" always wins over "clean"). Python callables (rewriter, post-process, per-tool
handlers) are not settings; they go through ``pipeline.ReductionHooks``.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..locales import available, has

RECOVERY_TOOL_NAMES = ("session_load", "session_search")
PLACEHOLDER_FIELDS = ("tool_name", "tool_call_id", "handle", "chars", "tokens", "message_id", "load_call")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _clean_names(values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        name = v.strip()
        if not name:
            raise ValueError("tool names must be non-empty strings")
        if name not in out:
            out.append(name)
    return out


class ToolReduction(_Strict):
    """Per-tool overrides; they take precedence over the phase settings."""

    skip_truncation: bool = Field(False, description="Never truncate this tool's results on arrival or in pass 2.")
    max_chars: int | None = Field(None, gt=0, description="Truncation limit in characters for this tool (instead of truncation.max_chars).")
    skip_clearing: bool = Field(False, description="Never clear this tool's results (threshold clearing and passes 0/1).")
    clear_inputs: bool | None = Field(None, description="Override clearing.clear_tool_inputs for this tool's calls.")


class TruncationConfig(_Strict):
    enabled: bool = Field(True, description="Shorten oversized tool results as they arrive (head + tail preview, full text archived).")
    max_chars: int = Field(50_000, gt=0, description="A result whose text parts together exceed this many characters is truncated; the preview keeps this many characters split across its text parts.")
    exclude_tools: list[str] = Field(default_factory=list, description="Tools whose results are never truncated on arrival.")
    image_max_chars: int | None = Field(1_000_000, gt=0, description="An image part whose URL (base64 data) is longer than this is moved to the archive and replaced by a notice. None: never by size.")
    image_max_tokens: int | None = Field(None, gt=0, description="An image part costing more tokens than this (tile formula) is moved to the archive. None: never by cost.")
    binary_max_chars: int | None = Field(1024, ge=0, description="Text that looks like binary data and is longer than this is archived whole, leaving a short escaped preview. None: treat it like any text.")

    @field_validator("exclude_tools")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return _clean_names(v)


class ClearingConfig(_Strict):
    enabled: bool = Field(True, description="Replace old tool results with placeholders before a model call once the context is over the threshold.")
    trigger_tokens: int | None = Field(None, gt=0, description="Clear when the context exceeds this many tokens.")
    trigger_fraction: float | None = Field(0.5, gt=0, le=1, description="Clear when the context exceeds this share of the window. With trigger_tokens also set, either one firing is enough.")
    keep: int = Field(1, ge=0, description="How much recent tool activity stays untouched, in keep_unit units.")
    keep_unit: Literal["rounds", "tool_uses"] = Field("rounds", description="'rounds': assistant messages with tool calls, with all their results (Eino); 'tool_uses': single tool results (Anthropic, LangChain).")
    clear_at_least_tokens: int = Field(0, ge=0, description="Minimum tokens a clearing must reclaim (0 = any amount).")
    at_least_mode: Literal["guard", "stop"] = Field("guard", description="'guard': compute the whole edit, apply it only if it reclaims clear_at_least_tokens, else change nothing (Eino, Anthropic); 'stop': clear oldest first and stop once that many tokens are reclaimed (LangChain).")
    clear_tool_inputs: bool = Field(False, description="Also replace the arguments of the calls whose results are cleared.")
    exclude_tools: list[str] = Field(default_factory=list, description="Tools whose results are never cleared by threshold clearing or force-clean.")
    min_result_tokens: int = Field(0, ge=0, description="Results of at most this many tokens are left alone. A result is also left alone when its placeholder would not be smaller.")
    placeholder: str | None = Field(None, description="Custom placeholder text; may use {tool_name}, {tool_call_id}, {handle}, {chars}, {tokens}, {message_id}, {load_call}. None: the built-in notice with recovery hints.")

    @field_validator("exclude_tools")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return _clean_names(v)

    @field_validator("placeholder")
    @classmethod
    def _check_placeholder(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.strip():
            raise ValueError("placeholder must not be empty")
        try:
            v.format(**{k: "x" for k in PLACEHOLDER_FIELDS})
        except KeyError as exc:
            raise ValueError(f"unknown placeholder field {exc.args[0]!r}; allowed: {', '.join(PLACEHOLDER_FIELDS)}") from None
        except (IndexError, ValueError) as exc:
            raise ValueError(f"placeholder is not a valid template ({exc}); write literal braces as {{{{ and }}}}") from None
        return v

    @model_validator(mode="after")
    def _needs_trigger(self) -> ClearingConfig:
        if self.enabled and self.trigger_tokens is None and self.trigger_fraction is None:
            raise ValueError("clearing needs trigger_tokens or trigger_fraction (or enabled: false)")
        return self


class PassesConfig(_Strict):
    enabled: bool = Field(False, description="Run the tRPC-style compaction passes before every model call (no threshold).")
    keep_recent_requests: int = Field(1, ge=0, description="Besides the current request, this many recent completed requests (or rounds, see recent_unit) are protected from passes 0 and 1.")
    recent_unit: Literal["requests", "rounds"] = Field("requests", description="'requests': a request starts at each user message (tRPC); 'rounds': each assistant message with tool calls is a unit (useful for long single-task agent runs).")
    skip_recent_messages: int = Field(0, ge=0, description="The units owning the last N messages are also protected (tRPC SkipRecentFunc).")
    historical_max_tokens: int = Field(1024, gt=0, description="Pass 1: historical results over this many tokens are replaced by a placeholder.")
    oversized_max_tokens: int = Field(0, ge=0, description="Pass 2: results over this many tokens, current request included, are cut to head + tail. 0 disables it; 8192 is the usual opt-in value.")


class ReductionPolicy(_Strict):
    enabled: bool = Field(False, description="Run tool-output reduction before summarization.")
    language: str = Field("en", description="Language of the notices and placeholders written into the context (a file in compaction/locales/).")
    truncation: TruncationConfig = Field(default_factory=TruncationConfig, description="Truncation of oversized results on arrival.")
    clearing: ClearingConfig = Field(default_factory=ClearingConfig, description="Clearing of old results before a model call.")
    passes: PassesConfig = Field(default_factory=PassesConfig, description="tRPC-style passes 0/1/2 before every model call.")
    keep_tools: list[str] = Field(default_factory=lambda: list(RECOVERY_TOOL_NAMES), description="Tools whose results no phase ever touches (wins over every other list).")
    force_clean_tools: list[str] = Field(default_factory=list, description="Tools whose historical results are archived on every model call, whatever their size (pass 0), once outside the protected recent activity.")
    tools: dict[str, ToolReduction] = Field(default_factory=dict, description="Per-tool overrides by tool name.")
    recovery_limit_chars: int = Field(20_000, gt=0, description="The limit suggested in the session_load calls that notices print.")

    @field_validator("language")
    @classmethod
    def _language(cls, v: str) -> str:
        if not has(v):
            raise ValueError(f"no texts for language {v!r}; available: {', '.join(available())}")
        return v

    @field_validator("keep_tools", "force_clean_tools")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return _clean_names(v)

    # -- lookups used by the pipeline ------------------------------------------------
    def tool(self, name: str | None) -> ToolReduction:
        return self.tools.get(name or "") or _NO_OVERRIDE

    def is_kept(self, name: str | None) -> bool:
        return bool(name) and name in self.keep_tools


_NO_OVERRIDE = ToolReduction()


# -- preset fragments -----------------------------------------------------------------------
# Each returns a complete ReductionPolicy; compaction/presets.py puts it under Policy.reduction.

def default_reduction() -> ReductionPolicy:
    """Our default: truncate results over 50k characters on arrival; from half the window on,
    clear results older than the last 10 rounds, but only when that frees at least 2,000 tokens
    (smaller edits would cost a prompt-cache miss for little gain). Ten rounds, not three: on
    the dev corpus at 32k the agent's next message used 98.5% of what it needed from earlier
    history against 98.1% (three rounds cleared what it read a few calls before and went back
    to), still sending about 30% less than a sliding window."""
    return ReductionPolicy(
        enabled=True,
        truncation=TruncationConfig(max_chars=50_000),
        clearing=ClearingConfig(trigger_fraction=0.5, keep=10, keep_unit="rounds", clear_at_least_tokens=2000),
    )


def eino_reduction() -> ReductionPolicy:
    """Eino's reduction middleware defaults: truncation at 50,000 characters; clearing of
    arguments and results above 160,000 tokens, keeping the last assistant round."""
    return ReductionPolicy(
        enabled=True,
        truncation=TruncationConfig(max_chars=50_000),
        clearing=ClearingConfig(trigger_tokens=160_000, trigger_fraction=None, keep=1, keep_unit="rounds",
                                clear_at_least_tokens=0, clear_tool_inputs=True),
    )


def trpc_reduction(oversized_max_tokens: int = 0, force_clean_tools: list[str] | tuple[str, ...] = ()) -> ReductionPolicy:
    """tRPC context compaction: passes before every call, pass 1 at 1,024 tokens, pass 2 off
    unless a threshold is given (8192 is the recommended value); recovery tools kept."""
    return ReductionPolicy(
        enabled=True,
        truncation=TruncationConfig(enabled=False),
        clearing=ClearingConfig(enabled=False),
        passes=PassesConfig(enabled=True, keep_recent_requests=1, historical_max_tokens=1024,
                            oversized_max_tokens=oversized_max_tokens),
        force_clean_tools=list(force_clean_tools),
    )


def anthropic_clear_tool_uses(trigger_tokens: int = 100_000, keep: int = 3, clear_at_least: int = 0,
                              exclude_tools: list[str] | tuple[str, ...] = (), clear_tool_inputs: bool = False) -> ReductionPolicy:
    """Anthropic's ``clear_tool_uses_20250919`` edit: above 100k input tokens keep the last 3
    tool uses, clear older results (optionally their inputs too); ``clear_at_least`` is an
    all-or-nothing guard."""
    return ReductionPolicy(
        enabled=True,
        truncation=TruncationConfig(enabled=False),
        clearing=ClearingConfig(trigger_tokens=trigger_tokens, trigger_fraction=None, keep=keep, keep_unit="tool_uses",
                                clear_at_least_tokens=clear_at_least, at_least_mode="guard",
                                exclude_tools=list(exclude_tools), clear_tool_inputs=clear_tool_inputs),
    )


def langchain_context_editing(trigger_tokens: int = 100_000, keep: int = 3, clear_at_least: int = 0,
                              exclude_tools: list[str] | tuple[str, ...] = (), clear_tool_inputs: bool = False,
                              placeholder: str = "[cleared]") -> ReductionPolicy:
    """LangChain ``ContextEditingMiddleware`` with ``ClearToolUsesEdit`` defaults: trigger
    100,000 tokens, keep the last 3 tool results, placeholder "[cleared]"; a non-zero
    ``clear_at_least`` stops clearing once that many tokens are reclaimed."""
    return ReductionPolicy(
        enabled=True,
        truncation=TruncationConfig(enabled=False),
        clearing=ClearingConfig(trigger_tokens=trigger_tokens, trigger_fraction=None, keep=keep, keep_unit="tool_uses",
                                clear_at_least_tokens=clear_at_least, at_least_mode="stop",
                                exclude_tools=list(exclude_tools), clear_tool_inputs=clear_tool_inputs,
                                placeholder=placeholder),
    )


PRESET_FRAGMENTS = {
    "default": default_reduction,
    "eino": eino_reduction,
    "trpc": trpc_reduction,
    "anthropic-clear-tool-uses": anthropic_clear_tool_uses,
    "langchain-context-editing": langchain_context_editing,
}
