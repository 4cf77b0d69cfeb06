"""Fixtures for summarizer tests: a scripted OpenAI-compatible server, a token counter,
and a policy pointing at the server with tiny backoffs so retries cost milliseconds."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tests/support is a package next to this directory; the repository root must be importable.
_ROOT = Path(__file__).resolve().parents[2]
for _path in (_ROOT, Path(__file__).resolve().parent):  # the root, and this directory for summarizer_spans
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from summarizer_spans import small_coding_span  # noqa: E402

from compaction.messages import Message  # noqa: E402
from compaction.policy import SummarizerPolicy  # noqa: E402
from compaction.tokens import MessageCounter, make_counter  # noqa: E402
from tests.support.llm_server import llm_server  # noqa: E402,F401  (fixture)

KEY_ENV = "SCRIPTED_LLM_API_KEY"


@pytest.fixture
def counter() -> MessageCounter:
    return MessageCounter(make_counter("tiktoken"))


@pytest.fixture
def api_key(monkeypatch) -> str:
    monkeypatch.setenv(KEY_ENV, "test")
    return "test"


@pytest.fixture
def http_policy(llm_server, api_key):
    """Build a SummarizerPolicy aimed at the scripted server; keyword overrides win."""
    def build(**overrides) -> SummarizerPolicy:
        settings = {
            "model": "openai/primary",
            "api_base": llm_server.api_base,
            "api_key_env": KEY_ENV,
            "timeout_seconds": 5,
            "retry": {"max_retries": 2, "backoff_base": 0.001, "backoff_cap": 0.01, "jitter": 0.5},
            "require_shrink": True,
        }
        settings.update(overrides)
        return SummarizerPolicy.model_validate(settings)
    return build


@pytest.fixture
def span() -> list[Message]:
    return small_coding_span()


@pytest.fixture
def span_tokens(span, counter) -> int:
    return sum(t.total for t in counter.count_many(span))
