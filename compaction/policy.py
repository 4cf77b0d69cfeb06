"""Compaction policy: one validated, JSON-serialisable object holding every setting.

Every field carries a description (shown in the dashboard and ``--help`` output) and is
validated on load; an invalid value raises :class:`compaction.errors.PolicyError` naming
the dotted path of the field.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from . import locales
from .branch_keys import normalize_allowlist
from .conditions import (
    CONDITION_KINDS,
    AllCondition,
    AnyCondition,
    Condition,
    IdleCondition,
    MessagesCondition,
    MessagesSinceSummaryCondition,
    TokensCondition,
    TokensSinceSummaryCondition,
    WindowFractionCondition,
    WindowFractionSinceSummaryCondition,
)
from .errors import PolicyError
from .landing import landing_target, min_freed, threshold_warnings, trigger_threshold
from .prompt_templates import validate_cache_safe_prompt, validate_prompt
from .reduction.config import ReductionPolicy
from .windows import resolve_window, usable_window

# The trigger conditions are part of the policy's vocabulary; they live in .conditions.
__all__ = [
    "AllCondition", "AnyCondition", "BranchesPolicy", "Condition", "CutPolicy", "FinalizePolicy", "HooksPolicy",
    "IdleCondition", "LandingPolicy", "MessagesCondition", "MessagesSinceSummaryCondition", "Policy", "RetryPolicy", "SkillsPolicy",
    "SummarizerPolicy", "TailoringPolicy", "TokensCondition", "TokensSinceSummaryCondition",
    "WindowFractionCondition", "WindowFractionSinceSummaryCondition", "policy_error", "set_dotted",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# -- cut ---------------------------------------------------------------------------------

class CutPolicy(_Strict):
    keep_messages: int = Field(6, ge=0, description="At most this many recent messages stay verbatim after a summary.")
    keep_fraction: float = Field(0.25, ge=0, le=1, description="The kept tail may use at most this share of the window in tokens; the smaller of the two bounds wins, so 0 keeps no tail but the latest round (cut.keep_latest_round) whatever keep_messages says (1: no token bound).")
    search: Literal["forward", "backward"] = Field("forward", description="Where to look for a safe cut from the target: 'forward' keeps fewer messages (bounds are ceilings), 'backward' keeps more (Sagents).")
    user_turn: Literal["prefer", "require", "ignore"] = Field("prefer", description="'prefer': the tail starts at a user turn when one is in reach, else at any safe boundary; 'require': no user-turn boundary means no compaction (DeepAgents); 'ignore': any safe boundary.")
    min_evicted_messages: int = Field(1, ge=1, description="Do nothing unless at least this many messages would be summarized.")
    forced_any_boundary: bool = Field(False, description="A forced run whose user_turn rule finds no user turn to start the kept tail (a single-request run) cuts at the nearest safe boundary instead of doing nothing (tRPC summarizes such runs when forced; DeepAgents does not).")
    keep_latest_round: bool = Field(True, description="The latest round (the last user message, or the last assistant message with the results of its calls) stays verbatim whatever the tail bounds, the landing target or the overflow guard ask: a summary of the request the model is about to answer, or of the results it is about to read, is no substitute for them. When the summary and that round do not fit the landing target, the context lands above it; guarding an overflow, the offline summary is written shorter to fit the window, and only a round that cannot fit the usable window beside any summary is summarized too. Off: the tail bounds alone decide (Eino summarizes the whole history).")
    any_boundary_near_window: float | None = Field(None, gt=0, le=1, description="When the context, after tool-output reduction, reaches this share of the usable window (or of token tailoring's budget when that is smaller) and the user_turn rule finds no user turn to start the kept tail (a single-request run, or a last turn that holds everything since the previous summary), the summary runs anyway before the model call, keeping the latest round verbatim (tRPC's synchronous summary when a request approaches the window). None: never.")


# -- summarizer --------------------------------------------------------------------------

class RetryPolicy(_Strict):
    max_retries: int = Field(3, ge=0, le=20, description="Retries per model after the first attempt.")
    backoff_base: float = Field(1.0, ge=0, description="First backoff in seconds; doubles each retry.")
    backoff_cap: float = Field(30.0, ge=0, description="Upper bound of one backoff in seconds.")
    jitter: float = Field(0.5, ge=0, le=1, description="Random share added to or removed from each backoff (0.5 = ±50%).")


class SummarizerPolicy(_Strict):
    model: str | None = Field(None, description="litellm model string for summaries. Empty means the offline extractive summarizer (no LLM).")
    failover_models: list[str] = Field(default_factory=list, description="Models tried in order when the primary model keeps failing.")
    api_base: str | None = Field(None, description="Base URL of an OpenAI-compatible server (llama.cpp, vLLM, a proxy).")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the API key (keys are never stored in policies).")
    connection: str | None = Field(None, description="Name of a model connection declared by the operator of the compaction service, which supplies the server address and key (the service refuses api_base and api_key_env from clients). The engine itself only carries the name.")
    params: dict[str, Any] = Field(default_factory=dict, description="Extra litellm.completion parameters (temperature, max_tokens...).")
    timeout_seconds: float = Field(120.0, gt=0, description="Timeout of one summary request.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    prompt: str | None = Field(None, description="Custom user prompt; must contain {conversation_text}; may use {previous_summary} and {max_summary_words}.")
    system_prompt: str | None = Field(None, description="Optional separate system message for the summarizer; must not contain {conversation_text}.")
    max_summary_words: int = Field(600, ge=0, description="Word budget given to the summarizer (0 = no limit stated). Never more than about 15% of the agent's usable window (at 1.35 tokens a word), so a summary cannot refill a small window; the offline extractive summary, whose words are paths and code names, is held to 2.5 tokens a word.")
    context_window: int | None = Field(None, gt=0, description="Window of the summarizer model; default from litellm's table or the policy's fallback.")
    input_share: float = Field(0.6, gt=0, le=1, description="The summarizer input may use at most this share of the summarizer's window; largest tool outputs are clipped first.")
    input_strategy: Literal["clip_largest", "keep_last"] = Field("clip_largest", description="How to fit the input: clip the largest tool outputs first, or keep only the most recent tokens (LangChain).")
    input_max_tokens: int | None = Field(None, gt=0, description="Absolute cap on summarizer input tokens (overrides input_share when smaller).")
    strip_thinking: bool = Field(True, description="Remove <think>/<analysis> preambles from the returned summary.")
    require_shrink: bool = Field(True, description="Reject a summary that is not smaller than what it replaces.")
    cache_safe: bool = Field(False, description="Cache-safe summary requests: when the agent's last model request is known, send that exact request (system, history, tools) plus one compacting instruction, so a provider's prompt cache is reused; otherwise the standalone request.")
    cache_safe_prompt: str | None = Field(None, description="Custom compacting instruction appended in cache-safe mode; may use {max_summary_words}, must not contain {conversation_text} (the conversation is already in the request).")
    require_word_placeholder: bool = Field(False, description="Refuse a custom prompt when a word limit is set (max_summary_words > 0) and neither the prompt nor the system prompt contains {max_summary_words}, so the limit cannot be dropped silently (tRPC's rule).")
    use_agent_model: bool = Field(False, description="When model is empty, summarize with the agent's own model instead of the offline extractive summarizer: the policy's model, else the 'model' recorded on the latest assistant message of the context (Sagents). The service uses the session's model only, never one a message names.")
    on_failure: Literal["raise", "keep"] = Field("raise", description="What a failed summary does after every retry and failover: 'raise' fails the run and changes nothing; 'keep' reports a summary_failed event, keeps the messages verbatim (tool-output reduction still applies) and lets the agent continue (Sagents).")

    @model_validator(mode="after")
    def _check_word_placeholder(self) -> SummarizerPolicy:
        if not (self.require_word_placeholder and self.max_summary_words > 0 and self.prompt is not None):
            return self
        if "{max_summary_words}" in self.prompt or "{max_summary_words}" in (self.system_prompt or ""):
            return self
        problem = (f"a word limit is set (max_summary_words={self.max_summary_words}), so the prompt or the "
                   f"system prompt must contain {{max_summary_words}}; add it, or set max_summary_words to 0")
        # Raised as a located error so the message names summarizer.prompt, not the whole section.
        raise ValidationError.from_exception_data("SummarizerPolicy", [InitErrorDetails(
            type=PydanticCustomError("value_error", problem), loc=("prompt",), input=self.prompt)])

    @field_validator("prompt")
    @classmethod
    def _check_prompt(cls, v: str | None) -> str | None:
        if v is None:
            return v
        validate_prompt(v)
        return v

    @field_validator("cache_safe_prompt")
    @classmethod
    def _check_cache_safe_prompt(cls, v: str | None) -> str | None:
        if v is None:
            return v
        validate_cache_safe_prompt(v)
        return v

    @field_validator("system_prompt")
    @classmethod
    def _check_system_prompt(cls, v: str | None) -> str | None:
        if v is not None and "{conversation_text}" in v:
            raise ValueError("the system prompt must not contain {conversation_text}; keep the conversation in the user prompt")
        return v


# -- finalize ----------------------------------------------------------------------------

class SkillsPolicy(_Strict):
    enabled: bool = Field(False, description="Re-insert the output of loaded skills after a summary.")
    tool_name: str = Field("skill", description="Name of the tool that loads skills.")
    max_skills: int = Field(5, ge=0, description="Most recent skills kept (0 disables).")
    max_tokens_per_skill: int = Field(5000, ge=0, description="Each kept skill is truncated to this many tokens.")
    token_budget: int = Field(25000, ge=0, description="Total tokens for all kept skills.")


class FinalizePolicy(_Strict):
    injection: Literal["user", "system", "first_user"] = Field("user", description="Where the summary goes. 'user': a marked user turn plus an assistant acknowledgement; 'system': merged into the system message (a new one when there is none); 'first_user' (tRPC's user mode): merged into the user message that follows it when there is one (a re-inserted or the first kept user message), else a user turn of its own, never with an acknowledgement. In every mode the next summary folds the current one in, so there is one live summary.")
    acknowledgement: bool = Field(True, description="Add the short assistant acknowledgement after a user-mode summary (keeps roles alternating).")
    preserve_user_messages: bool = Field(True, description="Re-insert the most recent original user messages from the evicted span, marked as earlier messages, without repeats (of each other, or of text the summary already quotes whole) and without those the user message filters (hooks.user_message_filter) reject.")
    preserved_user_placement: Literal["messages", "summary_section"] = Field("messages", description="Where re-inserted user messages go. 'messages': each is a user turn after the summary, prefixed with a short marker; 'summary_section' (Eino's layout): they are quoted inside the summary in an <all_user_messages> section and no extra turns are added.")
    preserve_user_max_tokens: int | None = Field(None, ge=0, description="Token budget for re-inserted user messages (default: 5% of the window); never more than a quarter of the usable window.")
    preserve_user_max_messages: int = Field(4, ge=0, description="At most this many user messages are re-inserted (the most recent ones), so a chat of many short turns still shrinks.")
    skills: SkillsPolicy = Field(default_factory=SkillsPolicy)
    archive_hint: bool = Field(True, description="Name the archive entry in the summary so the agent can recover originals.")
    archive_refs_max: int | None = Field(8, ge=2, description="A rolling summary stands for every entry its predecessors archived; it names at most this many (the oldest, then the latest), counts the others and points to session_search for them, so a long session's summary does not grow by a handle at every compaction (43 handles took about 500 tokens of an 8k window). None names every one.")
    language: str = Field("en", description="Language of the texts the engine writes into a context.")


# -- landing ---------------------------------------------------------------------------

class LandingPolicy(_Strict):
    target: float | None = Field(None, gt=0, description="Landing target: a compaction moves its cut back (within the safe-cut rules) until the context is at or below this; at most 1 is a share of the usable window, more is tokens. None: half of the trigger's lowest context-token threshold (half of the usable window when that is lower or the trigger has no token threshold). The kept tail's own minimum (unanswered tool calls, a required user turn) can keep a context above it. Must not lie above the trigger threshold.")
    min_freed: float | None = Field(None, ge=0, description="Minimum a compaction must free, tool-output clearing included: a compaction that would free less does not run, and the trigger is not re-armed until this many new tokens arrived. At most 1 is a share of the usable window, more is tokens; None: 10% of the usable window, at most a quarter of the trigger's lowest context-token threshold; 0: no minimum. Replay reports count as thrash every compaction that fired less than this after the previous one. Must not exceed the usable window.")
    move_cut: bool = Field(True, description="Move the cut past the kept-tail bounds (cut.keep_messages, cut.keep_fraction) when that is what it takes to reach the target. Off keeps the tail bounds as given (presets that reproduce a seed); the overflow guard moves the cut regardless when the context does not fit the usable window.")


# -- tailoring, branches, hooks ----------------------------------------------------------

class TailoringPolicy(_Strict):
    enabled: bool = Field(False, description="Final budget step of every compaction: while the context (tools included) exceeds the window minus reserved output, drop whole oldest rounds. The system message, summaries, pinned messages and the latest turn are never dropped, and a tool call never loses its results. Dropped originals are archived.")
    reserved_output_tokens: int | None = Field(None, ge=0, description="Room kept for the model's own output in the tailoring budget (capped at a quarter of the window). None: the policy's reserved_output_tokens, or 4,096 when that is 0.")


class BranchesPolicy(_Strict):
    allowlist: list[str] | None = Field(None, description="Filter keys ('app/branch') that may get their own branch summary. Matching is per path segment in both directions: 'app/tool' matches 'app/tool/search' and 'app', not 'app/toolbox'. None allows every key; an empty list allows none (the whole-session summary is never blocked).")
    cascade: bool = Field(True, description="A branch trigger also refreshes the whole-session summary.")

    @field_validator("allowlist")
    @classmethod
    def _check_allowlist(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        return normalize_allowlist(v)


class HooksPolicy(_Strict):
    pre_summary: list[str] = Field(default_factory=list, description="Registered pre_summary hooks (compaction.hooks), applied in order to the transcript the summarizer reads. Built-in: redact_secrets, collapse_whitespace, strip_ansi.")
    post_summary: list[str] = Field(default_factory=list, description="Registered post_summary hooks applied in order to the summary before it is written. Built-in: redact_secrets, collapse_whitespace.")
    input_builder: str | None = Field(None, description="Registered input_builder hook with full control of the summarizer's input messages. Built-in: default, single_user_message.")
    tool_call_formatter: str | None = Field(None, description="Registered formatter for tool calls in the summarizer input (an empty result leaves the call out). Built-in: name_only, omit.")
    tool_result_formatter: str | None = Field(None, description="Registered formatter for tool results in the summarizer input (an empty result leaves the result out). Built-in: omit, first_line, head_tail_2000.")
    user_message_filter: list[str] = Field(default_factory=lambda: ["drop_repeated_boilerplate"], description="Registered user_message_filter hooks (Eino's Filter): each gets an evicted user message and the context, and returns False to keep it from being re-inserted after the summary. Built-in: drop_repeated_boilerplate (a message sent verbatim 3 or more times, such as a harness reminder). An empty list re-inserts every candidate.")
    abort_on_error: bool = Field(False, description="A failing hook aborts the run (nothing is changed); off: the error is logged as an event and the hook is skipped.")

    @field_validator("pre_summary", "post_summary", "user_message_filter", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v

    @field_validator("pre_summary", "post_summary", "user_message_filter")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        if any(not isinstance(n, str) or not n.strip() for n in v):
            raise ValueError("hook names must be non-empty strings")
        return [n.strip() for n in v]


# -- the policy --------------------------------------------------------------------------

class Policy(_Strict):
    name: str = Field("custom", description="Label shown in reports.")
    description: str = Field("", description="What this policy is for.")
    model: str | None = Field(None, description="The agent's model: sets the tokenizer and the context window.")
    context_window: int | None = Field(None, gt=0, description="Window override in tokens (wins over litellm's table).")
    fallback_context_window: int = Field(128_000, gt=0, description="Window used when the model is unknown to litellm.")
    reserved_output_tokens: int = Field(0, ge=0, description="Room left for the model's own output (capped at a quarter of the window); fractions of the window apply to the window minus this.")
    counter: Literal["tiktoken", "approx"] = Field("tiktoken", description="'tiktoken': exact counts; 'approx': characters / chars_per_token.")
    encoding: str | None = Field(None, description="tiktoken encoding override (o200k_base, cl100k_base, p50k_base).")
    chars_per_token: float = Field(4.0, gt=0, description="Divisor of the approximate counter.")
    count_from_usage: bool = Field(False, description="Measure the context for the trigger from the provider's own report, as Eino's default counter does: the 'usage' object of the latest assistant message (total_tokens, else prompt_tokens + completion_tokens) plus the counter's estimate of every message after it. Used only when that message came after the last compaction; otherwise, or without usage, the counter's estimate.")
    trigger: Condition = Field(default_factory=lambda: WindowFractionCondition(fraction=0.8), description="When to summarize.")
    summarize: bool = Field(True, description="Summarize with an LLM when the trigger fires (off: reduction and tailoring only).")
    history_runs: int = Field(0, ge=0, description="Without summaries (summarize off): keep only the last N runs, a run starting at a user message; older runs are dropped and archived at every compaction. 0 = unlimited. Ignored when summarize is on.")
    language: str | None = Field(None, description="Language of every text the engine writes into a context (summary turn, acknowledgement, notices, default prompts); when set, finalize.language and reduction.language follow it. Languages: one file each in compaction/locales.")
    cut: CutPolicy = Field(default_factory=CutPolicy)
    summarizer: SummarizerPolicy = Field(default_factory=SummarizerPolicy)
    finalize: FinalizePolicy = Field(default_factory=FinalizePolicy)
    reduction: ReductionPolicy = Field(default_factory=ReductionPolicy)
    tailoring: TailoringPolicy = Field(default_factory=TailoringPolicy)
    branches: BranchesPolicy = Field(default_factory=BranchesPolicy)
    hooks: HooksPolicy = Field(default_factory=HooksPolicy)
    landing: LandingPolicy = Field(default_factory=LandingPolicy)
    pin_first_user_message: bool = Field(False, description="Never evict the first user message (the task statement).")

    @model_validator(mode="after")
    def _check_encoding(self) -> Policy:
        if self.encoding and self.encoding not in ("o200k_base", "cl100k_base", "p50k_base"):
            raise ValueError(f"unknown encoding {self.encoding!r}; offline encodings are o200k_base, cl100k_base, p50k_base")
        return self

    @model_validator(mode="after")
    def _check_landing(self) -> Policy:
        """Refuse targets that contradict the trigger or the window (they could never hold)."""
        window, _ = resolve_window(self)
        usable = usable_window(window, self.reserved_output_tokens)
        if self.landing.target is not None:
            target = landing_target(self.landing.target, self.trigger, window, self.reserved_output_tokens)
            threshold = trigger_threshold(self.trigger, window, self.reserved_output_tokens)
            if threshold is not None and target > threshold:
                raise PolicyError(f"the landing target of {target:,} tokens lies above the trigger threshold of "
                                  f"{threshold:,} tokens; a compaction would leave the context still due",
                                  field="landing.target")
            if target > usable:
                raise PolicyError(f"the landing target of {target:,} tokens lies above the usable window of "
                                  f"{usable:,} tokens", field="landing.target")
        if self.landing.min_freed is not None:
            minimum = min_freed(self.landing.min_freed, self.trigger, window, self.reserved_output_tokens)
            if minimum > usable:
                raise PolicyError(f"the minimum freed of {minimum:,} tokens lies above the usable window of "
                                  f"{usable:,} tokens; no compaction could ever free it", field="landing.min_freed")
        return self

    @model_validator(mode="after")
    def _follow_language(self) -> Policy:
        """One ``language`` for every engine text: the section languages follow it."""
        if self.language is None:
            return self
        # Copies, so a section object the caller passed in is never changed behind its back.
        # (__dict__ assignment: a validated assignment here would re-run this validator.)
        if self.finalize.language != self.language:
            self.__dict__["finalize"] = self.finalize.model_copy(update={"language": self.language})
        if self.reduction.language != self.language:
            reduction = self.reduction.model_copy()
            try:
                reduction.language = self.language
            except ValidationError:
                raise ValueError(f"language {self.language!r} has a locale file but reduction.language does not "
                                 f"accept it yet") from None
            self.__dict__["reduction"] = reduction
        return self

    @field_validator("language")
    @classmethod
    def _check_language(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not locales.has(v):
            raise ValueError(f"no texts for language {v!r}; available: {', '.join(locales.available())} "
                             f"(adding one is one file: compaction/locales/{v}.py)")
        return v

    # -- loading -------------------------------------------------------------------
    @classmethod
    def load(cls, data: dict[str, Any] | str | Policy) -> Policy:
        """Build from a dict or JSON text, raising PolicyError that names the bad field."""
        if isinstance(data, Policy):
            return data
        try:
            if isinstance(data, str):
                return cls.model_validate_json(data)
            return cls.model_validate(data)
        except ValidationError as exc:
            raise policy_error(exc) from None

    def with_overrides(self, overrides: dict[str, Any]) -> Policy:
        """Apply ``{"dotted.path": value}`` overrides and re-validate the whole policy."""
        data = self.model_dump(mode="json")
        for path, value in overrides.items():
            set_dotted(data, path, value)
        return Policy.load(data)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    # -- what the guard stands in for ---------------------------------------------------
    def warnings(self) -> list[str]:
        """Settings that load but cannot work as written at this policy's window: thresholds
        above the usable window, which the overflow guard pre-empts."""
        window, _ = resolve_window(self)
        clearing = self.reduction.clearing.trigger_tokens if (self.reduction.enabled and
                                                              self.reduction.clearing.enabled) else None
        return threshold_warnings(self.trigger, clearing, window, self.reserved_output_tokens)

    def landing_numbers(self, window: int) -> tuple[int, int]:
        """(landing target, minimum freed) in tokens at ``window``."""
        return (landing_target(self.landing.target, self.trigger, window, self.reserved_output_tokens),
                min_freed(self.landing.min_freed, self.trigger, window, self.reserved_output_tokens))


def _clean_loc(loc: tuple[int | str, ...]) -> str:
    """Dotted field path without pydantic's union tags (trigger.any.conditions.0.tokens.threshold
    becomes trigger.conditions.0.threshold)."""
    parts: list[str] = []
    for p in loc:
        p = str(p)
        if p.startswith(("function-", "tagged-union")):
            continue
        if p in CONDITION_KINDS and parts and (parts[-1] == "trigger" or parts[-1].isdigit()):
            continue
        parts.append(p)
    return ".".join(parts)


def policy_error(exc: ValidationError) -> PolicyError:
    first = exc.errors()[0]
    loc = _clean_loc(first["loc"])
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    raised = (first.get("ctx") or {}).get("error")
    if isinstance(raised, PolicyError) and raised.field:
        # a whole-policy check that knows which field is at fault
        loc = ".".join(p for p in (loc, raised.field) if p)
        msg = str(raised)[len(raised.field) + 2:]
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return PolicyError(msg, field=loc or None)


def set_dotted(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = data
    for i, key in enumerate(parts[:-1]):
        if not isinstance(node, dict) or key not in node:
            raise PolicyError("no such setting", field=".".join(parts[: i + 1]))
        if node[key] is None:
            node[key] = {}
        node = node[key]
    if not isinstance(node, dict) or parts[-1] not in node:
        if not (isinstance(node, dict) and parts[-1] in _optional_keys(node)):
            raise PolicyError("no such setting", field=path)
    node[parts[-1]] = value


def _optional_keys(node: dict[str, Any]) -> set[str]:
    return set(node)
