"""The Responses event stream built from chat chunks, read back with the OpenAI SDK's own
event types (``ResponseStreamEvent``), without a server."""
from __future__ import annotations

import pydantic
from openai.types.responses import Response, ResponseStreamEvent

from dashboard.gateway.errors import GatewayError
from dashboard.gateway.responses_wire import EventWriter, output_items, response_object

ECHO = {"instructions": None, "max_output_tokens": None, "metadata": {}, "parallel_tool_calls": True,
        "previous_response_id": None, "store": True, "temperature": None, "text": {"format": {"type": "text"}},
        "tool_choice": "auto", "tools": [], "top_p": None, "truncation": "disabled", "user": None,
        "reasoning": {"effort": None, "summary": None}}
EVENT = pydantic.TypeAdapter(ResponseStreamEvent)


def _chunk(delta=None, finish=None, usage=None):
    out = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta or finish else []}
    if usage:
        out["usage"] = usage
    return out


def test_text_then_a_call_make_two_items_closed_in_order_then_completed():
    writer = EventWriter("resp_x", "gpt-4o", ECHO, 1, [])
    events = list(writer.start())
    for chunk in (_chunk({"role": "assistant", "content": "Hel"}), _chunk({"content": "lo"}),
                  _chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "read", "arguments": ""}}]}),
                  _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"p": 1}'}}]}),
                  _chunk(finish="tool_calls"), _chunk(usage={"prompt_tokens": 5, "completion_tokens": 2})):
        events += writer.chunk(chunk)
    events += writer.finish_events()
    parsed = [EVENT.validate_python(e) for e in events]
    assert [e.type for e in parsed] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_item.added",
        "response.function_call_arguments.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.function_call_arguments.done", "response.output_item.done",
        "response.completed"]
    assert [e.sequence_number for e in parsed] == list(range(len(parsed)))
    done = parsed[-1].response
    assert done.output_text == "Hello" and done.output[1].arguments == '{"p": 1}'
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (5, 2, 7)


def test_an_upstream_failure_mid_stream_is_an_error_event():
    writer = EventWriter("resp_y", "gpt-4o", ECHO, 1, [])
    list(writer.start())
    list(writer.chunk(_chunk({"content": "par"})))
    event = EVENT.validate_python(writer.error(GatewayError(502, "the upstream could not be reached: reset",
                                                            type="server_error")))
    assert event.type == "error" and event.code == "server_error" and "reset" in event.message


def test_a_reply_cut_at_the_token_limit_is_incomplete():
    writer = EventWriter("resp_z", "gpt-4o", ECHO, 1, [])
    list(writer.start())
    list(writer.chunk(_chunk({"content": "abc"}, finish="length")))
    completed = EVENT.validate_python(list(writer.finish_events())[-1]).response
    assert completed.status == "incomplete" and completed.incomplete_details.reason == "max_output_tokens"


def test_the_response_object_is_the_sdks_response():
    reply = {"role": "assistant", "content": "Hi.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    body = response_object("resp_w", "gpt-4o", ECHO, created=1, output=output_items("resp_w", reply), finish="stop",
                           chat_usage={"prompt_tokens": 3, "completion_tokens": 1})
    parsed = Response.model_validate(body)
    assert parsed.output_text == "Hi." and parsed.output[1].call_id == "call_1" and parsed.usage.total_tokens == 4
