"""Input a session cannot live with is refused on arrival, through the API and the upload."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.models import Session, StoredMessage
from dashboard.services.uploads import import_uploads
from tests.service.helpers import chat

LONE = "\\ud800"  # a JSON escape: the body text stays ASCII, the decoded string holds U+D800
DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "1" * 5000


def _body(messages_json: str, **fields) -> str:
    extra = "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items())
    return f'{{"messages": {messages_json}{extra}}}'


# -- lone surrogates -------------------------------------------------------------------

SURROGATE_CASES = {
    "content": ('{"role": "user", "content": "hello world ' + LONE + '!"}', "content", 12),
    "text-part": ('{"role": "user", "content": [{"type": "text", "text": "x' + LONE + '"}]}', "content[0].text", 1),
    "arguments": ('{"role": "assistant", "content": null, "tool_calls": [{"id": "c9", "type": "function", '
                  '"function": {"name": "read", "arguments": "{\\"p\\": \\"' + LONE + '\\"}"}}]}',
                  "tool_calls[0].function.arguments", 7),
    "name": ('{"role": "user", "content": "hi", "name": "' + LONE + 'bob"}', "name", 0),
}


@pytest.mark.postgres
@pytest.mark.parametrize("case", list(SURROGATE_CASES))
def test_an_import_with_a_lone_surrogate_is_refused_with_index_and_field(api, case):
    message, field, offset = SURROGATE_CASES[case]
    good = json.dumps(chat(1))[1:-1]
    r = api.post("/api/sessions", _body(f"[{good}, {message}]"))
    assert r.status_code == 422, r.content
    body = r.json()
    assert body["fault"] == "unencodable_text" and body["index"] == 5 and body["field"] == f"messages[5].{field}"
    assert f"{field}: contains a lone surrogate (U+D800) at character {offset}" in body["detail"]
    assert not Session.objects.exists()


@pytest.mark.postgres
def test_a_jsonl_import_with_a_lone_surrogate_is_refused_naming_the_line(api):
    text = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "a' + LONE + '"}\n'
    r = api.post("/api/sessions", {"messages": text.replace("\\ud800", "\ud800")})
    assert r.status_code == 422, r.content
    assert r.json()["fault"] == "unencodable_text" and r.json()["line"] == 2
    assert "content: contains a lone surrogate" in r.json()["detail"]
    assert not Session.objects.exists()


@pytest.mark.postgres
@pytest.mark.parametrize("case", list(SURROGATE_CASES))
def test_an_append_with_a_lone_surrogate_is_refused_and_the_session_keeps_working(api, case):
    message, field, offset = SURROGATE_CASES[case]
    sid = api.post("/api/sessions", {"messages": chat(1)}).json()["session"]["id"]
    r = api.post(f"/api/sessions/{sid}/messages", _body(f'[{{"role": "user", "content": "ok"}}, {message}]'))
    assert r.status_code == 422, r.content
    body = r.json()
    assert body["fault"] == "unencodable_text" and body["index"] == 1 and body["field"] == f"messages[1].{field}"
    assert f"{field}: contains a lone surrogate (U+D800) at character {offset}" in body["detail"]
    assert StoredMessage.objects.filter(session_id=sid).count() == len(chat(1))
    forced = api.post(f"/api/sessions/{sid}/compactions", {})
    assert forced.status_code in (200, 202), forced.content
    run = api.get(f"/api/runs/{forced.json()['run_id']}").json()
    assert run["status"] in ("succeeded", "skipped") and run["error"] in (None, ""), run
    simulated = api.post(f"/api/sessions/{sid}/simulate", {})
    assert simulated.status_code == 200 and simulated.json()["report"]["integrity"]["replay_exact"] is True


@pytest.mark.postgres
def test_a_surrogate_pair_escape_is_ordinary_text(api):
    r = api.post("/api/sessions", _body('[{"role": "user", "content": "smile \\ud83d\\ude00"}]'))
    assert r.status_code == 201, r.content


# -- JSON the parser refuses ----------------------------------------------------------

PARSER_CASES = {
    "deep-json": (f'{{"messages": [{{"role": "user", "content": "hi", "x": {DEEP}}}]}}', "nested too deeply"),
    "deep-jsonl": (f'{{"role": "user", "content": "hi"}}\n{{"role": "user", "content": "x", "n": {DEEP}}}\n',
                   "nested too deeply"),
    "digits-json": (f'{{"messages": [{{"role": "user", "content": "hi", "n": {HUGE_INT}}}]}}', "digits"),
    "digits-jsonl": (f'{{"role": "user", "content": "hi"}}\n{{"role": "user", "content": "x", "n": {HUGE_INT}}}\n',
                     "digits"),
}


@pytest.mark.parametrize("case", [*PARSER_CASES, "syntax-json", "syntax-jsonl"])
def test_an_unparseable_messages_string_is_a_400_naming_the_problem(api, case):
    text, why = PARSER_CASES.get(case) or {
        "syntax-json": ('{"messages": [{"role": "user", "content": "hi"}', "Expecting"),
        "syntax-jsonl": ('{"role": "user", "content": "hi"}\n{"role": "user", "content": \n', "line 2"),
    }[case]
    r = api.post("/api/sessions", {"messages": text})
    assert r.status_code == 400, r.content[:300]
    assert r.json()["fault"] == "bad_json" and why in r.json()["detail"]
    assert not Session.objects.exists()


def test_schema_valid_json_with_bad_content_stays_a_422(api):
    r = api.post("/api/sessions", {"messages": '[{"role": "wizard", "content": "hi"}]'})
    assert r.status_code == 422, r.content
    assert r.json()["fault"] == "unknown_role"


@pytest.mark.parametrize("case", list(PARSER_CASES))
def test_an_unparseable_upload_is_reported_by_name(project, case):
    text, why = PARSER_CASES[case]
    out = import_uploads(project, [("ok.json", json.dumps(chat(1)).encode()), ("bad.json", text.encode())])
    assert out.created == [] and len(out.errors) == 1
    assert "bad.json" in out.errors[0] and why in out.errors[0]
    assert not Session.objects.exists()


BODY_CASES = {
    "deep": (DEEP, "nested too deeply"),
    "digits": (f'{{"messages": [{{"role": "user", "content": "hi", "n": {HUGE_INT}}}]}}', "more than 4300 digits"),
    "syntax": ('{"messages": [\n  {"role": "user", "content": "hi"},\n]}', "line 3, column 1"),
    "not-text": (b'{"messages": "\xff\xfe"}', "not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(BODY_CASES))
@pytest.mark.parametrize("path", ["/api/sessions", "/api/sessions/{sid}/messages", "/api/sessions/{sid}/simulate"])
def test_a_request_body_the_parser_refuses_is_a_400_naming_the_problem(api, small_session, case, path):
    body, why = BODY_CASES[case]
    r = api.post(path.format(sid=small_session["id"]), body)
    assert r.status_code == 400, r.content[:300]
    detail = r.json()["detail"]
    assert detail.startswith("request body is not valid JSON: ") and why in detail, detail


# -- empty imports ---------------------------------------------------------------------

def test_an_import_without_messages_is_refused(api):
    r = api.post("/api/sessions", {"messages": []})
    assert r.status_code == 422, r.content
    assert r.json()["detail"].startswith("messages:") and r.json()["field"] == "messages"
    assert not Session.objects.exists()


def test_an_upload_of_an_empty_session_is_refused(project):
    out = import_uploads(project, [("empty.json", b"[]")])
    assert out.created == [] and len(out.errors) == 1 and "empty.json" in out.errors[0]
    assert "messages" in out.errors[0]
    assert not Session.objects.exists()


# -- the command lines ---------------------------------------------------------------------

@pytest.mark.parametrize("case", list(PARSER_CASES))
def test_the_import_command_names_the_file_and_the_problem(db, tmp_path, capsys, case):
    text, why = PARSER_CASES[case]
    path = tmp_path / ("bad.jsonl" if case.endswith("jsonl") else "bad.json")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_sessions", str(path), "--project", "cli", "--no-progress")
    err = capsys.readouterr().err
    assert str(path) in err and why in err
    assert not Session.objects.exists()


@pytest.mark.parametrize("text, why", [(DEEP, "nested too deeply"), (f"[{HUGE_INT}]", "more than 4300 digits")],
                         ids=["deep", "digits"])
@pytest.mark.parametrize("command", ["replay", "count"])
def test_the_engine_command_line_refuses_a_file_the_parser_refuses_without_a_traceback(tmp_path, command, text, why):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "compaction", command, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode != 0
    assert res.stderr.startswith(f"error: {path} is not JSON the parser accepts: ") and why in res.stderr
    assert "Traceback" not in res.stderr
