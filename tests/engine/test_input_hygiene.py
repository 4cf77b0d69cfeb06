"""Text the engine cannot store is refused when a session arrives, not when it is compacted."""
from __future__ import annotations

import json

import pytest

from compaction import get_preset, simulate
from compaction.archive import MemoryArchive
from compaction.archive_tools import handle_tool_call
from compaction.errors import SessionValidationError
from compaction.formats import convert
from compaction.messages import validate_message, validate_session

LONE = "\ud800"


def _call(arguments: str = "{}", name: str = "read_file", cid: str = "call_1") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize("raw, field, offset", [
    ({"role": "user", "content": f"hello world {LONE}!"}, "content", 12),
    ({"role": "user", "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": f"x{LONE}"}]},
     "content[1].text", 1),
    ({"role": "assistant", "content": None, "tool_calls": [_call(f'{{"p": "{LONE}"}}')]},
     "tool_calls[0].function.arguments", 7),
    ({"role": "assistant", "content": None, "tool_calls": [_call(name=f"read{LONE}")]},
     "tool_calls[0].function.name", 4),
    ({"role": "user", "content": "hi", "name": f"{LONE}bob"}, "name", 0),
    ({"role": "tool", "tool_call_id": f"call{LONE}", "content": "ok"}, "tool_call_id", 4),
])
def test_a_lone_surrogate_anywhere_in_a_message_is_refused_naming_field_and_offset(raw, field, offset):
    with pytest.raises(SessionValidationError) as err:
        validate_message(raw, 3)
    exc = err.value
    assert exc.fault == "unencodable_text" and exc.index == 3 and exc.field == field
    assert f"{field}: contains a lone surrogate (U+D800) at character {offset}" in str(exc)
    assert "valid UTF-8" in str(exc)


def test_a_lone_surrogate_in_a_key_is_refused_and_named_with_escapes():
    with pytest.raises(SessionValidationError, match="lone surrogate") as err:
        validate_message({"role": "user", "content": [{"type": "text", "text": "hi", f"x{LONE}": 1}]}, 0)
    assert err.value.fault == "unencodable_text"
    assert err.value.field == "content[0].x\\ud800 (a key)"
    str(err.value).encode("utf-8")  # the error itself can be logged and stored


def test_valid_non_ascii_text_and_surrogate_pairs_pass():
    validate_session([{"role": "user", "content": "caf\u00e9 \U0001f600 \u4e2d\u6587"},
                      {"role": "assistant", "content": [{"type": "text", "text": "\U0001f600"}]}])


def test_a_lone_surrogate_in_an_import_names_the_input_message():
    text = json.dumps({"messages": [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": f"a{LONE}"}]})
    with pytest.raises(SessionValidationError, match=r"message 1: content: contains a lone surrogate") as err:
        convert(text, source="s.json")
    assert err.value.fault == "unencodable_text" and err.value.index == 1


DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "1" * 5000


@pytest.mark.parametrize("text, fmt, why", [
    (DEEP, None, "nested too deeply"),
    (DEEP, "openai", "nested too deeply"),
    (f'{{"messages": [{{"role": "user", "content": "hi", "x": {DEEP}}}]}}', None, "nested too deeply"),
    (f'{{"role": "user", "content": "hi", "x": {DEEP}}}\n', "openai_jsonl", "nested too deeply"),
    (f'{{"role": "user", "content": "hi"}}\n{{"role": "user", "content": "x", "n": {DEEP}}}\n', None,
     "nested too deeply"),
    (f'{{"type": "user", "uuid": "u", "message": {DEEP}}}\n', "claude_code_jsonl", "nested too deeply"),
    (f'{{"messages": [{{"role": "user", "content": "hi", "n": {HUGE_INT}}}]}}', None, "too many digits|digits"),
    (f'{{"role": "user", "content": "hi", "n": {HUGE_INT}}}\n', "openai_jsonl", "digits"),
    (f'{{"role": "user", "content": "hi"}}\n{{"role": "user", "content": "x", "n": {HUGE_INT}}}\n', None,
     "digits"),
], ids=["deep-detected", "deep-openai", "deep-in-a-message", "deep-jsonl", "deep-second-line", "deep-claude-code",
        "digits-json", "digits-jsonl", "digits-second-line"])
def test_json_the_parser_refuses_is_an_import_error(text, fmt, why):
    with pytest.raises(SessionValidationError, match=why) as err:
        convert(text, format=fmt, source="in.json")
    assert err.value.fault == "bad_json"
    assert "in.json" in str(err.value)


# -- tool-call arguments nested deeper than the JSON parser goes -------------------------------

DEEP_ARGUMENTS = "[" * 100_000 + "]" * 100_000


def _deep_session() -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(12):
        args = DEEP_ARGUMENTS if i == 2 else json.dumps({"path": f"src/mod{i}.py"})
        out += [{"role": "user", "content": f"step {i}: read src/mod{i}.py"},
                {"role": "assistant", "content": None, "tool_calls": [_call(args, cid=f"call_{i}")]},
                {"role": "tool", "tool_call_id": f"call_{i}", "content": f"contents of mod{i} " * 200},
                {"role": "assistant", "content": f"read mod{i}"}]
    return out


@pytest.mark.parametrize("preset", ["default", "deepagents"])
def test_arguments_nested_too_deeply_for_the_parser_do_not_break_compaction(preset):
    report = simulate(_deep_session(), get_preset(preset).with_overrides(
        {"trigger": {"kind": "tokens", "threshold": 2_000}, "context_window": 8_000}))
    assert report["compactions"] and not report["failed_compactions"]


def test_an_archive_tool_call_with_arguments_nested_too_deeply_gets_an_error_reply():
    reply = json.loads(handle_tool_call(MemoryArchive(), "s1", "session_load", DEEP_ARGUMENTS))
    assert "error" in reply and "nested too deeply" in reply["error"]
