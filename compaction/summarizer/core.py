"""``summarize()``: from a span of messages to a checked summary, or a SummaryError.

Steps: render the span (:mod:`.render`), fit it into the summarizer's input budget
(:mod:`.fit`), build the prompt (:mod:`.prompts`), ask the models with retries and
failover (:mod:`.llm`), strip reasoning, reject an empty or non-shrinking answer.
Nothing here mutates the span; on failure the caller still has its input untouched.

Input budget: ``input_share`` of the summarizer's window (``context_window``, else
litellm's table for ``model``, else ``fallback_window``), capped by
``input_max_tokens``. The prompt template and the previous summary are counted in
it; the transcript gets the rest. A previous summary that alone would take more
than half the budget is clipped to a third of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import SummaryError
from ..messages import Message
from ..tokens import MESSAGE_OVERHEAD
from ..windows import model_window
from .extractive import EXTRACTIVE_MODEL
from .fit import clip_middle, fit_blocks
from .llm import Attempt, complete, is_extractive
from .prompts import build_prompt_messages
from .render import render_blocks

MIN_CONVERSATION_TOKENS = 256


@dataclass
class SummaryResult:
    text: str                       # the summary, reasoning stripped
    model: str                      # the model that produced it (EXTRACTIVE_MODEL when offline)
    extractive: bool                # True when no LLM wrote it
    attempts: list[Attempt]         # every attempt, failed ones included
    prompt_messages: list[dict]     # exactly what was sent
    usage: dict | None              # provider usage of the successful attempt
    input_tokens: int               # tokens of prompt_messages (our count)
    clipped: list[dict] = field(default_factory=list)  # what was clipped or omitted to fit the input

    def to_dict(self) -> dict:
        return {"text": self.text, "model": self.model, "extractive": self.extractive,
                "attempts": [a.to_dict() for a in self.attempts], "prompt_messages": self.prompt_messages,
                "usage": self.usage, "input_tokens": self.input_tokens, "clipped": self.clipped}


def summarizer_window(settings, fallback_window: int) -> int:
    return settings.context_window or model_window(settings.model) or fallback_window


def input_budget(settings, fallback_window: int) -> int:
    """Tokens the whole summarizer prompt may use."""
    budget = int(summarizer_window(settings, fallback_window) * settings.input_share)
    if settings.input_max_tokens:
        budget = min(budget, settings.input_max_tokens)
    return max(1, budget)


def _prompt_tokens(messages: list[dict], count_text: Callable[[str], int]) -> int:
    return sum(count_text(m.get("content") or "") + MESSAGE_OVERHEAD for m in messages)


def summarize(span: list[Message], settings, *, previous_summary: str | None = None, counter,
              fallback_window: int = 128_000, replaced_tokens: int,
              on_event: Callable[[dict], Any] | None = None, language: str = "en",
              tool_call_formatter: Callable[[str, str], str | None] | None = None,
              tool_result_formatter: Callable[[str, str], str | None] | None = None,
              sleep: Callable[[float], None] | None = None) -> SummaryResult:
    """Summarize ``span`` (folding in ``previous_summary``) with ``settings``.

    ``replaced_tokens`` is the size of everything the summary will replace; with
    ``settings.require_shrink`` a summary of that many tokens or more is rejected.
    ``on_event`` receives one ``generate_summary`` event per attempt. Raises
    :class:`~compaction.errors.SummaryError` (with ``.attempts``) when no usable
    summary comes back.
    """
    count_text = counter.count_text
    blocks = render_blocks(span, tool_call_formatter=tool_call_formatter,
                           tool_result_formatter=tool_result_formatter)
    previous = previous_summary.strip() if previous_summary and previous_summary.strip() else None
    if not blocks and previous is None:
        raise SummaryError("nothing to summarize: the span holds no renderable message", attempts=[])

    budget = input_budget(settings, fallback_window)
    clipped: list[dict] = []
    overhead = _prompt_tokens(build_prompt_messages("", settings, previous_summary=previous, language=language),
                              count_text)
    if previous is not None and overhead > budget // 2:
        before = count_text(previous)
        keep_tokens = max(1, budget // 3)
        keep_chars = int(len(previous) * keep_tokens / max(1, before))
        previous, cut = clip_middle(previous, keep_chars)
        clipped.append({"kind": "previous_summary", "tokens_before": before, "tokens_after": count_text(previous),
                        "chars_before": len(previous_summary.strip()), "chars_clipped": cut})
        overhead = _prompt_tokens(build_prompt_messages("", settings, previous_summary=previous, language=language),
                                  count_text)
    room = max(budget - overhead, min(MIN_CONVERSATION_TOKENS, budget))
    for _ in range(4):
        fitted = fit_blocks(blocks, room, count_text, settings.input_strategy)
        messages = build_prompt_messages(fitted.text, settings, previous_summary=previous, language=language)
        input_tokens = _prompt_tokens(messages, count_text)
        # Tokens can merge differently where the transcript meets the template: re-fit if over.
        if input_tokens <= budget or room <= MIN_CONVERSATION_TOKENS:
            break
        room = max(MIN_CONVERSATION_TOKENS, room - (input_tokens - budget) - 2)
    clipped.extend(fitted.clipped)

    def check(text: str) -> str | None:
        if not text.strip():
            return "empty summary"
        if settings.require_shrink:
            size = count_text(text)
            if size >= replaced_tokens:
                return (f"summary is not smaller than what it replaces "
                        f"({size} tokens >= {replaced_tokens} tokens)")
        return None

    # The extractive provider gets the budget as metadata (0 = none stated: it uses its own cap).
    result = complete(messages, settings, check=check, on_event=on_event, sleep_fn=sleep,
                      extractive_words=settings.max_summary_words)
    return SummaryResult(text=result.text, model=result.model, extractive=is_extractive(result.model),
                         attempts=result.attempts, prompt_messages=messages, usage=result.usage,
                         input_tokens=input_tokens, clipped=clipped)


__all__ = ["SummaryResult", "summarize", "input_budget", "summarizer_window", "EXTRACTIVE_MODEL"]
