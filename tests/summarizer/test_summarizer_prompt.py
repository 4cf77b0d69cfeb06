"""What the summarizer sends (checked on the wire) and how the answer is cleaned."""
from __future__ import annotations

import json

import pytest

from compaction.errors import PolicyError
from compaction.policy import Policy, SummarizerPolicy
from compaction.summarizer import (
    build_prompt_messages,
    render_conversation,
    strip_thinking,
    summarize,
)
from tests.support.llm_server import ok

SUMMARY = "Goal: fix tests/test_api.py."


def test_custom_prompt_placeholders_are_filled_in_the_request_the_server_received(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok(SUMMARY))
    prompt = ("Budget {max_summary_words} words.\nBefore: {previous_summary}\n"
              "Literal {{braces}} stay.\n---\n{conversation_text}\n---")
    settings = http_policy(prompt=prompt, max_summary_words=123)

    summarize(span, settings, counter=counter, replaced_tokens=span_tokens + 100,
              previous_summary="The user wants green tests.")

    sent = llm_server.requests[0].json["messages"]
    expected = ("Budget 123 words.\nBefore: The user wants green tests.\nLiteral {braces} stay.\n---\n"
                + render_conversation(span) + "\n---")
    assert sent == [{"role": "user", "content": expected}]


def test_the_prompt_in_the_result_is_byte_for_byte_what_was_sent(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok(SUMMARY))

    result = summarize(span, http_policy(), counter=counter, replaced_tokens=span_tokens)

    assert llm_server.requests[0].json["messages"] == result.prompt_messages
    assert result.input_tokens > 0


def test_a_system_prompt_is_sent_as_a_separate_system_message(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok(SUMMARY))
    settings = http_policy(system_prompt="You summarize coding sessions in {max_summary_words} words.",
                           prompt="Transcript:\n{conversation_text}", max_summary_words=50)

    summarize(span, settings, counter=counter, replaced_tokens=span_tokens)

    sent = llm_server.requests[0].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0]["content"] == "You summarize coding sessions in 50 words."
    assert sent[1]["content"].startswith("Transcript:\n[user]: Fix the failing test")


def test_the_default_prompt_asks_for_every_section_and_states_the_word_budget(span):
    messages = build_prompt_messages(render_conversation(span), SummarizerPolicy(max_summary_words=250))

    assert len(messages) == 1 and messages[0]["role"] == "user"
    text = messages[0]["content"]
    for heading in ("Goals and constraints", "Decisions and why", "Files and changes", "Facts learned from tools",
                    "Errors and their status", "Current state", "Next step"):
        assert f"## {heading}" in text
    assert "at most 250 words" in text
    assert "<previous_summary>\nnone\n</previous_summary>" in text
    assert "<conversation>\n[user]: Fix the failing test" in text


def test_the_default_prompt_folds_in_the_previous_summary_and_asks_to_merge_it(span):
    text = build_prompt_messages("[user]: hi", SummarizerPolicy(), previous_summary="Earlier: chose PostgreSQL.")[0]["content"]

    assert "<previous_summary>\nEarlier: chose PostgreSQL.\n</previous_summary>" in text
    assert "Merge it" in text


def test_the_word_budget_sentence_is_left_out_when_there_is_no_budget():
    text = build_prompt_messages("[user]: hi", SummarizerPolicy(max_summary_words=0))[0]["content"]

    assert "at most" not in text


def test_another_language_is_requested_by_name():
    text = build_prompt_messages("[user]: 你好", SummarizerPolicy(), language="zh-CN")[0]["content"]

    assert "Write the summary in Chinese." in text


@pytest.mark.parametrize("prompt, field_problem", [
    ("Summarize this please.", "must contain the {conversation_text}"),
    ("{conversation_text} {history}", "unknown placeholder"),
    ("{conversation_text} {", "not a valid template"),
])
def test_a_bad_custom_prompt_is_rejected_when_the_policy_is_loaded(prompt, field_problem):
    with pytest.raises(PolicyError) as caught:
        Policy.load({"summarizer": {"prompt": prompt}})

    assert caught.value.field == "summarizer.prompt"
    assert field_problem in str(caught.value)


def test_a_thinking_preamble_is_stripped_from_the_summary(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok("<think>The user wants... let me plan the summary.</think>\n\n" + SUMMARY))

    result = summarize(span, http_policy(), counter=counter, replaced_tokens=span_tokens)

    assert result.text == SUMMARY


def test_an_answer_that_is_only_reasoning_counts_as_empty(llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok("<analysis>Still thinking about it</analysis>"), ok(SUMMARY))

    result = summarize(span, http_policy(), counter=counter, replaced_tokens=span_tokens)

    assert result.text == SUMMARY
    assert result.attempts[0].error.startswith("empty summary")


def test_thinking_is_kept_when_stripping_is_switched_off(llm_server, http_policy, span, span_tokens, counter):
    answer = "<analysis>plan</analysis>" + SUMMARY
    llm_server.script(ok(answer))

    result = summarize(span, http_policy(strip_thinking=False), counter=counter, replaced_tokens=span_tokens)

    assert result.text == answer


@pytest.mark.parametrize("raw, clean", [
    ("<think>a</think>\nSummary", "Summary"),
    ("<THINKING type='x'>a\nb</THINKING>Summary", "Summary"),
    ("<analysis>steps</analysis>\n<summary>\nThe summary\n</summary>", "The summary"),
    ("reasoning without an opening tag</think>\nSummary", "Summary"),
    ("<reasoning>one</reasoning>Sum<reflection>two</reflection>mary", "Summary"),
    ("<think>ran out of tokens while thinking", ""),
    ("<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>Summary<|return|>",
     "Summary"),
    ("Plain summary mentioning <analysis> once", "Plain summary mentioning <analysis> once"),
])
def test_reasoning_markup_is_removed_in_all_its_usual_shapes(raw, clean):
    assert strip_thinking(raw) == clean


def test_request_bodies_are_valid_json_with_the_expected_model_name(
        llm_server, http_policy, span, span_tokens, counter):
    llm_server.script(ok(SUMMARY))

    summarize(span, http_policy(model="openai/my-local-llama"), counter=counter, replaced_tokens=span_tokens)

    body = json.loads(llm_server.requests[0].body)
    assert body["model"] == "my-local-llama"
    assert llm_server.requests[0].path == "/v1/chat/completions"
