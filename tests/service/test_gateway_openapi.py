"""The gateway's endpoints in /api/openapi.json (what /api/docs shows): under their own tag,
with request schemas that accept exactly the fields each endpoint serves, and response
schemas that the endpoints' real answers satisfy (the SDKs against a live server, the
scripted OpenAI-compatible server as the upstream)."""
from __future__ import annotations

import anthropic
import jsonschema
import openai
import pytest

from dashboard.gateway import anthropic_messages, body, responses, responses_body
from tests.service import test_gateway
from tests.service.test_gateway import sdk
from tests.support import gateway_writes
from tests.support.llm_server import error, ok, tool_call

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

SERVED = {"/v1/chat/completions": body.KNOWN, "/v1/responses/compact": responses.KNOWN,
          "/v1/responses": responses_body.KNOWN,
          "/v1/messages": anthropic_messages.KNOWN}


@pytest.fixture
def doc(client, transactional_db) -> dict:
    return client.get("/api/openapi.json").json()


def _validator(doc: dict, ref: str) -> jsonschema.Draft202012Validator:
    # the document's components beside the reference, so "#/components/..." resolves in it
    return jsonschema.Draft202012Validator({"$ref": ref, "components": doc["components"]})


def _schema_of(doc: dict, ref: str) -> dict:
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _operation(doc: dict, path: str) -> dict:
    return doc["paths"][path]["post"]


def test_the_gateway_endpoints_are_documented_under_their_own_tag(doc):
    assert "Gateway" in {t["name"] for t in doc["tags"]}
    gateway_paths = {p for p, ops in doc["paths"].items() for op in ops.values() if "Gateway" in op["tags"]}
    assert gateway_paths == set(SERVED)
    for path in SERVED:
        op = _operation(doc, path)
        assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert {"400", "401", "default"} <= set(op["responses"])
    # what an SDK needs to know besides the body
    assert {p["name"] for p in _operation(doc, "/v1/messages")["parameters"]} == {"X-Session-Id", "anthropic-version"}
    assert "text/event-stream" in _operation(doc, "/v1/chat/completions")["responses"]["200"]["content"]


@pytest.mark.parametrize("path", sorted(SERVED))
def test_each_request_schema_accepts_exactly_the_fields_the_endpoint_serves(doc, path):
    request = _schema_of(doc, _operation(doc, path)["requestBody"]["content"]["application/json"]["schema"]["$ref"])
    assert set(request["properties"]) == set(SERVED[path])
    assert request["additionalProperties"] is False  # the endpoint refuses any other field with a 400 naming it


def _check(doc: dict, path: str, status: str, answer: dict) -> None:
    ref = _operation(doc, path)["responses"][status]["content"]["application/json"]["schema"]["$ref"]
    _validator(doc, ref).validate(answer)


def test_real_answers_and_refusals_match_the_documented_schemas(doc, gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("hi", usage={"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}))
    completion = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    _check(doc, "/v1/chat/completions", "200", completion.http_response.json())
    for key in ("x-compaction-session", "x-context-tokens"):
        assert key.lower() in {h.lower() for h in _operation(doc, "/v1/chat/completions")["responses"]["200"]["headers"]}
        assert completion.headers[key]

    refused = gateway_writes.http_client().post(gateway.url + "/v1/chat/completions", json={"model": "gpt-4o", "bogus": 1},
                                               headers={"Authorization": f"Bearer {project.test_key}"})
    assert refused.status_code == 400
    _check(doc, "/v1/chat/completions", "400", refused.json())
    llm_server.script(error(429, "slow down"))
    limited = gateway_writes.http_client().post(gateway.url + "/v1/chat/completions",
                                                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "y"}]},
                                                headers={"Authorization": f"Bearer {project.test_key}"})
    assert limited.status_code == 429
    _check(doc, "/v1/chat/completions", "default", limited.json())

    items = [{"type": "message", "role": "user", "content": f"step {i}: " + "word " * 200} for i in range(10)]
    compacted = oai.responses.with_raw_response.compact(model="gpt-4o", input=items)
    _check(doc, "/v1/responses/compact", "200", compacted.http_response.json())

    llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": "a.py"}, "call_1")]))
    tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
    called = oai.responses.with_raw_response.create(model="gpt-4o", input="read a.py", tools=tools)
    _check(doc, "/v1/responses", "200", called.http_response.json())
    llm_server.script(ok("done"))
    steps = [{"role": "user", "content": f"step {i}: " + "word " * 200} for i in range(10)]
    answered = oai.responses.with_raw_response.create(model="gpt-4o", input=steps, instructions="Be brief.",
                                                      context_management=[{"type": "compaction",
                                                                           "compact_threshold": 500}])
    kinds = [item["type"] for item in answered.http_response.json()["output"]]
    assert kinds == ["compaction", "message"]
    _check(doc, "/v1/responses", "200", answered.http_response.json())
    with pytest.raises(openai.BadRequestError) as hosted:
        oai.responses.create(model="gpt-4o", input="look it up", tools=[{"type": "web_search"}])
    _check(doc, "/v1/responses", "400", hosted.value.response.json())
    assert "web_search" in hosted.value.response.json()["error"]["message"]

    claude = anthropic.Anthropic(base_url=gateway.url, api_key=project.test_key, max_retries=0,
                                 http_client=gateway_writes.http2_client())
    llm_server.script(ok("Bonjour"))
    message = claude.messages.with_raw_response.create(model="gpt-4o", max_tokens=50,
                                                       messages=[{"role": "user", "content": "Hello"}])
    _check(doc, "/v1/messages", "200", message.http_response.json())
    with pytest.raises(anthropic.BadRequestError) as bad:
        claude.messages.create(model="gpt-4o", max_tokens=50, messages=[{"role": "user", "content": "Hi"}],
                               extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    _check(doc, "/v1/messages", "400", bad.value.response.json())
