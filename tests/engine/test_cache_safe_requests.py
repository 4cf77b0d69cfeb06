"""A cache-safe summary request is the agent's last request, byte for byte, plus one
compacting instruction; without a usable parent request the standalone request is sent."""
from __future__ import annotations

import json

import pytest

from compaction import Compactor, Policy, PolicyError, _env
from compaction.messages import wrap_originals
from compaction.steps import summarizer_settings
from compaction.summarizer import summarize
from compaction.summarizer.cache_safe import (
    ParentRequest,
    compacting_instruction,
    default_cache_safe_prompt,
    missing_from_parent,
    plan,
)
from tests.support.llm_server import error, ok
from tests.support.sessions import BASH_TOOL, chat, corpus_messages, runs_with_tools

SUMMARY = "## Goals and constraints\nThe user wants the bug fixed."
CORPUS = "minipr__deepseek_bench1__django__django-11099.json"


def send_like_the_agent(server, messages: list[dict], tools: list[dict] | None) -> bytes:
    """The agent's own model call through the same client, recorded by the server."""
    server.script(ok("agent answer"))
    kwargs = {"tools": tools, "_skip_mcp_handler": True} if tools else {}
    _env.litellm().completion(model="openai/agent", api_base=server.api_base, api_key="test", messages=messages,
                              num_retries=0, max_retries=0, **kwargs)
    return server.requests[-1].body


def array_bytes(body: bytes, key: str) -> tuple[int, int]:
    """(start, end) byte offsets of the JSON array under ``key`` in a request body."""
    marker = f'"{key}":'.encode()
    start = body.index(marker) + len(marker)
    text = body[start:].decode("utf-8")
    _, end_chars = json.JSONDecoder().raw_decode(text)
    return start, start + len(text[:end_chars].encode("utf-8"))


def cache_policy(llm_settings, **summarizer) -> Policy:
    return Policy.load({"counter": "approx", "context_window": 200_000,
                        "cut": {"keep_messages": 4, "keep_fraction": 0.5},
                        "summarizer": llm_settings(cache_safe=True, **summarizer)})


def test_the_summary_request_starts_byte_for_byte_with_the_parent_messages_and_tools(llm_server, llm_settings):
    messages = corpus_messages(CORPUS)
    tools = [BASH_TOOL]
    parent_body = send_like_the_agent(llm_server, messages, tools)
    llm_server.script(ok(SUMMARY))

    out = Compactor(cache_policy(llm_settings)).compact(messages, tools=tools, force=True,
                                                        parent_request={"messages": messages, "tools": tools})

    assert out.summarized
    body = llm_server.requests[-1].body
    p_start, p_end = array_bytes(parent_body, "messages")
    s_start, s_end = array_bytes(body, "messages")
    prefix = parent_body[:p_end - 1]                      # up to the last parent message, bracket excluded
    assert body.startswith(prefix)
    assert body[len(prefix):len(prefix) + 1] == b","      # then exactly one more message
    sent = json.loads(body)
    assert len(sent["messages"]) == len(messages) + 1
    t1, t2 = array_bytes(parent_body, "tools"), array_bytes(body, "tools")
    assert parent_body[t1[0]:t1[1]] == body[t2[0]:t2[1]]
    last = sent["messages"][-1]
    assert last["role"] == "user" and "do not call any tool" in last["content"]
    assert out.summary == SUMMARY
    event = next(e for e in out.events if e["type"] == "summary_request")
    assert event["mode"] == "cache_safe"


def test_the_parent_messages_are_passed_through_as_the_same_objects(llm_server, llm_settings, counter):
    messages = chat(turns=6)
    span = wrap_originals(messages)[1:9]
    llm_server.script(ok(SUMMARY))
    settings = Policy.load({"summarizer": llm_settings(cache_safe=True)}).summarizer

    result = summarize(span, settings, counter=counter, replaced_tokens=10_000,
                       parent_request={"messages": messages})

    assert result.request_mode == "cache_safe"
    assert all(a is b for a, b in zip(result.prompt_messages, messages))
    assert llm_server.requests[0].json["messages"][:-1] == messages
    assert "tools" not in llm_server.requests[0].json


