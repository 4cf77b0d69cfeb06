"""Retry, backoff, timeouts and failover, over real HTTP to the scripted server."""
from __future__ import annotations

import pytest

from compaction.errors import SummaryError
from compaction.summarizer import Attempt, summarize
from compaction.summarizer import llm as llm_module
from tests.support.llm_server import empty, error, garbage, ok, slow

SUMMARY = "Goal: fix tests/test_api.py. Cause: KeyError user_id in src/api/views.py."


def run(span, settings, counter, replaced, events=None, **kw):
    return summarize(span, settings, counter=counter, replaced_tokens=replaced,
                     on_event=(events.append if events is not None else None), **kw)


def test_a_server_error_is_retried_and_the_next_answer_becomes_the_summary(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(500), ok(SUMMARY))
    events: list[dict] = []

    result = run(span, http_policy(), counter, span_tokens, events)

    assert result.text == SUMMARY
    assert result.model == "openai/primary" and not result.extractive
    assert [r.behaviour for r in llm_server.requests] == ["error", "ok"]
    assert [(e["attempt"], e["phase"], e["error"] is None) for e in events] == [(1, "primary", False), (2, "primary", True)]
    assert "500" in events[0]["error"]
    assert all(e["type"] == "generate_summary" and e["model"] == "openai/primary" for e in events)
    assert events[1]["usage"]["total_tokens"] > 0
    assert [a.ok for a in result.attempts] == [False, True]


def test_each_attempt_is_exactly_one_http_request(llm_server, http_policy, span, span_tokens, counter):
    # litellm and the OpenAI client must not retry on their own behind our back.
    llm_server.script(error(503), error(502), ok(SUMMARY))

    result = run(span, http_policy(), counter, span_tokens)

    assert len(llm_server.requests) == 3 == len(result.attempts)


def test_a_rate_limit_is_retried_honouring_retry_after_up_to_the_backoff_cap(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(429, retry_after=0.05), ok(SUMMARY))
    slept: list[float] = []
    settings = http_policy(retry={"max_retries": 2, "backoff_base": 0.001, "backoff_cap": 0.02, "jitter": 0})

    result = run(span, settings, counter, span_tokens, sleep=slept.append)

    assert result.text == SUMMARY
    assert "429" in result.attempts[0].error
    # The hint (50 ms) is longer than our own backoff (1 ms) but the cap (20 ms) wins.
    assert slept == [0.02]


def test_backoff_doubles_between_retries_and_stops_at_the_cap(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(500), error(500), error(500), error(500), ok(SUMMARY))
    slept: list[float] = []
    settings = http_policy(retry={"max_retries": 4, "backoff_base": 0.001, "backoff_cap": 0.005, "jitter": 0})

    run(span, settings, counter, span_tokens, sleep=slept.append)

    assert slept == [0.001, 0.002, 0.004, 0.005]


def test_jitter_spreads_each_backoff_within_its_share(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(500), error(500), ok(SUMMARY))
    slept: list[float] = []
    settings = http_policy(retry={"max_retries": 3, "backoff_base": 0.004, "backoff_cap": 1, "jitter": 0.5})

    run(span, settings, counter, span_tokens, sleep=slept.append)

    assert 0.002 <= slept[0] <= 0.006 and 0.004 <= slept[1] <= 0.012


