"""Helpers shared by the service tests (import from here, not from conftest)."""
from __future__ import annotations

import json
import time

import pytest

from compaction import get_preset
from tests.corpus import corpus_files


def chat(n_turns: int, words: int = 60, tag: str = "t") -> list[dict]:
    """A plain agent session: a system prompt, then user / assistant tool call / tool result /
    assistant answer turns. Deterministic, about 4 * n_turns messages."""
    msgs = [{"role": "system", "content": "You are a careful coding agent."}]
    filler = " ".join(f"word{i}" for i in range(words))
    for i in range(n_turns):
        cid = f"call_{tag}_{i}"
        msgs.append({"role": "user", "content": f"Step {i}: please inspect src/module_{i}.py and report. {filler}"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read_file",
                                                          "arguments": json.dumps({"path": f"src/module_{i}.py"})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"def f_{i}():\n    return {i}\n# {filler}"})
        msgs.append({"role": "assistant", "content": f"Module {i} defines f_{i} returning {i}. {filler}"})
    return msgs


def corpus_session(prefix: str) -> dict | None:
    for p in corpus_files():
        if p.name.startswith(prefix):
            return json.loads(p.read_text(encoding="utf-8"))
    return None


def llm_policy(server, **summarizer) -> dict:
    """Default preset with the summarizer on the scripted server, no retries. ``server`` is
    the ``llm_server`` fixture's, which the operator declared as the connection "scripted"."""
    assert server.api_base, "the scripted server is not started"
    data = get_preset("default").to_json()
    data["summarizer"].update({"model": "openai/scripted", "connection": "scripted", "timeout_seconds": 60,
                               "retry": {"max_retries": 0, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}})
    data["summarizer"].update(summarizer)
    return data


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"):
    """Poll until predicate() is truthy (returns it); fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)

