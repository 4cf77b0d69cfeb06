"""Import formats: OpenAI JSON/JSONL, Anthropic Messages, Claude Code JSONL -> OpenAI messages."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.errors import SessionValidationError
from compaction.formats import (
    FORMATS,
    ImportedSession,
    convert,
    convert_file,
    convert_many,
    detect_format,
)
from compaction.messages import validate_session
from tests.corpus import CORPUS_DIR as CORPUS
from tests.corpus import require_corpus

FIX = Path(__file__).parent / "fixtures"


def read(name: str) -> bytes:
    return (FIX / name).read_bytes()


def roundtrip(session: ImportedSession) -> ImportedSession:
    """Serialise the converted session as OpenAI JSON and import it again."""
    again = convert(json.dumps(session.to_dict()), format="openai", source="roundtrip.json")
    assert again.messages == session.messages
    assert again.tools == session.tools
    assert (again.title, again.external_id, again.model) == (session.title, session.external_id, session.model)
    return again


# -- detection -------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("openai_session.json", "openai"),
    ("openai_many.json", "openai"),
    ("openai.jsonl", "openai_jsonl"),
    ("anthropic.json", "anthropic"),
    ("claude_code.jsonl", "claude_code_jsonl"),
    ("claude_code_branch.jsonl", "claude_code_jsonl"),
])
def test_detect_from_text_and_bytes(name, expected):
    raw = read(name)
    assert detect_format(raw) == expected
    assert detect_format(raw.decode()) == expected


def test_detect_from_parsed_values():
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"
    assert detect_format({"messages": [{"role": "user", "content": "hi"}]}) == "openai"
    assert detect_format({"role": "user", "content": "hi"}) == "openai_jsonl"
    assert detect_format({"system": "s", "messages": []}) == "anthropic"
    assert detect_format({"messages": [], "tools": [{"name": "x", "input_schema": {}}]}) == "anthropic"
    assert detect_format([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n",
                                                              "input": {}}]}]) == "anthropic"
    assert detect_format([{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "x"}}]) \
        == "claude_code_jsonl"
    # A Claude Code file whose first line is a summary record.
    assert detect_format('{"type": "summary", "summary": "t", "leafUuid": "x"}\n'
                         '{"type": "user", "uuid": "u", "message": {"role": "user", "content": "x"}}\n') \
        == "claude_code_jsonl"


def test_detect_rejects_unknown_shapes():
    with pytest.raises(SessionValidationError) as err:
        detect_format({"foo": 1})
    assert err.value.fault == "unknown_format"
    with pytest.raises(SessionValidationError):
        detect_format('{"a": 1}\n{"b": 2}\n')


# -- openai ----------------------------------------------------------------------------------

def test_openai_session_object():
    s = convert(read("openai_session.json"), source="openai_session.json")
    original = json.loads(read("openai_session.json"))
    assert s.format == "openai"
    assert s.messages == original["messages"]
    assert s.tools == original["tools"]
    assert (s.external_id, s.title, s.model) == ("sess-openai-1", "Fix the flaky upload test", "gpt-4o")
    roundtrip(s)


def test_openai_bare_list_and_title_fallback():
    msgs = [{"role": "user", "content": "<ide_opened_file>x</ide_opened_file>\n  Make the build green  \nplease"},
            {"role": "assistant", "content": "ok"}]
    s = convert(msgs)
    assert s.messages == msgs and s.external_id is None and s.tools == []
    assert s.title == "Make the build green"


def test_openai_list_of_sessions():
    sessions = convert_many(read("openai_many.json"), source="many.json")
    assert [s.external_id for s in sessions] == ["a", "b"]
    assert sessions[1].title == "Second" and sessions[0].title == "first session"
    with pytest.raises(SessionValidationError) as err:
        convert(read("openai_many.json"), source="many.json")
    assert err.value.fault == "many_sessions" and "convert_many" in str(err.value)


def test_openai_many_error_names_session():
    data = [{"messages": [{"role": "user", "content": "x"}]},
            {"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": ""}]}]
    with pytest.raises(SessionValidationError) as err:
        convert_many(data, source="dump.json")
    assert str(err.value).startswith("dump.json[1]: message 1: orphan tool result")
    assert err.value.index == 1


def test_openai_reads_model_from_corpus_meta():
    s = convert({"id": "x", "messages": [], "meta": {"model": "gpt-4o"}})
    assert s.model == "gpt-4o"


def test_openai_errors_name_index_and_fault():
    bad = {"messages": [{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}]}
    with pytest.raises(SessionValidationError) as err:
        convert(bad, source="bad.json")
    assert (err.value.index, err.value.fault, err.value.source) == (1, "unknown_role", "bad.json")
    assert str(err.value).startswith("bad.json: message 1: unknown role 'wizard'")


def test_bad_json_document_names_line():
    with pytest.raises(SessionValidationError) as err:
        convert(b'{"messages": [\n{"role": "user",\n "content": oops}]}', source="s.json")
    assert err.value.fault == "bad_json" and err.value.line == 3
    assert str(err.value).startswith("s.json: line 3: bad JSON")


def test_bad_encoding():
    with pytest.raises(SessionValidationError) as err:
        convert(b'{"messages": ["\xff"]}', source="latin.json")
    assert err.value.fault == "bad_encoding" and "latin.json" in str(err.value)


def test_corpus_session_through_openai():
    require_corpus()
    files = sorted(CORPUS.glob("*.json"))
    path = next(p for p in files if "images-in-tool-results" in p.name) if any(
        "images-in-tool-results" in p.name for p in files) else files[0]
    data = json.loads(path.read_text(encoding="utf-8"))
    s = convert(path.read_bytes(), source=str(path))
    assert s.format == "openai"
    assert s.messages == data["messages"]
    assert s.external_id == data["id"]
    assert s.title
    roundtrip(s)


def test_every_corpus_file_detects_as_openai():
    require_corpus()
    files = sorted(CORPUS.glob("*.json"))
    for path in files:
        assert detect_format(path.read_bytes()) == "openai", path.name


# -- openai jsonl ---------------------------------------------------------------------------

def test_openai_jsonl_roundtrip():
    s = convert(read("openai.jsonl"), source="openai.jsonl")
    assert s.format == "openai_jsonl"
    expected = [json.loads(line) for line in read("openai.jsonl").decode().splitlines() if line.strip()]
    assert s.messages == expected
    assert s.title == "List the files in src/"
    again = convert("\n".join(json.dumps(m) for m in s.messages), format="openai_jsonl")
    assert again.messages == s.messages
    roundtrip(s)


def test_jsonl_bad_json_names_line():
    with pytest.raises(SessionValidationError) as err:
        convert(read("bad_json.jsonl"), source="bad_json.jsonl")
    e = err.value
    assert (e.fault, e.line, e.source) == ("bad_json", 3, "bad_json.jsonl")
    assert str(e).startswith("bad_json.jsonl: line 3: bad JSON")


def test_jsonl_unknown_role_names_line():
    with pytest.raises(SessionValidationError) as err:
        convert(read("unknown_role.jsonl"), format="openai_jsonl", source="unknown_role.jsonl")
    assert (err.value.fault, err.value.line) == ("unknown_role", 2)
    assert "line 2" in str(err.value) and "'robot'" in str(err.value)


def test_jsonl_orphan_result_names_line():
    text = "\n".join([
        json.dumps({"role": "user", "content": "hi"}),
        "",
        json.dumps({"role": "tool", "tool_call_id": "ghost", "content": "boo"}),
    ])
    with pytest.raises(SessionValidationError) as err:
        convert(text, source="o.jsonl")
    e = err.value
    assert e.fault == "orphan_tool_result" and e.line == 3 and e.index == 1
    assert "from line 3" in str(e) and str(e).startswith("o.jsonl:")


def test_jsonl_line_that_is_not_an_object():
    with pytest.raises(SessionValidationError) as err:
        convert('{"role": "user", "content": "a"}\n[1, 2]\n', format="openai_jsonl")
    assert (err.value.fault, err.value.line) == ("not_an_object", 2)


# -- anthropic -------------------------------------------------------------------------------

def test_anthropic_conversion():
    s = convert(read("anthropic.json"), source="anthropic.json")
    assert s.format == "anthropic" and s.model == "claude-sonnet-4-5"
    m = s.messages
    assert m[0] == {"role": "system", "content": "You are a careful agent.\n\nWork in /srv/app."}
    assert m[1] == {"role": "user", "content": "Why does /srv/app/config.yaml fail to load?"}
    # thinking dropped, text kept, parallel tool_use -> tool_calls with JSON arguments
    assert m[2]["role"] == "assistant" and m[2]["content"] == "Let me look."
    assert [c["id"] for c in m[2]["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert json.loads(m[2]["tool_calls"][0]["function"]["arguments"]) == {"path": "/srv/app/config.yaml"}
    assert m[2]["tool_calls"][1]["function"] == {"name": "screenshot", "arguments": "{}"}
    # tool_result blocks -> tool messages, before the user's own text
    assert m[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "port: eighty"}
    assert m[4]["role"] == "tool" and m[4]["content"] == [
        {"type": "text", "text": "screen captured"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}]
    assert m[5] == {"role": "user", "content": "Also check the logs."}
    assert m[6]["content"] is None and m[6]["tool_calls"][0]["id"] == "toolu_3"
    assert m[7] == {"role": "tool", "tool_call_id": "toolu_3", "content": "[tool error] permission denied"}
    assert m[8] == {"role": "assistant", "content": "port must be an integer, e.g. 80."}
    assert m[9]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assert len(m) == 10
    assert "thinking" not in json.dumps(m)
    # tools -> OpenAI function schemas; the server tool is skipped
    assert [t["function"]["name"] for t in s.tools] == ["read_file", "screenshot"]
    assert s.tools[0] == {"type": "function", "function": {
        "name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
    assert s.title == "Why does /srv/app/config.yaml fail to load?"
    validate_session(s.messages)
    roundtrip(s)


def test_anthropic_bare_message_list_and_string_system():
    s = convert({"system": "be nice", "messages": [{"role": "user", "content": "hi"},
                                                   {"role": "assistant", "content": "hello"}]})
    assert s.messages == [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "hello"}]
    s2 = convert([{"role": "user", "content": [{"type": "text", "text": "a"}]},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"k": "ü"}}]}],
                 format="anthropic")
    assert s2.messages[0] == {"role": "user", "content": "a"}
    assert s2.messages[1]["tool_calls"][0]["function"]["arguments"] == '{"k": "ü"}'


def test_anthropic_server_tool_blocks_kept_as_text():
    s = convert({"messages": [
        {"role": "user", "content": "search"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result",
                                                                                         "url": "https://e.x"}]},
            {"type": "text", "text": "found it"}]}]}, format="anthropic")
    text = s.messages[1]["content"]
    assert "web_search" in text and "https://e.x" in text and text.endswith("found it")
    assert "tool_calls" not in s.messages[1]


def test_anthropic_orphan_tool_result_names_index():
    with pytest.raises(SessionValidationError) as err:
        convert(read("anthropic_orphan.json"), source="anthropic_orphan.json")
    e = err.value
    assert (e.fault, e.index) == ("orphan_tool_result", 4)
    assert str(e).startswith("anthropic_orphan.json: message 4: block 0: tool_result for 'toolu_9'")


@pytest.mark.parametrize("messages, fault, index", [
    ([{"role": "system", "content": "x"}], "unknown_role", 0),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "video"}]}], "bad_block", 1),
    ([{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}], "bad_image", 0),
    ([{"role": "user", "content": 5}], "bad_content", 0),
    ([{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}], "missing_call_id", 0),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]}],
     "orphan_tool_result", 2),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
      {"role": "assistant", "content": "next"}], "unanswered_tool_call", 1),
])
def test_anthropic_faults(messages, fault, index):
    with pytest.raises(SessionValidationError) as err:
        convert({"system": "s", "messages": messages}, source="a.json")
    assert (err.value.fault, err.value.index) == (fault, index)
    assert str(err.value).startswith(f"a.json: message {index}: ")


def test_anthropic_unanswered_call_before_user_text_is_rejected_by_validation():
    with pytest.raises(SessionValidationError) as err:
        convert({"system": "s", "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {"role": "user", "content": "never answered"}]}, source="a.json")
    assert err.value.fault == "unanswered_tool_call"
    # converted message 2 (after the system message) came from input message 1
    assert "converted message 2 (from input message 1)" in str(err.value)
    assert err.value.index == 1


def test_anthropic_trailing_unanswered_call_is_legal():
    s = convert({"system": "s", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})
    assert s.messages[-1]["tool_calls"][0]["id"] == "a"


# -- claude code -------------------------------------------------------------------------------

def test_claude_code_conversion():
    s = convert(read("claude_code.jsonl"), source="claude_code.jsonl")
    assert s.format == "claude_code_jsonl"
    assert s.external_id == "5b0c1e7a-2f7e-4a53-9d4f-0c1a2b3c4d5e"
    assert s.model == "claude-opus-4-1-20250805"
    assert s.title == "Rename load_settings() to read_settings() in app/settings.py"
    m = s.messages
    roles = [x["role"] for x in m]
    # meta caveat, summary, system, snapshot and sidechain records are skipped
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "user", "assistant"]
    assert "Caveat" not in json.dumps(m) and "sub-agent" not in json.dumps(m)
    # msg_A was written over four lines (thinking, text, tool_use, tool_use after a result): one message
    first = m[1]
    assert first["content"] == "I'll find the callers first."
    assert [c["id"] for c in first["tool_calls"]] == ["toolu_01", "toolu_02"]
    assert json.loads(first["tool_calls"][1]["function"]["arguments"]) == {"file_path": "/home/dev/proj/app/main.py"}
    assert m[2] == {"role": "tool", "tool_call_id": "toolu_01", "content": "app/settings.py:12\napp/main.py:3"}
    assert m[3] == {"role": "tool", "tool_call_id": "toolu_02", "content": "from app.settings import load_settings"}
    assert m[5]["content"].startswith("[tool error] File has been modified")
    assert m[7]["content"][1]["type"] == "image_url"
    validate_session(m)
    roundtrip(s)


def test_claude_code_abandoned_branch_is_skipped():
    s = convert(read("claude_code_branch.jsonl"))
    assert [x["content"] for x in s.messages] == [
        "Write a haiku about tea", "Steam curls from the cup", "Now one about coffee", "Dark roast at dawn"]


def test_claude_code_broken_chain_falls_back_to_file_order():
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "message": {"role": "user", "content": "a"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "missing", "sessionId": "s",
         "message": {"id": "m", "role": "assistant", "content": [{"type": "text", "text": "b"}]}},
    ]
    s = convert("\n".join(json.dumps(x) for x in lines), format="claude_code_jsonl")
    assert [x["content"] for x in s.messages] == ["a", "b"]


def test_claude_code_orphan_names_line():
    with pytest.raises(SessionValidationError) as err:
        convert(read("claude_code_orphan.jsonl"), source="cc.jsonl")
    e = err.value
    assert (e.fault, e.line) == ("orphan_tool_result", 4)
    assert str(e).startswith("cc.jsonl: line 4: ") and "toolu_X" in str(e)


def test_claude_code_faults_name_line():
    good = json.dumps({"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "a"}})
    with pytest.raises(SessionValidationError) as err:
        convert(good + "\n{oops\n", format="claude_code_jsonl", source="x.jsonl")
    assert (err.value.fault, err.value.line) == ("bad_json", 2)
    with pytest.raises(SessionValidationError) as err:
        convert(good + "\n" + json.dumps({"type": "assistant", "uuid": "a", "sessionId": "s"}), source="x.jsonl")
    assert (err.value.fault, err.value.line) == ("bad_record", 2)
    with pytest.raises(SessionValidationError) as err:
        convert(good + "\n" + json.dumps({"type": "assistant", "uuid": "a", "sessionId": "s",
                                          "message": {"role": "user", "content": "x"}}), source="x.jsonl")
    assert (err.value.fault, err.value.line) == ("unknown_role", 2)


def test_claude_code_parsed_records():
    records = [json.loads(line) for line in read("claude_code.jsonl").decode().splitlines()]
    assert convert(records).messages == convert(read("claude_code.jsonl")).messages


# -- entry points -------------------------------------------------------------------------------

def test_unknown_format_name():
    with pytest.raises(SessionValidationError) as err:
        convert("[]", format="yaml", source="f")
    assert err.value.fault == "unknown_format"
    assert set(FORMATS) >= {"openai", "openai_jsonl", "anthropic", "claude_code_jsonl"}


def test_convert_file_names_the_file(tmp_path):
    p = tmp_path / "broken.jsonl"
    p.write_text('{"role": "user", "content": "a"}\n{"role": \n', encoding="utf-8")
    with pytest.raises(SessionValidationError) as err:
        convert_file(str(p))
    assert str(err.value).startswith(f"{p}: line 2: bad JSON")
    (ok,) = convert_file(str(FIX / "anthropic.json"))
    assert ok.format == "anthropic"


def test_bom_is_accepted():
    s = convert(b"\xef\xbb\xbf" + read("openai_session.json"))
    assert s.external_id == "sess-openai-1"


@pytest.mark.parametrize("payload, fmt", [("", None), (b"  \n", None), ("\n\n", "openai_jsonl"),
                                          ('{"type": "summary", "summary": "x"}\n', "claude_code_jsonl")])
def test_empty_inputs_are_rejected(payload, fmt):
    with pytest.raises(SessionValidationError) as err:
        convert(payload, format=fmt, source="empty.txt")
    assert err.value.fault == "empty" and str(err.value).startswith("empty.txt: ")


def test_a_list_of_models_in_metadata_names_the_first_one():
    session = {"messages": [{"role": "user", "content": "hi"}],
               "meta": {"model": ["claude-opus-4-5-20251101", "claude-haiku"]}}
    assert convert(session).model == "claude-opus-4-5-20251101"
