"""An upstream (or a proxy before it) that echoes the request's credentials in its error body
never hands the operator's keys on: not to the client (the gateway's 502 on chat, streaming and
not, messages and responses/compact), not into the database (a run's error and attempts, its
events, gateway call rows), not into the logs. The error still says what happened: the
status and the upstream's message, minus the secret.

The scripted upstream (``echo_auth``) repeats the key bare and in its ``Authorization``
header. The keys are not shaped like provider keys, so only the server's knowledge of its
configured secrets can take the bare one out."""
from __future__ import annotations

import json
import logging

import anthropic
import openai
import pytest

from compaction import Policy
from dashboard.models import CompactionRun, GatewayCall, RunEvent
from dashboard.services.policies import activate_policy, create_policy
from tests.service import test_gateway
from tests.service.helpers import chat, llm_policy
from tests.service.test_gateway import sdk
from tests.support import gateway_writes
from tests.support.llm_server import echo_auth

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

GATEWAY_KEY = "gw-operator-7Hq2kLmN9pRsT4"
CONNECTION_KEY = "conn-secret-4Xb8vT1wQzY6"


@pytest.fixture
def keys(settings, monkeypatch):
    """The operator's gateway key and the scripted connection's key (CS_TEST_LLM_KEY)."""
    settings.GATEWAY_API_KEY = GATEWAY_KEY
    monkeypatch.setenv("CS_TEST_LLM_KEY", CONNECTION_KEY)


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.INFO)  # what the service logs (LOG_LEVEL=INFO; libraries at their own)
    return caplog


def assert_clean(text: str, key: str) -> None:
    assert key not in text, text
    assert f"Bearer {key}" not in text and "Bearer " + key[:8] not in text, text


def assert_says_what_happened(text: str) -> None:
    assert "401" in text and "Incorrect API key provided" in text, text


def logged(caplog) -> str:
    lines = []
    for record in caplog.records:
        lines.append(record.getMessage())
        if record.exc_info:
            lines.append(logging.Formatter().formatException(record.exc_info))
    return "\n".join(lines)


def stored_rows() -> str:
    """Every run, run event and gateway call row, as text."""
    rows = [*CompactionRun.objects.values(), *RunEvent.objects.values(), *GatewayCall.objects.values()]
    return json.dumps(rows, default=str)


def _sent_with(llm_server, key: str) -> None:
    """The upstream did get the key (so the echo had something to leak)."""
    assert llm_server.requests[-1].headers["authorization"] == f"Bearer {key}"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("model", "key"), [("gpt-4o", GATEWAY_KEY), ("openai/gpt-4o", CONNECTION_KEY)],
                         ids=["gateway-key", "connection-key"])
def test_chat_completions_answer_an_echoed_key_without_it(gateway, project, llm_server, keys, logs, stream,
                                                          model, key):
    llm_server.script(echo_auth())
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.APIStatusError) as failed:
        out = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello"}],
                                          stream=stream, extra_headers={"X-Session-Id": f"echo-{stream}-{key}"})
        list(out) if stream else None
    _sent_with(llm_server, key)
    assert failed.value.status_code == 502
    body = failed.value.response.text
    assert_clean(body, key)
    assert_says_what_happened(json.loads(body)["error"]["message"])
    assert "[REDACTED]" in body
    assert_clean(stored_rows(), key)
    assert_clean(logged(logs), key)


@pytest.mark.parametrize("stream", [False, True])
def test_messages_answer_an_echoed_key_without_it(gateway, project, llm_server, keys, logs, stream):
    llm_server.script(echo_auth())
    client = anthropic.Anthropic(base_url=gateway.url, api_key=project.test_key, max_retries=0,
                                 http_client=gateway_writes.http2_client())
    with pytest.raises(anthropic.APIStatusError) as failed:
        out = client.messages.create(model="claude-sonnet-4-6", max_tokens=64, stream=stream,
                                     messages=[{"role": "user", "content": "hello"}],
                                     extra_headers={"X-Session-Id": f"echo-messages-{stream}"})
        list(out) if stream else None
    _sent_with(llm_server, GATEWAY_KEY)
    assert failed.value.status_code == 502
    body = failed.value.response.text
    assert_clean(body, GATEWAY_KEY)
    assert_says_what_happened(json.loads(body)["error"]["message"])
    assert_clean(stored_rows(), GATEWAY_KEY)
    assert_clean(logged(logs), GATEWAY_KEY)


def _llm_summarizer(project, llm_server, window: int | None = None) -> None:
    data = llm_policy(llm_server)
    if window is not None:
        data["context_window"] = window
    activate_policy(project, create_policy(project, "llm summarizer", Policy.load(data)))


def test_responses_compact_answers_an_echoed_key_without_it(gateway, project, llm_server, keys, logs):
    _llm_summarizer(project, llm_server, window=6000)
    llm_server.script(echo_auth())
    items = [{"role": "user", "content": "Read every module."}]
    for i in range(20):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "read_file",
                   "arguments": json.dumps({"path": f"src/module_{i}.py"})},
                  {"type": "function_call_output", "call_id": f"c{i}",
                   "output": "\n".join(f"def helper_{i}_{k}(x):\n    return x * {k}" for k in range(40))}]
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.APIStatusError) as failed:
        oai.responses.compact(model="gpt-4o", input=items, extra_headers={"X-Session-Id": "echo-compact"})
    _sent_with(llm_server, CONNECTION_KEY)
    assert failed.value.status_code == 502
    body = failed.value.response.text
    assert_clean(body, CONNECTION_KEY)
    assert_says_what_happened(json.loads(body)["error"]["message"])
    run = CompactionRun.objects.get()
    assert run.status == "failed"
    assert_says_what_happened(run.error)
    assert_clean(stored_rows(), CONNECTION_KEY)
    assert_clean(logged(logs), CONNECTION_KEY)


def test_a_summarizer_run_stores_and_answers_an_echoed_key_without_it(api, project, llm_server, keys, logs):
    _llm_summarizer(project, llm_server)
    llm_server.script(echo_auth())
    sid = api.post("/api/sessions", {"messages": chat(10), "auto_compact": False}).json()["session"]["id"]
    ref = api.post(f"/api/sessions/{sid}/compactions", {}).json()
    _sent_with(llm_server, CONNECTION_KEY)
    run = CompactionRun.objects.get(pk=ref["run_id"])
    assert run.status == "failed"
    assert_says_what_happened(run.error)
    assert [a["ok"] for a in run.attempts] == [False]
    assert_says_what_happened(run.attempts[0]["error"])
    answer = api.get(f"/api/runs/{run.pk}").content.decode()
    assert_clean(answer, CONNECTION_KEY)
    assert "Incorrect API key provided" in answer
    assert_clean(stored_rows(), CONNECTION_KEY)
    assert_clean(logged(logs), CONNECTION_KEY)
