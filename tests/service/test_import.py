"""Importing sessions through the API and `manage.py import_sessions`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dashboard.models import Session, StoredArchiveEntry, StoredMessage
from tests.corpus import corpus_missing
from tests.service.helpers import chat, corpus_session

# PostgreSQL pass: imports: COPY of the messages, all or nothing, NUL characters in text
pytestmark = pytest.mark.postgres

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "system": "You are a helpful agent.",
    "tools": [{"name": "get_weather", "description": "Weather for a city",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C, light rain"}]},
        {"role": "assistant", "content": "It is 18°C with light rain in Paris."},
    ],
}

CLAUDE_CODE_LINES = [
    {"type": "summary", "summary": "weather"},
    {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "cc-session-1",
     "message": {"role": "user", "content": "list the files"}},
    {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "cc-session-1",
     "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-4-1", "content": [
         {"type": "tool_use", "id": "toolu_ls", "name": "Bash", "input": {"command": "ls"}}]}},
    {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": "cc-session-1",
     "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_ls",
                                              "content": "README.md\nsetup.py"}]}},
    {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "sessionId": "cc-session-1",
     "message": {"id": "msg_2", "role": "assistant", "model": "claude-opus-4-1",
                 "content": [{"type": "text", "text": "Two files: README.md and setup.py."}]}},
]


def test_an_openai_session_object_is_imported_with_its_tools_and_token_totals(api):
    msgs = chat(3)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    r = api.post("/api/sessions", {"messages": msgs, "tools": tools, "title": "first", "external_id": "ext-1",
                                   "model": "gpt-4o"})
    assert r.status_code == 201, r.content
    s = r.json()["session"]
    assert (s["title"], s["external_id"], s["model"], s["format"]) == ("first", "ext-1", "gpt-4o", "openai")
    assert s["message_count"] == len(msgs) == s["context_messages"]
    assert s["tools_tokens"] > 0 and s["context_by_category"]["tools"] == s["tools_tokens"]
    by_cat = s["history_by_category"]
    assert by_cat["total"] == sum(v for k, v in by_cat.items() if k != "total")
    assert by_cat["tool_results"] > 0 and by_cat["tool_calls"] > 0 and by_cat["user"] > 0
    history = api.get(f"/api/sessions/{s['id']}/messages?limit=500").json()["items"]
    assert [m["message"] for m in history] == msgs
    assert sum(m["tokens"] for m in history) == s["history_tokens"]


def test_openai_jsonl_text_is_imported_one_message_per_line(api):
    msgs = chat(2)
    text = "\n".join(json.dumps(m) for m in msgs) + "\n"
    r = api.post("/api/sessions", {"messages": text, "format": "openai_jsonl"})
    assert r.status_code == 201, r.content
    assert r.json()["session"]["message_count"] == len(msgs)
    assert r.json()["session"]["format"] == "openai_jsonl"


def test_anthropic_messages_with_tool_use_and_tool_result_blocks_become_openai_messages(api):
    r = api.post("/api/sessions", {"messages": ANTHROPIC["messages"], "system": ANTHROPIC["system"],
                                   "tools": ANTHROPIC["tools"], "model": ANTHROPIC["model"]})
    assert r.status_code == 201, r.content
    s = r.json()["session"]
    assert s["format"] == "anthropic"
    history = [m["message"] for m in api.get(f"/api/sessions/{s['id']}/messages").json()["items"]]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    assert history[2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert history[3]["tool_call_id"] == history[2]["tool_calls"][0]["id"]


def test_claude_code_jsonl_is_imported_with_its_session_id(api):
    text = "\n".join(json.dumps(line) for line in CLAUDE_CODE_LINES)
    r = api.post("/api/sessions", {"messages": text})
    assert r.status_code == 201, r.content
    s = r.json()["session"]
    assert (s["format"], s["external_id"], s["model"]) == ("claude_code_jsonl", "cc-session-1", "claude-opus-4-1")
    roles = [m["message"]["role"] for m in api.get(f"/api/sessions/{s['id']}/messages").json()["items"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_an_invalid_session_writes_nothing_and_the_error_names_the_index_and_fault(api):
    msgs = chat(3)
    msgs[5] = {"role": "tool", "tool_call_id": "nobody-called-this", "content": "orphan"}
    r = api.post("/api/sessions", {"messages": msgs, "external_id": "bad"})
    assert r.status_code == 422
    body = r.json()
    assert "message 5" in body["detail"] and "orphan" in body["detail"]
    assert body["index"] == 5 and body["fault"] == "orphan_tool_result"
    assert Session.objects.count() == 0 and StoredMessage.objects.count() == 0


def test_a_jsonl_error_names_the_line(api):
    text = json.dumps({"role": "user", "content": "hi"}) + "\n" + '{"role": "assistant", "content": \n'
    r = api.post("/api/sessions", {"messages": text, "format": "openai_jsonl"})
    assert r.status_code == 400  # malformed JSON text, not a bad session
    assert "line 2" in r.json()["detail"] and r.json()["line"] == 2
    assert Session.objects.count() == 0


def test_an_external_id_is_unique_within_a_project_and_a_duplicate_is_a_conflict(api, other_project, client):
    assert api.post("/api/sessions", {"messages": chat(1), "external_id": "same"}).status_code == 201
    again = api.post("/api/sessions", {"messages": chat(1), "external_id": "same"})
    assert again.status_code == 409 and "same" in again.json()["detail"]
    other = api.post("/api/sessions", {"messages": chat(1), "external_id": "same"}, key=other_project.test_key)
    assert other.status_code == 201


def test_a_body_over_the_size_limit_gets_413_before_anything_is_read(api, settings):
    settings.API_MAX_REQUEST_BYTES = 2000
    r = api.post("/api/sessions", {"messages": chat(10)})
    assert r.status_code == 413
    assert "2,000" in r.json()["detail"]
    assert Session.objects.count() == 0


def test_text_with_nul_characters_is_stored_and_returned_intact(api):
    msgs = [{"role": "user", "content": "binary\x00output 😀 終わり"},
            {"role": "assistant", "content": "ok"}]
    r = api.post("/api/sessions", {"messages": msgs})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    assert [m["message"] for m in api.get(f"/api/sessions/{sid}/messages").json()["items"]] == msgs
    assert api.get(f"/api/sessions/{sid}/context").json()["messages"] == msgs


# -- the command --------------------------------------------------------------------------

def _write(tmp_path, name, data) -> str:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(p)


def test_import_sessions_command_reads_every_format(db, tmp_path, capsys):
    files = [
        _write(tmp_path, "openai.json", {"id": "o1", "messages": chat(2)}),
        _write(tmp_path, "list.json", [{"id": "l1", "messages": chat(1)}, {"id": "l2", "messages": chat(1)}]),
        _write(tmp_path, "lines.jsonl", "\n".join(json.dumps(m) for m in chat(1))),
        _write(tmp_path, "anthropic.json", ANTHROPIC),
        _write(tmp_path, "claude.jsonl", "\n".join(json.dumps(r) for r in CLAUDE_CODE_LINES)),
    ]
    call_command("import_sessions", *files, "--project", "cli")
    out = capsys.readouterr().out
    assert "Imported 6 session(s) into project 'cli'" in out
    formats = sorted(Session.objects.values_list("source_format", flat=True))
    assert formats == ["anthropic", "claude_code_jsonl", "openai", "openai", "openai", "openai_jsonl"]


def test_import_sessions_command_reads_trace_exports(db, tmp_path, capsys):
    traces = Path(__file__).resolve().parents[1] / "formats" / "fixtures" / "traces"
    files = [str(traces / n) for n in ("langfuse_trace.json", "phoenix_spans_dataframe.jsonl",
                                       "langsmith_wrap_openai.json")]
    for n, path in enumerate(files):  # one project each: they record the same conversation
        call_command("import_sessions", path, "--project", f"cli-{n}", "--no-progress")
    rows = sorted(Session.objects.values_list("source_format", "external_id", "message_count"))
    assert rows == [("langfuse", "lisbon-trip", 5), ("langsmith", "lisbon-trip", 7), ("phoenix", "lisbon-trip", 7)]
    # the conversation's id is its external_id: a second export of it is not a second session
    with pytest.raises(CommandError):
        call_command("import_sessions", files[1], "--project", "cli-0", "--no-progress")
    assert "lisbon-trip' already exists" in capsys.readouterr().err
    call_command("import_sessions", files[1], "--project", "cli-0", "--no-progress", "--skip-existing")
    assert Session.objects.count() == 3


def test_the_api_imports_a_list_of_spans_with_their_format(api):
    traces = Path(__file__).resolve().parents[1] / "formats" / "fixtures" / "traces"
    spans = json.loads((traces / "phoenix_spans.json").read_bytes())["data"]
    r = api.post("/api/sessions", {"messages": spans, "format": "phoenix"})
    assert r.status_code == 201, r.content
    s = r.json()["session"]
    assert (s["format"], s["external_id"], s["message_count"]) == ("phoenix", "lisbon-trip", 7)


def test_import_sessions_command_shows_a_progress_bar(db, tmp_path, capsys):
    path = _write(tmp_path, "one.json", {"messages": chat(1)})
    call_command("import_sessions", path, "--project", "cli", verbosity=2)
    err = capsys.readouterr().err
    assert "1/1" in err and "file" in err


def test_an_invalid_file_writes_nothing_and_the_command_names_file_and_index(db, tmp_path, capsys):
    bad_sessions = [{"id": "ok", "messages": chat(1)},
                    {"id": "broken", "messages": [{"role": "wizard", "content": "?"}]}]
    good = _write(tmp_path, "good.json", {"id": "good", "messages": chat(1)})
    bad = _write(tmp_path, "bad.json", bad_sessions)
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_sessions", good, bad, "--project", "cli", "--no-progress")
    err = capsys.readouterr().err
    assert "bad.json" in err and "message 0" in err and "wizard" in err
    # the good file is in; nothing of the bad file (not even its valid first session)
    assert list(Session.objects.values_list("external_id", flat=True)) == ["good"]


def test_all_or_nothing_imports_nothing_when_one_file_is_invalid(db, tmp_path):
    good = _write(tmp_path, "good.json", {"id": "good", "messages": chat(1)})
    bad = _write(tmp_path, "bad.jsonl", json.dumps({"role": "user", "content": "x"}) + "\nnot json\n")
    with pytest.raises(CommandError, match=r"bad.jsonl.*line 2"):
        call_command("import_sessions", good, bad, "--project", "cli", "--all-or-nothing", "--no-progress")
    assert Session.objects.count() == 0


def test_a_corpus_session_imports_and_its_context_equals_its_history(api):
    data = corpus_session("claudecode_sessionshare__general")
    if data is None:
        corpus_missing("corpus transcript claudecode_sessionshare__general*")
    r = api.post("/api/sessions", {"messages": data["messages"], "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    ctx = api.get(f"/api/sessions/{sid}/context").json()
    assert ctx["messages"] == data["messages"]
    assert StoredArchiveEntry.objects.count() == 0
