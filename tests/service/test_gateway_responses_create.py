"""``POST /v1/responses``, driven by the real ``openai`` SDK (``client.responses.create``,
plain and streamed) against a live test server, with the scripted OpenAI-compatible server
as the upstream (over real HTTP; nothing is mocked)."""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from dashboard.models import (
    CompactionRun,
    GatewayCall,
    GatewayResponse,
    GatewaySession,
    StoredMessage,
)
from tests.service import test_gateway
from tests.service.test_gateway import WINDOW, Client, sdk
from tests.support import gateway_writes
from tests.support.llm_server import error, ok, tool_call

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

INSTRUCTIONS = "You are a careful coding agent."
TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]


def _output(i: int) -> str:
    return f"# src/module_{i}.py\n" + "\n".join(f"def helper_{i}_{k}(x):\n    return x * {k}  # line {k}"
                                                for k in range(40))


def oai_for(live_server, project):
    return sdk(live_server, project.test_key)


def _create(oai, stream: bool, **kw):
    """``responses.create`` plain, or streamed and read to the end as an agent does: the
    final response from ``response.completed``, and every event type seen."""
    if not stream:
        raw = oai.responses.with_raw_response.create(**kw)
        return raw.parse(), raw.headers, None
    raw = oai.responses.with_raw_response.create(stream=True, **kw)
    events = list(raw.parse())
    completed = [e for e in events if e.type == "response.completed"]
    assert len(completed) == 1 and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return completed[0].response, raw.headers, events


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_function_tool_turn_then_its_answer(gateway, project, llm_server, stream):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": "src/app.py"}, "call_1")]),
                      ok("app.py defines main()."))
    first, headers, events = _create(oai, stream, model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS,
                                     input="What does src/app.py define?")
    assert first.status == "completed" and first.object == "response"
    calls = [o for o in first.output if o.type == "function_call"]
    assert [(c.name, json.loads(c.arguments), c.call_id) for c in calls] == [("read_file", {"path": "src/app.py"},
                                                                             "call_1")]
    if stream:
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert "response.function_call_arguments.delta" in kinds and "response.output_item.done" in kinds
        args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
        assert json.loads(args) == {"path": "src/app.py"}
    # upstream got the chat form: instructions as system, the tool in chat shape
    sent = llm_server.requests[0].json
    assert sent["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
    assert sent["tools"][0]["function"]["name"] == "read_file"

    items = [{"role": "user", "content": "What does src/app.py define?"}]
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items.append({"type": "function_call_output", "call_id": "call_1", "output": "def main(): ..."})
    second, headers2, events2 = _create(oai, stream, model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS,
                                        input=items)
    assert second.output_text == "app.py defines main()."
    if stream:
        text = "".join(e.delta for e in events2 if e.type == "response.output_text.delta")
        assert text == "app.py defines main()."
    assert headers["x-compaction-session"] == headers2["x-compaction-session"]
    sid = int(headers["x-compaction-session"])
    roles = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("role", flat=True))
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert list(GatewayCall.objects.filter(session_id=sid).values_list("endpoint", "status_code")) == \
        [("responses", 200)] * 2
    assert second.usage.input_tokens > 0


