"""Fixtures of the engine tests: a character-based token counter and the ``summarizer``
section of a policy aimed at the scripted OpenAI-compatible server."""
from __future__ import annotations

import pytest

from compaction.tokens import CharCounter, MessageCounter
from tests.support.llm_server import llm_server  # noqa: F401  (fixture)

KEY_ENV = "SCRIPTED_LLM_API_KEY"


@pytest.fixture
def counter() -> MessageCounter:
    return MessageCounter(CharCounter(4.0))


@pytest.fixture
def llm_settings(llm_server, monkeypatch):
    """The ``summarizer`` section of a policy aimed at the scripted server (no retries)."""
    monkeypatch.setenv(KEY_ENV, "test")

    def build(**overrides) -> dict:
        settings = {"model": "openai/summarizer", "api_base": llm_server.api_base, "api_key_env": KEY_ENV,
                    "timeout_seconds": 5, "require_shrink": False,
                    "retry": {"max_retries": 0, "backoff_base": 0.001, "backoff_cap": 0.01}}
        settings.update(overrides)
        return settings
    return build
