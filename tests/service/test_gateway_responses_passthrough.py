"""``POST /v1/responses`` passed through to an upstream the operator declared as serving the
Responses API (``GATEWAY_RESPONSES_PASSTHROUGH``): the real ``openai`` SDK
(``responses.create``, plain and streamed) against a live test server, the scripted server
answering ``/v1/responses`` as the upstream, over real HTTP (nothing is mocked)."""
from __future__ import annotations

import json

import openai
import pytest
from django.urls import reverse

from dashboard.models import GatewayCall, GatewaySession, StoredMessage
from dashboard.services.projects import set_member
from tests.service import test_gateway
from tests.service.test_gateway import WINDOW, sdk
from tests.service.test_gateway_responses_create import INSTRUCTIONS, TOOLS, _create, _output
from tests.support import gateway_writes
from tests.support.llm_server import echo_auth, error, ok, stream_error, tool_call

OPERATOR_KEY = "operator-upstream-key"  # the gateway fixture's GATEWAY_API_KEY


gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream


@pytest.fixture
def passthrough(gateway, settings):
    """The gateway fixture's upstream (the scripted server), declared as serving Responses."""
    settings.GATEWAY_RESPONSES_PASSTHROUGH = frozenset({"GATEWAY_API_BASE"})
    return gateway


def _items_of(response) -> list[dict]:
    return [o.model_dump(exclude_none=True) for o in response.output]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_function_tool_turn_goes_to_the_upstreams_responses_and_its_items_come_back(passthrough, project,
                                                                                       llm_server, stream):
    oai = sdk(passthrough, project.test_key)
    llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": "src/app.py"}, "call_1")]),
                      ok("app.py defines main()."))
    first, headers, events = _create(oai, stream, model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS,
                                     input="What does src/app.py define?", temperature=0.2)
    sent = llm_server.requests[0]
    assert sent.path == "/v1/responses", "passed through, not translated to chat completions"
    body = sent.json
    assert body["instructions"] == INSTRUCTIONS and body["tools"] == TOOLS and body["temperature"] == 0.2
    assert body["input"] == [{"role": "user", "content": "What does src/app.py define?"}]
    assert body.get("stream", False) is stream and "previous_response_id" not in body
    # the upstream's own output items, under the gateway's response id
    call = first.output[0]
    assert (call.type, call.id, call.call_id, json.loads(call.arguments)) == (
        "function_call", "fc_scripted_1_0", "call_1", {"path": "src/app.py"})
    assert first.id.startswith("resp_") and first.id != "resp_scripted_1"
    if stream:
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert "response.function_call_arguments.delta" in kinds and "response.output_item.done" in kinds
        assert all(e.response.id == first.id for e in events if hasattr(e, "response"))
    sid = int(headers["x-compaction-session"])

    items = [{"role": "user", "content": "What does src/app.py define?"}, *_items_of(first),
             {"type": "function_call_output", "call_id": "call_1", "output": "def main(): ..."}]
    second, headers2, _ = _create(oai, stream, model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS, input=items)
    assert second.output_text == "app.py defines main()."
    assert int(headers2["x-compaction-session"]) == sid and GatewaySession.objects.count() == 1
    resent = llm_server.requests[1].json["input"]
    assert [i.get("type", "message") for i in resent] == ["message", "function_call", "function_call_output"]
    assert resent[1]["call_id"] == resent[2]["call_id"] == "call_1"
    gateway_writes.wait()
    stored = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("role", flat=True))
    assert stored == ["system", "user", "assistant", "tool", "assistant"]


def test_previous_response_id_sends_the_upstream_the_whole_chain(passthrough, project, llm_server):
    oai = sdk(passthrough, project.test_key)
    llm_server.script(ok("Hello! What should we build?"), ok("A CLI it is."))
    first = oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, input="Hi there")
    second = oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, input="A CLI, please",
                                  previous_response_id=first.id)
    assert second.output_text == "A CLI it is." and second.previous_response_id == first.id
    body = llm_server.requests[1].json
    assert "previous_response_id" not in body, "the upstream never sees the gateway's response ids"
    texts = [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in body["input"]]
    assert texts == ["Hi there", "Hello! What should we build?", "A CLI, please"]
    assert GatewaySession.objects.count() == 1


