"""The extractive summarizer as a litellm custom provider, ``extractive/default``.

Going through litellm like any other model keeps one code path for every summary:
the same retries, failover, events and usage accounting. The provider reads the
prompt back (:mod:`.request`); the policy's word budget and language arrive as
request metadata and win over what the prompt says, and so do the user messages the
context keeps verbatim after the summary (``kept_verbatim``).
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


def _make_handler_class(litellm: Any) -> type[Any]:
    # litellm is imported only when a summary is first asked for, so the base class is
    # known at run time only and mypy sees it as Any.
    class ExtractiveLLM(litellm.CustomLLM):  # type: ignore[misc]  # base class of a lazily imported module
        """litellm custom provider ``extractive``: deterministic extractive summaries."""

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            meta = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            conversation, previous, words = parse_request(messages)
            language = "en"
            kept: list[str] = []
            if isinstance(meta, dict):
                if isinstance(meta.get("kept_verbatim"), list):
                    kept = [t for t in meta["kept_verbatim"] if isinstance(t, str)]
                if isinstance(meta.get("max_summary_words"), int):
                    words = meta["max_summary_words"]
                if isinstance(meta.get("language"), str):
                    language = meta["language"]
            text = summarize_text(conversation, previous, words, language, kept)
            prompt_tokens = math.ceil(_prompt_chars(messages) / 4)
            completion_tokens = math.ceil(len(text) / 4)
            return litellm.ModelResponse(
                model=EXTRACTIVE_MODEL,
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                       "total_tokens": prompt_tokens + completion_tokens},
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
