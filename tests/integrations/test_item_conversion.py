"""What the integrations send the engine: Responses items become the chat messages they
mean (and come back as items), and a batch is checked against the conversation so far
without changing it."""
from __future__ import annotations

import pytest

from compaction.integrations._common import IntegrationError, check_new_messages
from compaction.integrations.responses_items import items_to_messages, messages_to_items
from compaction.messages import CallTracker


def test_a_turn_with_parallel_calls_becomes_one_assistant_message_and_comes_back_as_items():
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "What is in "},
                                     {"type": "input_text", "text": "these files?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Reading both.", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"path": "a.py"}'},
        {"type": "function_call", "call_id": "c2", "name": "read", "arguments": '{"path": "b.py"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "A"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "B"}]},
    ]
    messages = items_to_messages("test", items, 0)
    assert messages == [
        {"role": "user", "content": "What is in these files?"},
        {"role": "assistant", "content": "Reading both.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}},
            {"id": "c2", "type": "function", "function": {"name": "read", "arguments": '{"path": "b.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
    ]
    assert messages_to_items(messages) == [
        {"role": "user", "content": "What is in these files?"},
        {"role": "assistant", "content": "Reading both."},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"path": "a.py"}'},
        {"type": "function_call", "call_id": "c2", "name": "read", "arguments": '{"path": "b.py"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "A"},
        {"type": "function_call_output", "call_id": "c2", "output": "B"},
    ]


def test_an_image_from_the_user_stays_an_image():
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Look:"},
                                          {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}]
    messages = items_to_messages("test", items, 0)
    assert messages[0]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    assert messages_to_items(messages)[0]["content"][1]["image_url"] == "data:image/png;base64,AAAA"


def test_an_unsupported_part_is_named_with_its_item_and_position():
    items = [{"role": "user", "content": "hi"},
             {"role": "user", "content": [{"type": "input_file", "file_id": "f1"}]}]
    with pytest.raises(IntegrationError) as err:
        items_to_messages("openai-agents", items, 7)
    assert str(err.value) == "openai-agents: message 8: item 1: content part 0 has unsupported type 'input_file'"
    assert err.value.fault == "bad_content_part"


def _tracker_after(messages: list[dict]) -> CallTracker:
    tracker = CallTracker()
    for i, raw in enumerate(messages):
        tracker.feed(raw, i)
    return tracker


CALL = {"role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}


@pytest.mark.parametrize("batch, index, fault", [
    ([{"role": "user", "content": "and now?"}], 2, "unanswered_tool_call"),
    ([{"role": "tool", "tool_call_id": "c1", "content": "x"}, {"role": "tool", "tool_call_id": "c1", "content": "y"}],
     3, "orphan_tool_result"),
    ([{"role": "tool", "tool_call_id": "c1", "content": "x"}, CALL], 3, "duplicate_call_id"),
])
def test_a_batch_is_checked_against_the_open_calls_without_touching_them(batch, index, fault):
    tracker = _tracker_after([{"role": "user", "content": "read it"}, CALL])
    before = (dict(tracker.open), set(tracker.seen))
    with pytest.raises(IntegrationError) as err:
        check_new_messages("litellm", tracker, batch, 2)
    assert err.value.index == index and err.value.fault == fault
    assert str(err.value).startswith(f"litellm: message {index}: ")
    assert (dict(tracker.open), set(tracker.seen)) == before
    check_new_messages("litellm", tracker, [{"role": "tool", "tool_call_id": "c1", "content": "x"}], 2)