def test_previous_response_id_continues_the_session_with_only_the_new_input(gateway, project, other_project,
                                                                            llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("Hello, Ada."), ok("Your name is Ada."), ok("Bye."))
    one = oai.responses.with_raw_response.create(model="gpt-4o", instructions=INSTRUCTIONS, input="I am Ada.")
    first = one.parse()
    two = oai.responses.with_raw_response.create(model="gpt-4o", instructions=INSTRUCTIONS,
                                                 previous_response_id=first.id, input="What is my name?")
    second = two.parse()
    assert second.output_text == "Your name is Ada." and second.previous_response_id == first.id
    sent = llm_server.requests[1].json["messages"]
    assert [m["content"] for m in sent] == [INSTRUCTIONS, "I am Ada.", "Hello, Ada.", "What is my name?"]
    third = oai.responses.create(model="gpt-4o", previous_response_id=second.id, input="Goodbye.")
    assert third.output_text == "Bye."
    sids = {one.headers["x-compaction-session"], two.headers["x-compaction-session"]}
    assert len(sids) == 1
    sid = int(sids.pop())
    assert StoredMessage.objects.filter(session_id=sid).count() == 7
    assert GatewayResponse.objects.filter(session_id=sid).count() == 3

    # another project's key cannot continue it
    with pytest.raises(openai.BadRequestError) as theirs:
        sdk(gateway, other_project.test_key).responses.create(model="gpt-4o", previous_response_id=first.id, input="x")
    assert first.id in theirs.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        oai.responses.create(model="gpt-4o", previous_response_id="resp_nope", input="x")
    assert bad.value.body["param"] == "previous_response_id"


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type", "web_search"),
    ({"input": "hi", "background": True}, "background", "Unrecognized request argument supplied: background"),
    ({"input": "hi", "conversation": "conv_1"}, "conversation", "conversation"),
    ({"input": "hi", "context_management": [{"type": "truncate"}]}, "context_management[0].type", "truncate"),
    ({"input": "hi", "context_management": [{"type": "compaction", "compact_threshold": 0}]},
     "context_management[0].compact_threshold", "at least 1"),
    ({"input": "hi", "include": ["file_search_call.results"]}, "include[0]", "file_search_call.results"),
    ({"input": "hi", "tool_choice": {"type": "web_search_preview"}}, "tool_choice", "web_search_preview"),
    ({"input": [{"type": "compaction", "encrypted_content": "gAAAA-opaque"}]}, "input[0]", "not made by this gateway"),
    ({"input": [{"type": "compaction", "id": "cmp_cs_999999_3_1", "encrypted_content": "x"}]}, "input[0]",
     "do not hold"),
])
def test_a_bad_body_is_a_400_naming_the_field(gateway, project, llm_server, body, param, words):
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.BadRequestError) as bad:
        oai.post("/responses", body=dict({"model": "gpt-4o"}, **body), cast_to=object)
    assert bad.value.body["param"] == param
    assert words in bad.value.message
    assert not llm_server.requests


