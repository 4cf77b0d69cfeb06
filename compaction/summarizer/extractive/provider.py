"""The extractive summarizer answering a chat request, ``extractive/default``.

:func:`answer` reads the prompt back (:mod:`.request`); the policy's word budget and
language arrive as request metadata and win over what the prompt says, and so do the
user messages the context keeps verbatim after the summary (``kept_verbatim``).

The summarizer's own request loop calls :func:`answer` directly: the same retries,
failover, events and usage accounting as any model, without litellm's per-call
bookkeeping (a quarter of a replay's time) or its import (seconds, 165 MB) in a
process that never calls a real model. :func:`register` also makes it a litellm
custom provider, for code that calls ``litellm.completion`` itself (the LangChain
integration's ``ChatLiteLLM``).
"""
from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from ... import _env
from .request import parse_request
from .summary import summarize_text

PROVIDER = "extractive"
EXTRACTIVE_MODEL = f"{PROVIDER}/default"


def _prompt_chars(messages: list[Any]) -> int:
    return sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else 0
               for m in messages if isinstance(m, dict))


def answer(messages: list[Any], metadata: Any) -> tuple[str, dict[str, int]]:
    """The summary text for one chat request and its usage (tokens estimated at 4
    characters each, as nothing is billed)."""
    conversation, previous, words = parse_request(messages)
    language = "en"
    kept: list[str] = []
    if isinstance(metadata, dict):
        if isinstance(metadata.get("kept_verbatim"), list):
            kept = [t for t in metadata["kept_verbatim"] if isinstance(t, str)]
        if isinstance(metadata.get("max_summary_words"), int):
            words = metadata["max_summary_words"]
        if isinstance(metadata.get("language"), str):
            language = metadata["language"]
    text = summarize_text(conversation, previous, words, language, kept)
    prompt_tokens = math.ceil(_prompt_chars(messages) / 4)
    completion_tokens = math.ceil(len(text) / 4)
    return text, {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}


def _make_handler_class(litellm: Any) -> type[Any]:
    # litellm is imported only when a summary is first asked for, so the base class is
    # known at run time only and mypy sees it as Any.
    class ExtractiveLLM(litellm.CustomLLM):  # type: ignore[misc]  # base class of a lazily imported module
        """litellm custom provider ``extractive``: deterministic extractive summaries."""

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            meta = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            text, usage = answer(messages, meta)
            return litellm.ModelResponse(
                model=EXTRACTIVE_MODEL,
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage=usage,
            )

        async def acompletion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            return self.completion(model, messages, *args, **kwargs)

    return ExtractiveLLM


def register(litellm: ModuleType | None = None) -> None:
    """Add the ``extractive`` provider to litellm's ``custom_provider_map`` (idempotent).

    Only our own entry is added; the rest of the map is left as it was.
    """
    # The module's attributes are read dynamically (litellm is imported lazily).
    module: Any = litellm if litellm is not None else _env.litellm()
    if not any(item.get("provider") == PROVIDER for item in module.custom_provider_map):
        handler = _make_handler_class(module)()
        module.custom_provider_map = [*module.custom_provider_map, {"provider": PROVIDER, "custom_handler": handler}]
    module.utils.custom_llm_setup()