def test_compaction_runs_before_the_call_and_its_item_is_expanded_when_sent_back(passthrough, project, llm_server):
    oai = sdk(passthrough, project.test_key)
    cm = [{"type": "compaction", "compact_threshold": 2500}]
    items: list = [{"role": "user", "content": "Read every module and summarise it."}]
    compactions = []
    sent_back = False
    for i in range(14):
        llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": f"src/module_{i}.py"}, f"call_{i}")]))
        sent_back = sent_back or any(it.get("type") == "compaction" for it in items)
        out = oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS, input=items,
                                   context_management=cm, stream=i % 2 == 1)
        if i % 2 == 1:  # streamed: the final response is what the SDK keeps
            out = [e for e in out if e.type == "response.completed"][0].response
        for dumped in _items_of(out):
            if dumped["type"] == "compaction":
                compactions.append(dumped)
                items = []  # what came before the compaction item may be dropped
            items.append(dumped)
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": _output(i)})
    assert compactions and sent_back, "a compaction ran, and its item went back as input"
    assert compactions[0]["summary"] and compactions[0]["id"].startswith("cmp_cs_")
    assert len(set(GatewaySession.objects.values_list("session_id", flat=True))) == 1
    for request in llm_server.requests:
        assert request.path == "/v1/responses"
        kinds = {i.get("type", "message") for i in request.input}
        assert "compaction" not in kinds, "the gateway's compaction items are expanded before forwarding"
        assert len(json.dumps(request.input)) // 4 < WINDOW
    summary = compactions[-1]["summary"]
    assert any(summary[:60] in json.dumps(r.input) for r in llm_server.requests[-3:]), "the summary went upstream"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_upstream_failures_are_the_sdks_errors_without_the_operators_key(passthrough, project, llm_server, stream):
    oai = sdk(passthrough, project.test_key)
    llm_server.script(error(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        out = oai.responses.create(model="gpt-4o", input="hello", stream=stream)
        list(out) if stream else None
    llm_server.script(echo_auth())
    with pytest.raises(openai.APIStatusError) as failed:
        out = oai.responses.create(model="gpt-4o", input="hello", stream=stream)
        list(out) if stream else None
    assert llm_server.requests[-1].headers["authorization"] == f"Bearer {OPERATOR_KEY}"
    assert failed.value.status_code == 502 and OPERATOR_KEY not in failed.value.response.text
    assert "Incorrect API key provided" in failed.value.response.text
    assert OPERATOR_KEY not in json.dumps(list(GatewayCall.objects.values()), default=str)


def test_an_error_event_mid_stream_ends_the_stream_redacted(passthrough, project, llm_server):
    oai = sdk(passthrough, project.test_key)
    llm_server.script(stream_error(f"the backend rejected key {OPERATOR_KEY}", text="Half an answer"))
    events = list(oai.responses.create(model="gpt-4o", input="hello", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "error" and "response.completed" not in kinds
    assert "response.output_text.delta" in kinds
    assert OPERATOR_KEY not in events[-1].message and "the backend rejected key" in events[-1].message
    assert [e.sequence_number for e in events] == list(range(len(events)))
    call = GatewayCall.objects.get(endpoint="responses")
    assert call.status_code >= 500


def test_the_inspector_shows_the_body_sent_to_the_upstreams_responses(passthrough, project, llm_server, client,
                                                                     django_user_model):
    oai = sdk(passthrough, project.test_key)
    llm_server.script(ok("It reads the config."))
    oai.responses.create(model="gpt-4o", instructions="Be brief.", input="What does app.py do?",
                         metadata={"ticket": "T-9"})
    gateway_writes.wait()
    call = GatewayCall.objects.get(endpoint="responses")
    viewer = django_user_model.objects.create_user("viewer", password="a long password 1")
    set_member(project, viewer, "viewer")
    client.force_login(viewer)
    html = client.get(reverse("pages:gateway-call", args=[call.pk])).content.decode()
    assert "/responses" in html and "It reads the config." in html.split('data-testid="reply-body">', 1)[1]
    download = client.get(reverse("pages:gateway-call-upstream", args=[call.pk]))
    assert download.content == llm_server.requests[-1].body, "the download is what the upstream received"
    assert json.loads(download.content)["metadata"] == {"ticket": "T-9"}


def test_only_the_operator_declares_pass_through(passthrough, project, llm_server, settings):
    """An upstream not listed is translated (chat completions); a listed connection is passed
    through with its own key; a listed one that is not an OpenAI-compatible address is the
    operator's error (502), never the client's choice."""
    oai = sdk(passthrough, project.test_key)
    settings.GATEWAY_RESPONSES_PASSTHROUGH = frozenset({"scripted"})  # the connection, not GATEWAY_API_BASE
    llm_server.script(ok("translated"), ok("passed"))
    assert oai.responses.create(model="gpt-4o", input="one").output_text == "translated"
    assert llm_server.requests[-1].path == "/v1/chat/completions"
    assert oai.responses.create(model="openai/gpt-4o", input="two").output_text == "passed"
    assert llm_server.requests[-1].path == "/v1/responses"
    assert llm_server.requests[-1].json["model"] == "gpt-4o"
    assert llm_server.requests[-1].headers["authorization"] == "Bearer test-key"
    settings.COMPACTION_CONNECTIONS = [{"name": "scripted", "models": ["anthropic/*"]}]
    with pytest.raises(openai.InternalServerError) as failed:
        oai.responses.create(model="anthropic/claude-sonnet-4-5", input="three")
    assert "GATEWAY_RESPONSES_PASSTHROUGH" in failed.value.message


def test_hosted_tools_are_refused_naming_them_as_on_the_translated_path(passthrough, project, llm_server, settings):
    """A hosted tool's calls come back as items the session (chat messages) cannot keep, and
    the client's next input would send them back: refused before anything is sent or stored,
    with the same answer whichever way the upstream is reached."""
    oai = sdk(passthrough, project.test_key)
    tools = [*TOOLS, {"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}]
    with pytest.raises(openai.BadRequestError) as passed:
        oai.responses.create(model="gpt-4o", input="Look it up.", tools=tools)
    error = passed.value.body
    assert error["param"] == "tools[1].type"
    assert "'web_search'" in error["message"] and "'file_search' (tools[2])" in error["message"]
    assert "serves Responses or chat completions" in error["message"]
    assert llm_server.requests == [] and not GatewaySession.objects.exists()

    settings.GATEWAY_RESPONSES_PASSTHROUGH = frozenset()
    with pytest.raises(openai.BadRequestError) as translated:
        oai.responses.create(model="gpt-4o", input="Look it up.", tools=tools)
    assert translated.value.body == error


def test_fields_only_a_responses_upstream_answers_are_passed_through_and_refused_when_translated(
        passthrough, project, llm_server, settings):
    """Reasoning summaries, verbosity and output logprobs have no chat-completions form: a
    pass-through upstream gets them as the client sent them; translated, the request is
    refused naming the field before anything is sent or stored."""
    oai = sdk(passthrough, project.test_key)
    asked = {"reasoning": {"effort": "low", "summary": "auto"}, "text": {"verbosity": "low"},
             "include": ["message.output_text.logprobs"], "top_logprobs": 2}
    llm_server.script(ok("Done."))
    answer = oai.responses.create(model="gpt-4o", input="Say done.", **asked)
    assert answer.output_text == "Done."
    sent = llm_server.requests[0]
    assert sent.path == "/v1/responses" and {k: sent.json.get(k) for k in asked} == asked

    settings.GATEWAY_RESPONSES_PASSTHROUGH = frozenset()
    before = (GatewayCall.objects.count(), StoredMessage.objects.count())
    for field, value in asked.items():
        with pytest.raises(openai.BadRequestError) as refused:
            oai.responses.create(model="gpt-4o", input="Say done again.", **{field: value})
        body = refused.value.body
        assert body["param"].startswith(field) and "GATEWAY_RESPONSES_PASSTHROUGH" in body["message"], body
    assert len(llm_server.requests) == 1
    assert (GatewayCall.objects.count(), StoredMessage.objects.count()) == before


REASONED = {"type": "reasoning", "id": "rs_up_1", "summary": [], "encrypted_content": "gAAAA-made-upstream"}
CLIENTS = {"type": "reasoning", "id": "rs_client_1", "summary": [{"type": "summary_text", "text": "Read it first."}],
           "encrypted_content": "gAAAA-from-the-client"}


def _kinds(request) -> list[str]:
    return [i.get("type", "message") for i in request.json["input"]]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_reasoning_items_go_back_upstream_before_their_turn(passthrough, project, llm_server, stream):
    """The client's reasoning items reach the upstream as sent, before the function call they
    led to, every turn the input carries them; those the upstream made come back before
    their turn when the client continues by previous_response_id (from what the gateway
    kept), and never reach a chat-completions upstream."""
    oai = sdk(passthrough, project.test_key)
    call = tool_call("read_file", {"path": "src/app.py"}, "call_1")
    llm_server.script(ok("It defines main()."), ok("Nothing else."))
    items = [{"role": "user", "content": "What does src/app.py define?"}, CLIENTS,
             {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": call["function"]["arguments"]},
             {"type": "function_call_output", "call_id": "call_1", "output": "def main(): ..."}]
    first, _, _ = _create(oai, stream, model="gpt-4o", tools=TOOLS, input=items, extra_headers={"X-Session-Id": "r"})
    assert _kinds(llm_server.requests[0]) == ["message", "reasoning", "function_call", "function_call_output"]
    assert llm_server.requests[0].json["input"][1] == CLIENTS
    items = [*items, *_items_of(first), {"role": "user", "content": "Anything else?"}]
    _create(oai, stream, model="gpt-4o", tools=TOOLS, input=items, extra_headers={"X-Session-Id": "r"})
    resent = llm_server.requests[1].json["input"]
    assert [i.get("type", "message") for i in resent] == [
        "message", "reasoning", "function_call", "function_call_output", "message", "message"]
    assert resent[1] == CLIENTS and GatewaySession.objects.count() == 1

    # made by the upstream, continued by id: the gateway's own copy goes back
    llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": "b.py"}, "call_2")], reasoning=[REASONED]),
                      ok("b.py is empty."))
    made, _, _ = _create(oai, stream, model="gpt-4o", tools=TOOLS, input="And b.py?")
    assert [o.type for o in made.output] == ["reasoning", "function_call"]
    _create(oai, stream, model="gpt-4o", tools=TOOLS, previous_response_id=made.id,
            input=[{"type": "function_call_output", "call_id": "call_2", "output": ""}])
    assert _kinds(llm_server.requests[-1]) == ["message", "reasoning", "function_call", "function_call_output"]
    assert llm_server.requests[-1].json["input"][1] == REASONED


def test_reasoning_items_are_kept_but_never_sent_to_a_chat_completions_upstream(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("It defines main()."))
    oai.responses.create(model="gpt-4o", tools=TOOLS, extra_headers={"X-Session-Id": "t"}, input=[
        {"role": "user", "content": "What does src/app.py define?"}, CLIENTS,
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "def main(): ..."}])
    sent = llm_server.requests[0]
    assert sent.path == "/v1/chat/completions" and "gAAAA" not in sent.body.decode()
    stored = list(StoredMessage.objects.order_by("position").values_list("raw", flat=True))
    assert stored[1]["tool_calls"][0]["id"] == "call_1" and stored[1]["responses_reasoning"] == [CLIENTS]