def test_context_management_compacts_and_the_compaction_item_comes_back(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    cm = [{"type": "compaction", "compact_threshold": 2500}]
    items: list = [{"role": "user", "content": "Read every module and summarise it."}]
    compactions = []
    for i in range(14):
        llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": f"src/module_{i}.py"}, f"call_{i}")]))
        out = oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS, input=items,
                                   context_management=cm)
        for o in out.output:
            dumped = o.model_dump(exclude_none=True)
            if o.type == "compaction":
                compactions.append(dumped)
                items = []  # as OpenAI allows: what came before the compaction item may be dropped
            items.append(dumped)
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": _output(i)})
    assert compactions, "a compaction ran and its item was in the output"
    item = compactions[0]
    assert item["summary"] == item["encrypted_content"] and "module" in item["summary"]
    assert item["archive"]["entries"]
    sessions = set(GatewaySession.objects.values_list("session_id", flat=True))
    assert len(sessions) == 1, "the compaction items read back as the history they stand for"
    sid = sessions.pop()
    assert StoredMessage.objects.filter(session_id=sid).count() == 2 + 14 + 13  # the last output is not sent
    limit = WINDOW
    assert all(len(json.dumps(r.json["messages"])) // 4 < limit for r in llm_server.requests)
    assert CompactionRun.objects.filter(session_id=sid, status="succeeded").exists()
    page = Client(project).get(f"/api/sessions/{sid}")
    assert page.status_code == 200


def test_an_upstream_failure_mid_request_is_the_sdks_error(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(error(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        oai.responses.create(model="gpt-4o", input="hello")
    llm_server.script(error(500, "boom"))
    with pytest.raises(openai.InternalServerError):
        list(oai.responses.create(model="gpt-4o", input="hello", stream=True))


def _parallel(n: int, call) -> list:
    """``call(i)`` in ``n`` threads released together; their results (or exceptions)."""
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        return call(i)

    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(run, i) for i in range(n)]
        return [f.exception() or f.result() for f in futures]


@pytest.mark.postgres
@pytest.mark.parametrize("header", [True, False], ids=["x-session-id", "no-identity"])
def test_eight_parallel_identical_calls_make_one_session(gateway, project, llm_server, header):
    """8 identical first calls at once, then 8 identical calls continuing the stored history:
    one conversation, so one session (a retry storm or a client's parallel retries must
    not scatter it)."""
    llm_server.script(*[ok("Hello.") for _ in range(16)])
    extra = {"X-Session-Id": "racer"} if header else {}
    first_input = [{"role": "user", "content": "Say hello."}]

    def first(_i):
        return oai_for(gateway, project).responses.with_raw_response.create(
            model="gpt-4o", instructions=INSTRUCTIONS, input=first_input, extra_headers=extra)

    answers = _parallel(8, first)
    assert all(not isinstance(a, Exception) for a in answers), answers
    gateway_writes.wait()
    assert GatewaySession.objects.count() == 1, "8 identical first calls made one session"
    assert len({a.headers["x-compaction-session"] for a in answers}) == 1

    continued = first_input + [{"role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
                               {"role": "user", "content": "Again."}]

    def then(_i):
        return oai_for(gateway, project).responses.with_raw_response.create(
            model="gpt-4o", instructions=INSTRUCTIONS, input=continued, extra_headers=extra)

    answers = _parallel(8, then)
    assert all(not isinstance(a, Exception) for a in answers), answers
    gateway_writes.wait()
    assert GatewaySession.objects.count() == 1, "8 identical continuing calls stayed in the one session"
    sid = GatewaySession.objects.get().session_id
    roles = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("role", flat=True))
    assert roles[:4] == ["system", "user", "assistant", "user"]
    assert GatewayCall.objects.filter(session_id=sid).count() == 16


def test_a_bad_item_in_a_long_input_is_named(gateway, project, llm_server):
    """The items are validated where they are placed (what a stored history vouches for is
    not checked again): a bad one is a 400 that says which message of the history it is."""
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("fine"))
    items = [{"role": "user", "content": "hi"}]
    first = oai.responses.create(model="gpt-4o", input=items, extra_headers={"X-Session-Id": "bad-item"})
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items += [{"type": "function_call_output", "call_id": "never-called", "output": "x"}]
    with pytest.raises(openai.BadRequestError) as bad:
        oai.responses.create(model="gpt-4o", input=items, extra_headers={"X-Session-Id": "bad-item"})
    assert bad.value.body["param"] == "input"
    assert bad.value.message.startswith("Error code: 400 - {'error': {'message': \"input: ")
    assert "never-called" in bad.value.message and "position 2" in bad.value.message

    items[-1] = {"type": "function_call", "call_id": "c1", "name": "", "arguments": "{}"}
    with pytest.raises(openai.BadRequestError) as bad:
        oai.responses.create(model="gpt-4o", input=items, extra_headers={"X-Session-Id": "bad-item"})
    assert bad.value.body["param"] == "input[2].name" and "non-empty" in bad.value.message
    assert len(llm_server.requests) == 1


def test_the_sdks_stream_helper_assembles_the_response(gateway, project, llm_server):
    """``client.responses.stream`` rebuilds the response from the events (each delta lands on
    the item and part announced before it) and checks it against ``response.completed``."""
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("Looking.", tool_calls=[tool_call("read_file", {"path": "a.py"}, "call_a"),
                                                 tool_call("read_file", {"path": "b.py"}, "call_b")]))
    with oai.responses.stream(model="gpt-4o", input="Read a.py and b.py.", tools=TOOLS) as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(texts) == "Looking." == final.output_text
    calls = [(o.call_id, json.loads(o.arguments)) for o in final.output if o.type == "function_call"]
    assert calls == [("call_a", {"path": "a.py"}), ("call_b", {"path": "b.py"})]
    assert final.status == "completed" and final.usage.total_tokens > 0


def test_images_go_upstream_and_reasoning_items_are_dropped(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("A red dot."))
    pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
    out = oai.responses.create(model="gpt-4o", input=[
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque"},
        {"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                     {"type": "input_image", "image_url": pixel, "detail": "auto"}]}])
    assert out.output_text == "A red dot."
    sent = llm_server.requests[0].json["messages"]
    assert sent == [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                 {"type": "image_url", "image_url": {"url": pixel}}]}]