def test_the_instruction_states_the_word_budget_and_a_custom_one_is_filled(llm_settings):
    settings = Policy.load({"summarizer": llm_settings(cache_safe=True, max_summary_words=222)}).summarizer
    assert "at most 222 words" in compacting_instruction(settings)
    custom = settings.model_copy(update={"cache_safe_prompt": "Summarize all of the above in {max_summary_words} "
                                                              "words; keep {{braces}}."})
    assert compacting_instruction(custom) == "Summarize all of the above in 222 words; keep {braces}."


@pytest.mark.parametrize("prompt, problem", [
    ("Summarize {conversation_text}", "must not contain {conversation_text}"),
    ("Summarize in {language}", "unknown placeholder"),
    ("   ", "must not be empty"),
])
def test_a_bad_cache_safe_prompt_is_rejected_when_the_policy_loads(prompt, problem):
    with pytest.raises(PolicyError) as caught:
        Policy.load({"summarizer": {"cache_safe_prompt": prompt}})
    assert caught.value.field == "summarizer.cache_safe_prompt"
    assert problem in str(caught.value)


def test_without_a_parent_request_the_standalone_request_is_sent(llm_server, llm_settings):
    session = runs_with_tools(runs=4)
    llm_server.script(ok(SUMMARY))

    out = Compactor(cache_policy(llm_settings)).compact(session, force=True)

    sent = llm_server.requests[-1].json["messages"]
    assert len(sent) == 1 and "<conversation>" in sent[0]["content"]
    event = next(e for e in out.events if e["type"] == "summary_request")
    assert event["mode"] == "standalone" and "no parent request" in event["reason"]


def test_a_parent_request_set_on_the_compactor_is_used_when_compact_gets_none(llm_server, llm_settings):
    session = runs_with_tools(runs=4)
    llm_server.script(ok(SUMMARY))
    c = Compactor(cache_policy(llm_settings))
    c.parent_request = {"messages": session, "tools": [BASH_TOOL]}

    out = c.compact(session, force=True)

    sent = llm_server.requests[-1].json
    assert len(sent["messages"]) == len(session) + 1
    assert sent["tools"] == [BASH_TOOL]
    assert next(e for e in out.events if e["type"] == "summary_request")["mode"] == "cache_safe"


def test_a_stale_parent_request_that_lacks_the_span_falls_back_to_standalone(llm_server, llm_settings):
    session = runs_with_tools(runs=4)
    stale = session[:3]
    llm_server.script(ok(SUMMARY))

    out = Compactor(cache_policy(llm_settings)).compact(session, force=True,
                                                        parent_request={"messages": stale})

    event = next(e for e in out.events if e["type"] == "summary_request")
    assert event["mode"] == "standalone" and "lacks" in event["reason"]
    assert "<conversation>" in llm_server.requests[-1].json["messages"][-1]["content"]


def test_a_parent_too_big_for_the_summarizer_window_falls_back_to_standalone(llm_server, llm_settings):
    session = runs_with_tools(runs=6, output=3000)
    llm_server.script(ok(SUMMARY))
    p = cache_policy(llm_settings, context_window=4000, input_share=1.0)

    out = Compactor(p).compact(session, force=True, parent_request={"messages": session})

    event = next(e for e in out.events if e["type"] == "summary_request")
    assert event["mode"] == "standalone" and "does not fit" in event["reason"]


def test_the_offline_summarizer_always_gets_the_standalone_request(counter):
    session = chat(turns=6)
    settings = Policy.load({"summarizer": {"cache_safe": True}}).summarizer
    result = summarize(wrap_originals(session)[1:9], settings, counter=counter, replaced_tokens=10_000,
                       parent_request={"messages": session})
    assert result.request_mode == "standalone" and result.extractive
    assert "no prompt cache" in result.request_note


