"""NaN, Infinity, -Infinity and numbers past the float range (``1e999999`` reads as infinity)
are not JSON: a strict parser refuses a document that holds one. Wherever JSON comes in (the
REST API's body parser, the gateway's bodies, including the parts its fast path decodes
lazily, file imports, the Idempotency-Key path), one is refused with a 400 naming where it
is, and nothing is written."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from dashboard.gateway.body import Hint, parse
from dashboard.gateway.errors import GatewayError
from dashboard.models import IdempotencyKey, Session, StoredMessage, StoredPolicy
from dashboard.services.uploads import import_uploads
from tests.service.helpers import chat
from tests.support.llm_server import ok

TOKENS = ["NaN", "Infinity", "-Infinity", "1e999999", "-1e400"]


@pytest.fixture(params=TOKENS)
def token(request):
    return request.param


def _messages_json(n: int = 2) -> str:
    return json.dumps(chat(n))


# -- the REST API ----------------------------------------------------------------------------

def _refused(r, field: str, token: str) -> None:
    assert r.status_code == 400, r.content[:300]
    body = r.json()
    assert body["field"] == field, body
    assert body["detail"] == (f"request body is not valid JSON: {field}: {token} is not a number JSON allows "
                              "(NaN, Infinity and numbers out of the float range are refused)"), body


def test_an_import_holding_a_non_finite_number_is_a_400_naming_the_field(api, token):
    r = api.post("/api/sessions", f'{{"messages": {_messages_json()}, "metadata": {{"score": {token}}}}}')
    _refused(r, "metadata.score", token)
    assert not Session.objects.exists()


def test_an_append_holding_a_non_finite_number_is_a_400_naming_the_message_and_field(api, small_session, token):
    sid = small_session["id"]
    before = StoredMessage.objects.filter(session_id=sid).count()
    body = f'{{"messages": [{{"role": "user", "content": "ok"}}, {{"role": "user", "content": "x", "weight": {token}}}]}}'
    r = api.post(f"/api/sessions/{sid}/messages", body)
    _refused(r, "messages[1].weight", token)
    assert StoredMessage.objects.filter(session_id=sid).count() == before


@pytest.mark.parametrize("path, body, field", [
    ("/api/policies", '{{"name": "p", "overrides": {{"trigger.threshold": {t}}}}}', 'overrides["trigger.threshold"]'),
    ("/api/sessions/{sid}/simulate", '{{"overrides": {{"cut": {{"keep_fraction": {t}}}}}}}', "overrides.cut.keep_fraction"),
], ids=["policies", "simulate"])
def test_other_api_bodies_holding_a_non_finite_number_are_refused(api, small_session, path, body, field):
    r = api.post(path.format(sid=small_session["id"]), body.format(t="NaN"))
    _refused(r, field, "NaN")
    assert not StoredPolicy.objects.filter(name="p").exists()


def test_the_idempotency_key_path_refuses_it_and_keeps_no_answer(api, token):
    headers = {"HTTP_IDEMPOTENCY_KEY": "nan-once"}
    bad = f'{{"messages": {_messages_json()}, "metadata": {{"score": {token}}}}}'
    _refused(api.post("/api/sessions", bad, **headers), "metadata.score", token)
    assert not IdempotencyKey.objects.exists() and not Session.objects.exists()
    good = f'{{"messages": {_messages_json()}, "metadata": {{"score": 0.5}}}}'
    first = api.post("/api/sessions", good, **headers)
    assert first.status_code == 201, first.content[:300]
    assert first.json()["session"]["metadata"]["metadata"] == {"score": 0.5}
    again = api.post("/api/sessions", good, **headers)
    assert again.status_code == 201 and again.json() == first.json()
    assert Session.objects.count() == 1


# -- file imports ----------------------------------------------------------------------------

def _file(token: str) -> str:
    return '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "x", "score": ' + token + "}\n"


def test_an_upload_holding_a_non_finite_number_is_refused_naming_file_line_and_field(project, token):
    out = import_uploads(project, [("ok.json", json.dumps(chat(1)).encode()), ("bad.jsonl", _file(token).encode())])
    assert out.created == [] and len(out.errors) == 1, out.errors
    assert "bad.jsonl" in out.errors[0] and "line 2" in out.errors[0]
    assert f"score: {token} is not a number JSON allows" in out.errors[0]
    assert not Session.objects.exists()


def test_a_messages_string_holding_a_non_finite_number_is_a_400(api, token):
    r = api.post("/api/sessions", {"messages": _file(token)})
    assert r.status_code == 400, r.content[:300]
    body = r.json()
    assert body["fault"] == "bad_json" and body["line"] == 2, body
    assert f"line 2: bad JSON: score: {token} is not a number JSON allows" in body["detail"]
    assert not Session.objects.exists()


def test_the_import_command_refuses_it(db, tmp_path, capsys, token):
    path = tmp_path / "bad.jsonl"
    path.write_text(_file(token), encoding="utf-8")
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_sessions", str(path), "--project", "cli", "--no-progress")
    err = capsys.readouterr().err
    assert str(path) in err and f"score: {token} is not a number JSON allows" in err
    assert not Session.objects.exists()


@pytest.mark.parametrize("command", ["replay", "count"])
def test_the_engine_command_line_refuses_it_without_a_traceback(tmp_path, command):
    path = tmp_path / "bad.json"
    path.write_text('[{"role": "user", "content": "hi", "score": NaN}]', encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "compaction", command, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"error: {path} is not JSON the parser accepts: [0].score: NaN is not a number")


# -- the gateway -----------------------------------------------------------------------------

@pytest.fixture
def gw(project, llm_server, settings):
    """The gateway, its upstream the scripted server (which answers if a request gets there)."""
    settings.GATEWAY_API_BASE = llm_server.api_base
    settings.GATEWAY_API_KEY = "operator-upstream-key"
    llm_server.script(ok("answered"))
    client = Client()
    return lambda path, body: client.post(path, body, content_type="application/json",
                                          HTTP_AUTHORIZATION=f"Bearer {project.test_key}",
                                          HTTP_ANTHROPIC_VERSION="2023-06-01")


def _gateway_refused(r, param: str, token: str) -> None:
    assert r.status_code == 400, r.content[:300]
    error = r.json()["error"]
    assert f"{param}: {token} is not a number JSON allows" in error["message"], error
    if "param" in error:  # OpenAI's error shape names the field apart too
        assert error["param"] == param


@pytest.mark.parametrize("place, param", [
    ('"temperature": {t}', "temperature"),
    ('"logit_bias": {{"50256": {t}}}', 'logit_bias["50256"]'),
], ids=["temperature", "logit_bias"])
def test_a_chat_completion_body_holding_a_non_finite_number_is_a_400(gw, llm_server, token, place, param):
    body = f'{{"model": "gpt-4o", "messages": {_messages_json(1)}, {place.format(t=token)}}}'
    _gateway_refused(gw("/v1/chat/completions", body), param, token)
    assert not llm_server.requests and not Session.objects.exists()


def test_the_lazy_fast_path_refuses_one_in_the_messages_it_decodes(token):
    """The body parser's fast path: a body whose messages start with the text of a request
    seen before (the identity's hint) decodes only the messages after it."""
    first = f'{{"model": "gpt-4o", "messages": {_messages_json(1)}}}'.encode()
    seen = parse(first, lazy=True)
    hint = Hint(seen.count, seen.raw.length, seen.raw.digest(seen.raw.length))
    later = (first[:-2] + f', {{"role": "user", "content": "more", "weight": {token}}}]}}'.encode())
    with pytest.raises(GatewayError) as refused:
        parse(later, lazy=True, hint=hint)
    n = seen.count
    assert refused.value.status == 400 and refused.value.param == f"messages[{n}].weight"
    assert f"messages[{n}].weight: {token} is not a number JSON allows" in refused.value.message


def test_anthropic_messages_and_responses_bodies_refuse_it(gw, llm_server, token):
    body = ('{"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}, '
            '{"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "read", '
            f'"input": {{"n": {token}}}}}]}}, '
            '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}]}]}')
    _gateway_refused(gw("/v1/messages", body), "messages[1].content[0].input.n", token)
    body = f'{{"model": "gpt-4o", "input": [{{"type": "message", "role": "user", "content": "hi", "x": {token}}}]}}'
    _gateway_refused(gw("/v1/responses/compact", body), "input[0].x", token)
    _gateway_refused(gw("/v1/responses", body), "input[0].x", token)
    assert not llm_server.requests and not Session.objects.exists()
