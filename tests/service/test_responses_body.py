"""``POST /v1/responses`` bodies, read without a server: each field becomes its chat-completions
form or a 400 naming it (the end-to-end behaviour is in test_gateway_responses_create.py)."""
from __future__ import annotations

import json

import pytest

from compaction import get_preset
from dashboard.gateway.errors import GatewayError
from dashboard.gateway.responses_body import parse

FN = {"type": "function", "name": "read_file", "description": "Read a file", "strict": True,
      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}


def _parse(**fields):
    return parse(json.dumps(dict({"model": "gpt-4o", "input": "hi"}, **fields)).encode())


def test_function_tools_and_sampling_fields_take_their_chat_form():
    req = _parse(tools=[FN], tool_choice={"type": "function", "name": "read_file"}, parallel_tool_calls=False,
                 max_output_tokens=300, temperature=0.2, top_p=0.9, reasoning={"effort": "low"},
                 text={"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
                 instructions="Be brief.", metadata={"session_id": "s1"}, user="u1", store=False,
                 truncation="auto", include=["reasoning.encrypted_content"], prompt_cache_key="k",
                 service_tier="auto")
    assert req.tools == [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                                           "parameters": FN["parameters"], "strict": True}}]
    assert req.params == {"tool_choice": {"type": "function", "function": {"name": "read_file"}},
                          "parallel_tool_calls": False, "max_tokens": 300, "temperature": 0.2, "top_p": 0.9,
                          "response_format": {"type": "json_schema", "json_schema": {
                              "name": "out", "schema": {"type": "object"}, "strict": True}},
                          "reasoning_effort": "low"}
    assert (req.instructions, req.metadata, req.user, req.stream) == ("Be brief.", {"session_id": "s1"}, "u1", False)
    assert req.echo["store"] is False and req.echo["truncation"] == "auto" and req.echo["parallel_tool_calls"] is False
    assert not req.compaction and req.compact_threshold is None


def test_defaults_echoed_as_openai_answers_them():
    req = _parse()
    assert req.params == {} and req.tools == []
    assert (req.echo["store"], req.echo["truncation"], req.echo["parallel_tool_calls"], req.echo["tool_choice"]) == \
        (True, "disabled", True, "auto")
    assert req.echo["text"] == {"format": {"type": "text"}}
    assert _parse(text={"format": {"type": "text"}}).params == {}
    assert _parse(text={"format": {"type": "json_object"}}).params == {"response_format": {"type": "json_object"}}
    assert _parse(tool_choice="required", tools=[FN]).params["tool_choice"] == "required"
    assert "parallel_tool_calls" not in _parse(parallel_tool_calls=True).params, "no tools: nothing to parallelise"


def test_context_management_makes_the_threshold_the_trigger():
    req = _parse(context_management=[{"type": "compaction", "compact_threshold": 4000}])
    assert req.compaction and req.compact_threshold == 4000
    assert req.overrides(get_preset("default")) == {"summarize": True,
                                                    "trigger": {"kind": "tokens", "threshold": 4000}}
    bare = _parse(context_management=[{"type": "compaction"}])
    assert bare.compaction and bare.overrides(get_preset("default")) is None
    assert not _parse(context_management=[]).compaction


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"background": True}, "background", "Unrecognized request argument supplied: background"),
    ({"prompt": {"id": "p"}}, "prompt", "prompt"),
    ({"tools": [{"type": "file_search", "vector_store_ids": []}]}, "tools[0].type", "'file_search'"),
    ({"tools": [dict(FN, cache=True)]}, "tools[0].cache", "not a field"),
    ({"tools": [FN], "tool_choice": {"type": "function", "name": "other"}}, "tool_choice.name", "'other'"),
    ({"tool_choice": {"type": "allowed_tools"}}, "tool_choice", "allowed_tools"),
    ({"text": {"format": {"type": "json_schema"}}}, "text.format", "name and schema"),
    ({"text": {"colour": "blue"}}, "text.colour", "not served by this gateway"),
    ({"reasoning": {"effort": "low", "budget": 9}}, "reasoning.budget", "not served by this gateway"),
    ({"top_logprobs": 21}, "top_logprobs", "0 to 20"),
    ({"include": ["file_search_call.results"]}, "include[0]", "'file_search_call.results'"),
    ({"max_output_tokens": 0}, "max_output_tokens", "at least 1"),
    ({"max_output_tokens": True}, "max_output_tokens", "whole number"),
    ({"temperature": 3}, "temperature", "0 to 2"),
    ({"top_p": -0.1}, "top_p", "0 to 1"),
    ({"stream": "yes"}, "stream", "true or false"),
    ({"stream_options": {"include_obfuscation": False}}, "stream_options", "stream: true"),
    ({"metadata": {"n": 1}}, "metadata", "string values"),
    ({"user": 7}, "user", "string"),
    ({"store": "no"}, "store", "true or false"),
    ({"truncation": "middle"}, "truncation", "'auto' or 'disabled'"),
    ({"previous_response_id": ""}, "previous_response_id", "response id"),
    ({"context_management": {"type": "compaction"}}, "context_management", "list"),
    ({"context_management": [{"type": "compaction", "compact_threshold": 10, "keep": 2}]},
     "context_management[0].keep", "not a field"),
    ({"context_management": [{"type": "compaction"}, {"type": "compaction"}]}, "context_management[1]", "twice"),
    ({"context_management": [{"type": "compaction", "compact_threshold": 1.5}]},
     "context_management[0].compact_threshold", "whole number"),
])
def test_a_bad_field_is_a_400_naming_it(fields, param, words):
    with pytest.raises(GatewayError) as bad:
        _parse(**fields)
    assert bad.value.status == 400 and bad.value.param == param
    assert words in bad.value.message


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"text": {"format": {"type": "text"}, "verbosity": "low"}}, "text.verbosity", "text.verbosity: not served when"),
    ({"reasoning": {"effort": "low", "summary": "auto"}}, "reasoning.summary", "no reasoning summary is produced here"),
    ({"include": ["reasoning.encrypted_content", "message.output_text.logprobs"]}, "include[1]", "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs", "top_logprobs: not served when"),
])
def test_a_field_only_a_responses_upstream_answers_is_refused_only_when_translated(fields, param, words):
    """Read without a refusal (a pass-through upstream gets the client's fields as sent); the
    refusal comes when the call is translated to chat completions, naming the field and the
    setting that would pass it through."""
    req = _parse(**fields)
    with pytest.raises(GatewayError) as bad:
        req.check_translatable()
    assert bad.value.status == 400 and bad.value.param == param
    assert words in bad.value.message and "GATEWAY_RESPONSES_PASSTHROUGH" in bad.value.message
    _parse().check_translatable()  # nothing of the kind: nothing to refuse


def test_input_or_a_previous_response_is_required():
    with pytest.raises(GatewayError) as bad:
        parse(b'{"model": "gpt-4o"}')
    assert bad.value.param == "input"
    assert parse(b'{"model": "gpt-4o", "previous_response_id": "resp_1"}').input == []

