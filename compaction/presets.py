"""Named policies. Each seed system's preset reproduces its documented defaults and
semantics in our vocabulary; ``default`` is ours and takes the best of them.

| preset | trigger | kept tail | summary turn | counter |
|---|---|---|---|---|
| default | 80% of usable window | 12 msgs / 25% window, user turn preferred | user + ack, recent user msgs re-inserted | tiktoken |
| eino | 160k tokens | none (whole history summarized) | user; recent user msgs verbatim in its `<all_user_messages>` section (≤ trigger/3) | last reported usage + chars/4 since |
| deepagents | 85% of the whole window (fallback 32,768) | 6 msgs / 25% window, must start at a user turn (a long last turn is kept whole) | user + ack | chars/4 |
| trpc | tokens since last summary > 50% of window | the current turn (any safe boundary when forced, or near the window: latest round) | merged into the system message; token tailoring last | chars/4 |
| sagents | 170k tokens | 6 msgs, nearest safe point searching backwards | user; agent's model; a failed summary keeps everything | chars/4 |
| langchain | 4,000 tokens (documented example) | 20 msgs | user; summarizer sees only the last 4,000 tokens | chars/4 |
| anthropic-clear-tool-uses | 100k tokens | - | no summary; clears old tool results keeping 3 | tiktoken |
| langchain-context-editing | 100k tokens | - | no summary; ClearToolUsesEdit defaults | chars/4 |

Seed details that are easy to get wrong:

- deepagents: its 4,096 reserved tokens are room for the summary's own generation
  (``summarizer.params.max_tokens``), not taken off the window the trigger measures, so at
  32,768 tokens it fires above 0.85 x 32,768 = 27,853.
- trpc: 300 words is our choice, the top of the range the seed recommends (100-300); tRPC
  states no limit unless one is configured. With a limit set, a custom prompt must carry
  ``{max_summary_words}`` (``summarizer.require_word_placeholder``). A forced run summarizes
  a single-request run too (``cut.forced_any_boundary``), and so does the synchronous summary
  tRPC runs before a model call whose request nears the window (at 90% of the usable window,
  ``cut.any_boundary_near_window``; the latest round stays verbatim), so token tailoring stays
  the last resort it is in the seed instead of dropping rounds on every call.
- deepagents: the cut snaps to a user turn; when the last turn is longer than the kept tail
  it snaps back to that turn's user message, so only single-turn runs cannot be compacted.
- sagents: the summary is written by the agent's own model when it is known
  (``summarizer.use_agent_model``: ``model``, else the model recorded on the latest assistant
  message), else offline; a failed summary is reported and the messages are kept
  (``summarizer.on_failure = "keep"``).
- eino: the trigger reads the latest provider-reported usage plus an estimate of what came
  after it (``count_from_usage``); without recorded usage it is the chars/4 estimate.

Guards. Every preset gains the overflow guard: a model call whose context would not fit the
usable window is compacted whatever the trigger says (reduction, summary, then dropping
whole oldest rounds), landing at the landing target. None of the seeds defines what happens
then; they send the call over the window. Every preset but ``eino`` keeps the latest round
(the last user message, or the last call with its results) verbatim whatever its kept tail,
the landing target or the guard ask (``cut.keep_latest_round``); Eino's summary replaces the
whole history, the latest round included. ``default`` also lands each compaction at half its
trigger threshold and skips compactions that would free less than 10% of the usable window
(the trigger re-arms after that many new tokens). The seed presets keep the seeds' own
kept-tail bounds and fire whenever their trigger says (``landing.move_cut`` off,
``landing.min_freed`` 0); their reduction keeps the seed's own minimum (``clear_at_least``).
``trpc`` alone has a minimum of 10% of the usable window: its trigger counts the tokens since
the last summary, and when the current turn holds nearly all of them a summary would free a
few tokens on every call; it waits instead, and near the window its synchronous summary keeps
only the latest round of that turn.
"""
from __future__ import annotations

from collections.abc import Callable

from .errors import PolicyError
from .messages import JSONObject
from .policy import Policy
from .reduction import config as reduction_config

# The seeds define their kept tail and fire whenever their trigger does: no landing target
# moves their cut and no minimum holds them back (only the overflow guard applies).
SEED_LANDING: JSONObject = {"min_freed": 0, "move_cut": False}


def _default() -> JSONObject:
    return {
        "name": "default",
        "description": "Ours: reduce tool output first, then summarize with a kept tail that respects tool pairs.",
        "reserved_output_tokens": 4096,
        "trigger": {"kind": "window_fraction", "fraction": 0.8},
        "cut": {"keep_messages": 12, "keep_fraction": 0.25, "search": "forward", "user_turn": "prefer"},
        # 900 words: on the dev corpus at 32k the summary then keeps enough of what the agent
        # uses next (needed-context recall 98.1%, against 97.9% at 600) at 9.7x compression
        "summarizer": {"max_summary_words": 900, "retry": {"max_retries": 3}},
        "finalize": {"injection": "user", "preserve_user_messages": True},
        "reduction": reduction_config.default_reduction().model_dump(mode="json"),
    }


