"""Summary generation: render a span, fit it to the summarizer's input, ask a model
through litellm with retries and failover, and check what comes back.

Public API (used by :class:`compaction.Compactor`)::

    from compaction.summarizer import summarize, SummaryResult, Attempt
    result = summarize(span, policy.summarizer, previous_summary=..., counter=counter,
                       replaced_tokens=n, on_event=events.append)

With no ``model`` configured the offline extractive summarizer answers
(``EXTRACTIVE_MODEL``, a litellm custom provider); ``result.extractive`` says so.
Importing this package does not import litellm; the first summary does.
"""
from ..prompt_templates import validate_prompt
from .core import (
    SummaryResult,
    extractive_again,
    input_budget,
    summarize,
    summarizer_window,
    task_kept,
)
from .extractive import EXTRACTIVE_MODEL
from .extractive import LABEL as EXTRACTIVE_LABEL
from .llm import Attempt
from .prompts import DEFAULT_PROMPT, build_prompt_messages
from .render import render_conversation
from .thinking import strip_thinking

__all__ = [
    "summarize", "SummaryResult", "Attempt", "render_conversation", "build_prompt_messages",
    "EXTRACTIVE_MODEL", "EXTRACTIVE_LABEL", "DEFAULT_PROMPT", "validate_prompt", "strip_thinking",
    "input_budget", "summarizer_window", "task_kept", "extractive_again",
]
