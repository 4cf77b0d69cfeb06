"""Session validation: bad sessions are rejected naming the message and the fault."""
import copy

import pytest

from compaction.errors import SessionValidationError
from compaction.messages import load_session_file, validate_session, wrap_originals
from tests.corpus import corpus_files, load, require_corpus


def call(cid, name="bash", args='{"cmd": "ls"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def test_every_corpus_session_is_accepted():
    require_corpus()
    files = corpus_files()
    for path in files:
        load_session_file(load(path.name), source=path.name)


@pytest.mark.parametrize("messages, index, fault", [
    ([{"role": "robot", "content": "hi"}], 0, "unknown_role"),
    ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "out"}], 1, "orphan_tool_result"),
    ([{"role": "assistant", "content": None, "tool_calls": [call("a")]},
      {"role": "tool", "tool_call_id": "a", "content": "1"},
      {"role": "assistant", "content": None, "tool_calls": [call("a")]}], 2, "duplicate_call_id"),
    ([{"role": "assistant", "content": None,
       "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}], 0, "malformed_arguments"),
    ([{"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
      {"role": "tool", "tool_call_id": "a", "content": "1"},
      {"role": "user", "content": "next"}], 2, "unanswered_tool_call"),
    ([{"role": "user", "content": 42}], 0, "bad_content"),
    ([{"role": "user", "content": [{"type": "video", "url": "x"}]}], 0, "bad_content_part"),
    ([{"role": "tool", "content": "x"}], 0, "missing_tool_call_id"),
    ([{"role": "user", "content": "x", "tool_calls": [call("a")]}], 0, "misplaced_tool_calls"),
])
def test_invalid_sessions_name_the_message_and_the_fault(messages, index, fault):
    with pytest.raises(SessionValidationError) as err:
        validate_session(messages, source="s.json")
    assert err.value.index == index
    assert err.value.fault == fault
    assert f"message {index}" in str(err.value) and "s.json" in str(err.value)


def test_a_result_answered_twice_is_an_orphan():
    messages = [{"role": "assistant", "content": None, "tool_calls": [call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "again"}]
    with pytest.raises(SessionValidationError, match="already answered"):
        validate_session(messages)


def test_trailing_unanswered_parallel_calls_are_legal():
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"}]
    assert validate_session(messages) is messages


def test_originals_get_stable_ids_and_keep_the_exact_dict():
    raw = [{"role": "user", "content": "hi", "name": "ann"}, {"role": "assistant", "content": "hello"}]
    snapshot = copy.deepcopy(raw)
    msgs = wrap_originals(raw)
    assert [m.id for m in msgs] == ["m000000", "m000001"]
    assert [m.ordinal for m in msgs] == [0, 1]
    assert msgs[0].raw is raw[0] and raw == snapshot
    assert all(m.provenance.value == "original" for m in msgs)


def test_a_bare_list_and_the_corpus_shape_both_load():
    msgs = [{"role": "user", "content": "hi"}]
    assert load_session_file(msgs) == (None, msgs, [])
    sid, loaded, tools = load_session_file({"id": "s1", "messages": msgs, "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert sid == "s1" and loaded == msgs and tools[0]["function"]["name"] == "f"
    with pytest.raises(SessionValidationError, match="expected a list of messages"):
        load_session_file({"msgs": []})