def test_the_module_sleep_function_is_used_when_none_is_passed(
        llm_server, http_policy, span, span_tokens, counter, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(llm_module, "sleep", slept.append)
    llm_server.script(error(500), ok(SUMMARY))

    run(span, http_policy(), counter, span_tokens)

    assert len(slept) == 1


def test_a_response_slower_than_the_timeout_is_a_failed_attempt_and_the_next_try_is_made(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(slow(3, "too late"), ok(SUMMARY))
    events: list[dict] = []

    result = run(span, http_policy(timeout_seconds=0.3), counter, span_tokens, events)

    assert result.text == SUMMARY
    assert "timed out" in events[0]["error"]
    assert events[1]["error"] is None
    assert len(llm_server.requests) == 2


def test_failover_model_answers_after_the_primary_exhausts_its_retries(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(500), error(500), error(500), model="primary")
    llm_server.script(ok(SUMMARY), model="backup")
    events: list[dict] = []
    settings = http_policy(failover_models=["openai/backup"])

    result = run(span, settings, counter, span_tokens, events)

    assert result.text == SUMMARY
    assert result.model == "openai/backup"
    assert [r.model for r in llm_server.requests] == ["primary", "primary", "primary", "backup"]
    assert [(e["phase"], e["model"]) for e in events] == [
        ("primary", "openai/primary"), ("primary", "openai/primary"), ("primary", "openai/primary"),
        ("failover", "openai/backup")]
    assert [e["attempt"] for e in events] == [1, 2, 3, 4]


def test_a_client_error_skips_the_remaining_retries_of_that_model(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(400, "model does not support this"), model="primary")
    llm_server.script(ok(SUMMARY), model="backup")

    result = run(span, http_policy(failover_models=["openai/backup"]), counter, span_tokens)

    assert [r.model for r in llm_server.requests] == ["primary", "backup"]
    assert result.attempts[0].phase == "primary" and result.attempts[1].phase == "failover"


def test_an_empty_summary_is_rejected_and_retried(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(empty(), ok(SUMMARY))

    result = run(span, http_policy(), counter, span_tokens)

    assert result.text == SUMMARY
    assert result.attempts[0].error == "empty summary"


def test_a_summary_not_smaller_than_what_it_replaces_is_rejected(llm_server, http_policy, span, counter):
    long_text = "word " * 400
    llm_server.script(ok(long_text), ok(SUMMARY))

    result = run(span, http_policy(), counter, replaced=200)

    assert result.text == SUMMARY
    assert "not smaller than what it replaces" in result.attempts[0].error
    assert ">= 200 tokens" in result.attempts[0].error


def test_shrink_check_can_be_switched_off(llm_server, http_policy, span, counter):
    llm_server.script(ok("word " * 400))

    result = run(span, http_policy(require_shrink=False), counter, replaced=10)

    assert result.text.startswith("word word")


def test_an_unparseable_response_body_is_a_failed_attempt(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(garbage(), ok(SUMMARY))

    result = run(span, http_policy(), counter, span_tokens)

    assert result.text == SUMMARY
    assert not result.attempts[0].ok and result.attempts[0].error


def test_total_failure_raises_summary_error_carrying_every_attempt(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(error(500), garbage(), empty(), model="primary")
    llm_server.script(error(429), slow(2), ok("x " * 1000), model="backup")
    events: list[dict] = []
    settings = http_policy(failover_models=["openai/backup"], timeout_seconds=0.3)

    with pytest.raises(SummaryError) as caught:
        run(span, settings, counter, span_tokens, events)

    attempts = caught.value.attempts
    assert len(attempts) == 6 == len(events) == len(llm_server.requests)
    assert all(isinstance(a, Attempt) and not a.ok and a.error for a in attempts)
    assert [a.phase for a in attempts] == ["primary"] * 3 + ["failover"] * 3
    assert "6 attempts" in str(caught.value) and "not smaller" in str(caught.value)
    assert [a.to_dict()["number"] for a in attempts] == [1, 2, 3, 4, 5, 6]


def test_the_api_key_comes_from_the_named_environment_variable(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok(SUMMARY))

    run(span, http_policy(), counter, span_tokens)

    assert llm_server.requests[0].headers["authorization"] == "Bearer test"


def test_a_missing_api_key_variable_fails_every_model_without_sending_anything(
        llm_server, http_policy, span, span_tokens, counter, monkeypatch):
    monkeypatch.delenv("SCRIPTED_LLM_API_KEY")

    with pytest.raises(SummaryError) as caught:
        run(span, http_policy(failover_models=["openai/backup"]), counter, span_tokens)

    assert llm_server.requests == []
    assert [a.error for a in caught.value.attempts] == [
        "environment variable SCRIPTED_LLM_API_KEY (summarizer.api_key_env) is not set"] * 2


def test_extra_params_are_sent_with_the_request(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok(SUMMARY))

    run(span, http_policy(params={"temperature": 0.2, "max_tokens": 321}), counter, span_tokens)

    body = llm_server.requests[0].json
    assert body["temperature"] == 0.2 and body["max_tokens"] == 321
    assert body["model"] == "primary"