def _eino() -> JSONObject:
    return {
        "name": "eino",
        "landing": SEED_LANDING,
        "description": "Eino summarization + reduction middlewares at their defaults.",
        "counter": "approx",
        "count_from_usage": True,
        "trigger": {"kind": "tokens", "threshold": 160_000},
        # Eino's summary replaces the whole history, the latest round included
        "cut": {"keep_messages": 0, "keep_fraction": 0.0, "user_turn": "ignore", "keep_latest_round": False},
        "summarizer": {"retry": {"max_retries": 0}},
        # Eino's default finalizer: the recent original user messages take the place of the
        # summary's <all_user_messages> section, within a third of the trigger threshold.
        "finalize": {"injection": "user", "acknowledgement": False, "preserve_user_messages": True,
                     "preserved_user_placement": "summary_section",
                     "preserve_user_max_tokens": 160_000 // 3, "preserve_user_max_messages": 10_000},
        "reduction": reduction_config.eino_reduction().model_dump(mode="json"),
    }


def _deepagents() -> JSONObject:
    return {
        "name": "deepagents",
        "landing": SEED_LANDING,
        "description": "DeepAgents SummarizationMiddleware at its defaults (cannot cut single-turn runs).",
        "counter": "approx",
        "fallback_context_window": 32_768,
        # reservedOutputTokens is the summary's own generation budget: the trigger fraction
        # applies to the whole window.
        "trigger": {"kind": "window_fraction", "fraction": 0.85},
        "cut": {"keep_messages": 6, "keep_fraction": 0.25, "search": "forward", "user_turn": "require"},
        "summarizer": {"retry": {"max_retries": 0}, "params": {"max_tokens": 4096}},
        "finalize": {"injection": "user", "acknowledgement": True, "preserve_user_messages": False},
    }


def _trpc() -> JSONObject:
    return {
        "name": "trpc",
        # Its trigger counts tokens since the last summary, so a turn that holds nearly all of
        # them leaves a summary little to free: below a tenth of the usable window it waits
        # (a prompt-cache break for little room) until the call nears the window.
        "landing": {**SEED_LANDING, "min_freed": 0.1},
        "description": "tRPC session summary: context-ratio trigger on tokens since the last summary, summary in the system message, compaction passes.",
        "counter": "approx",
        "trigger": {"kind": "window_fraction_since_summary", "fraction": 0.5},
        "cut": {"keep_messages": 0, "keep_fraction": 0.0, "search": "backward", "user_turn": "require",
                "forced_any_boundary": True, "any_boundary_near_window": 0.9},
        # 300 words: the top of the range the seed recommends; tRPC itself states no limit.
        "summarizer": {"max_summary_words": 300, "require_word_placeholder": True, "retry": {"max_retries": 0},
                       "cache_safe": False},
        "finalize": {"injection": "system", "acknowledgement": False, "preserve_user_messages": False},
        "reduction": reduction_config.trpc_reduction().model_dump(mode="json"),
        # Model-layer token tailoring is tRPC's final fallback; MaxHistoryRuns defaults to 0 (no
        # limit) and only applies without summaries; branch summaries cascade to the whole session
        # and every filter key is allowed; cache-safe forking is opt-in.
        "tailoring": {"enabled": True},
        "history_runs": 0,
        "branches": {"allowlist": None, "cascade": True},
    }


def _sagents() -> JSONObject:
    return {
        "name": "sagents",
        "landing": SEED_LANDING,
        "description": "Sagents Summarization: 170k tokens, keep 6 messages, backwards safe-cutoff search.",
        "counter": "approx",
        "trigger": {"kind": "tokens", "threshold": 170_000},
        "cut": {"keep_messages": 6, "keep_fraction": 1.0, "search": "backward", "user_turn": "ignore"},
        "summarizer": {"retry": {"max_retries": 0}, "use_agent_model": True, "on_failure": "keep"},
        "finalize": {"injection": "user", "acknowledgement": False, "preserve_user_messages": False},
    }


def _langchain() -> JSONObject:
    return {
        "name": "langchain",
        "landing": SEED_LANDING,
        "description": "LangChain v1 SummarizationMiddleware: token trigger, keep 20 messages, summarizer sees the last 4,000 tokens.",
        "counter": "approx",
        "trigger": {"kind": "tokens", "threshold": 4000},
        "cut": {"keep_messages": 20, "keep_fraction": 1.0, "search": "backward", "user_turn": "ignore"},
        "summarizer": {"retry": {"max_retries": 0}, "input_strategy": "keep_last", "input_max_tokens": 4000},
        "finalize": {"injection": "user", "acknowledgement": False, "preserve_user_messages": False},
    }


def _anthropic_clear() -> JSONObject:
    return {
        "name": "anthropic-clear-tool-uses",
        "landing": SEED_LANDING,
        "description": "Anthropic's clear_tool_uses context edit: clear old tool results over 100k tokens, keep 3 tool uses. No summaries.",
        "summarize": False,
        "trigger": {"kind": "tokens", "threshold": 100_000},
        "reduction": reduction_config.anthropic_clear_tool_uses().model_dump(mode="json"),
    }


def _langchain_context_editing() -> JSONObject:
    return {
        "name": "langchain-context-editing",
        "landing": SEED_LANDING,
        "description": "LangChain ContextEditingMiddleware with ClearToolUsesEdit defaults. No summaries.",
        "summarize": False,
        "counter": "approx",
        "trigger": {"kind": "tokens", "threshold": 100_000},
        "reduction": reduction_config.langchain_context_editing().model_dump(mode="json"),
    }


PRESETS: dict[str, Callable[[], JSONObject]] = {
    "default": _default,
    "eino": _eino,
    "deepagents": _deepagents,
    "trpc": _trpc,
    "sagents": _sagents,
    "langchain": _langchain,
    "anthropic-clear-tool-uses": _anthropic_clear,
    "langchain-context-editing": _langchain_context_editing,
}


def get_preset(name: str) -> Policy:
    try:
        factory = PRESETS[name]
    except KeyError:
        raise PolicyError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}", field="preset") from None
    return Policy.load(factory())


def preset_names() -> list[str]:
    return list(PRESETS)