def test_with_the_option_off_a_parent_request_changes_nothing(llm_server, llm_settings):
    session = runs_with_tools(runs=4)
    llm_server.script(ok(SUMMARY))
    p = Policy.load({"counter": "approx", "summarizer": llm_settings()})

    out = Compactor(p).compact(session, force=True, parent_request={"messages": session})

    assert not any(e["type"] == "summary_request" for e in out.events)
    assert "<conversation>" in llm_server.requests[-1].json["messages"][-1]["content"]


def test_when_the_llm_fails_an_offline_failover_summarizes_the_standalone_request(llm_server, llm_settings):
    session = runs_with_tools(runs=4)
    llm_server.script(error(400, "context too long"))
    p = cache_policy(llm_settings, failover_models=["extractive/default"])

    out = Compactor(p).compact(session, force=True, parent_request={"messages": session})

    assert out.extractive
    assert [a["ok"] for a in out.attempts] == [False, True]
    assert [a["number"] for a in out.attempts] == [1, 2]
    assert len(llm_server.requests) == 1


def test_the_instruction_follows_the_policy_language(llm_server, llm_settings):
    session = runs_with_tools(runs=3)
    llm_server.script(ok("摘要"))
    p = Policy.load({"counter": "approx", "language": "zh", "cut": {"keep_messages": 4},
                     "summarizer": llm_settings(cache_safe=True)})

    Compactor(p).compact(session, force=True, parent_request={"messages": session})

    last = llm_server.requests[-1].json["messages"][-1]["content"]
    assert last == default_cache_safe_prompt(p.summarizer.max_summary_words, "zh").replace(
        "{max_summary_words}", str(summarizer_settings(p, Compactor(p).window).max_summary_words))
    assert "不要调用任何工具" in last


def test_a_reduced_message_is_still_found_in_the_parent_by_its_tool_call_id():
    session = runs_with_tools(runs=2)
    msgs = wrap_originals(session)
    cleared = msgs[3].with_raw({**msgs[3].raw, "content": "[archived]"}, reduction={"kind": "cleared"})
    parent = ParentRequest.from_dict({"messages": session})
    assert missing_from_parent(parent, [msgs[2], cleared]) == []
    assert missing_from_parent(parent, [wrap_originals([{"role": "user", "content": "new"}], 99)[0]]) == ["m000099"]


def test_an_anthropic_style_system_field_becomes_the_first_message():
    parent = ParentRequest.from_dict({"system": "be brief", "messages": [{"role": "user", "content": "hi"}]})
    assert parent.messages[0] == {"role": "system", "content": "be brief"}


def test_the_plan_names_why_it_chose_each_mode(counter, llm_settings):
    session = chat(turns=3)
    span = wrap_originals(session)[1:3]
    on = Policy.load({"summarizer": {"model": "openai/x", "cache_safe": True}}).summarizer
    off = Policy.load({"summarizer": {"model": "openai/x"}}).summarizer
    assert plan({"messages": session}, span, on, counter=counter, window=100_000).mode == "cache_safe"
    assert "off" in plan({"messages": session}, span, off, counter=counter, window=100_000).reason
    assert plan(None, span, on, counter=counter, window=100_000).mode == "standalone"


def test_a_malformed_parent_request_falls_back_instead_of_failing_the_run(counter):
    span = wrap_originals(chat(turns=2))[1:3]
    on = Policy.load({"summarizer": {"model": "openai/x", "cache_safe": True}}).summarizer
    for bad in ({"messages": []}, {"messages": "hi"}, ["not", "a", "dict"]):
        chosen = plan(bad, span, on, counter=counter, window=100_000)
        assert chosen.mode == "standalone" and "not usable" in chosen.reason
