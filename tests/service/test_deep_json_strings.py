"""Tool call ``arguments`` (and a JSON tool result) that nest 3,000 brackets deep inside their
strings, as a model can emit: the REST API imports, appends, reads and compacts such a
session, and every gateway endpoint serves a history that carries them, each giving the raw
string back as it came. Python's parser raises RecursionError on such text; the service
reads it through ``compaction.jsontext``, which keeps the raw string instead."""
from __future__ import annotations

import json

import pytest

from dashboard.models import CompactionRun, StoredMessage
from tests.service.helpers import chat
from tests.service.test_gateway import gateway, sdk  # noqa: F401 - the live server fixture, reused
from tests.service.test_gateway_anthropic import MODEL as CLAUDE
from tests.service.test_gateway_anthropic import sdk as claude_sdk
from tests.support.llm_server import ok, tool_call

DEEP = {
    "arrays": "[" * 3000 + "]" * 3000,
    "objects": '{"a": ' * 3000 + "1" + "}" * 3000,
}


@pytest.fixture(params=list(DEEP))
def deep(request):
    return DEEP[request.param]


def deep_history(deep: str, turns: int = 8) -> list[dict]:
    """An agent session whose first tool call carries ``deep`` as its arguments and whose
    first tool result is ``deep`` too."""
    messages = chat(turns)
    messages[2]["tool_calls"][0]["function"]["arguments"] = deep
    messages[3]["content"] = deep
    return messages


def _args(message: dict) -> str:
    return message["tool_calls"][0]["function"]["arguments"]


# -- the REST API ----------------------------------------------------------------------------

@pytest.mark.postgres  # the deep text stored and read back as PostgreSQL keeps it
def test_the_api_imports_appends_reads_and_compacts_a_session_with_deep_arguments(api, deep):
    r = api.post("/api/sessions", {"messages": deep_history(deep), "title": "deep", "auto_compact": False})
    assert r.status_code == 201, r.content[:300]
    sid = r.json()["session"]["id"]
    more = [{"role": "user", "content": "again"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_deep", "type": "function", "function": {"name": "read_file", "arguments": deep}}]},
            {"role": "tool", "tool_call_id": "call_deep", "content": deep}]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": more})
    assert r.status_code == 201, r.content[:300]

    r = api.get(f"/api/sessions/{sid}/context")
    assert r.status_code == 200, r.content[:300]
    assert _args(r.json()["messages"][2]) == deep and r.json()["messages"][-1]["content"] == deep
    r = api.get(f"/api/sessions/{sid}/messages?limit=200")
    assert r.status_code == 200, r.content[:300]
    messages = [item["message"] for item in r.json()["items"]]
    assert _args(messages[2]) == deep and messages[3]["content"] == deep

    r = api.post(f"/api/sessions/{sid}/compactions", {})
    assert r.status_code in (200, 202), r.content[:300]
    run = CompactionRun.objects.get(pk=r.json()["run_id"])
    assert run.status == "succeeded", (run.status, run.error)
    assert run.summary and run.retention is not None, "summary written and retention scored"
    for path in (f"/api/sessions/{sid}/archive", f"/api/runs/{run.pk}", f"/api/sessions/{sid}",
                 f"/api/sessions/{sid}/context"):
        r = api.get(path)
        assert r.status_code == 200, (path, r.content[:300])
    entries = api.get(f"/api/sessions/{sid}/archive").json()["items"]
    bodies = [api.get(f"/api/archive/{e['id']}").content.decode() for e in entries]
    assert any(json.dumps(deep)[1:-1] in b for b in bodies), "the archive gives the raw arguments back"
    r = api.post(f"/api/sessions/{sid}/simulate", {})
    assert r.status_code == 200, r.content[:300]


# -- the gateway -----------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_chat_completions_serve_a_history_with_deep_arguments_and_the_next_call_too(
        gateway, project, llm_server, deep, stream):  # noqa: F811 - the imported fixture
    oai = sdk(gateway, project.test_key)
    history = deep_history(deep)[:-1]  # ends with the deep tool result's successors cut: a user turn next
    history.append({"role": "user", "content": "go on"})
    llm_server.script(ok("", tool_calls=[tool_call("read_file", deep, "call_model")]), ok("done"))

    def ask(messages):
        if stream:
            chunks = list(oai.chat.completions.create(model="gpt-4o", messages=messages, stream=True))
            pieces = [tc.function.arguments for c in chunks for ch in c.choices for tc in ch.delta.tool_calls or []
                      if tc.function and tc.function.arguments]
            return "".join(pieces) or "".join(ch.delta.content or "" for c in chunks for ch in c.choices)
        answer = oai.chat.completions.create(model="gpt-4o", messages=messages)
        calls = answer.choices[0].message.tool_calls or []
        return calls[0].function.arguments if calls else answer.choices[0].message.content

    assert ask(history) == deep, "the model's deep arguments reach the client as they were"
    history += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_model", "type": "function", "function": {"name": "read_file", "arguments": deep}}]},
        {"role": "tool", "tool_call_id": "call_model", "content": deep}]
    assert ask(history) == "done"
    assert len(llm_server.requests) == 2
    stored = StoredMessage.objects.values_list("raw", flat=True)
    assert deep in [_args(m) for m in stored if m.get("tool_calls")], "the session keeps the raw arguments"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_messages_serve_a_model_call_with_deep_arguments_and_the_history_after_it(
        gateway, project, llm_server, deep, stream):  # noqa: F811 - the imported fixture
    client = claude_sdk(gateway, project.test_key)
    history: list[dict] = [{"role": "user", "content": "read it"}]
    llm_server.script(ok("", tool_calls=[tool_call("read_file", deep, "call_model")]), ok("done"))

    def ask():
        kw = dict(model=CLAUDE, max_tokens=512, messages=history)
        if stream:
            with client.messages.stream(**kw) as s:
                return s.get_final_message()
        return client.messages.create(**kw)

    message = ask()
    use = next(b for b in message.content if b.type == "tool_use")
    assert use.input == {"arguments": deep}, "arguments that are not a usable object are kept as their text"
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
    history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": deep}]})
    message = ask()
    assert message.content[0].text == "done"


def test_responses_compact_serves_items_with_deep_arguments(gateway, project, llm_server, deep):  # noqa: F811
    oai = sdk(gateway, project.test_key)
    items: list[dict] = [{"type": "message", "role": "user", "content": "Read every module."}]
    for i in range(20):
        items.append({"type": "function_call", "call_id": f"call_{i}", "name": "read_file",
                      "arguments": deep if i < 2 else f'{{"path": "src/module_{i}.py"}}'})
        items.append({"type": "function_call_output", "call_id": f"call_{i}",
                      "output": deep if i < 2 else "\n".join(f"def helper_{i}_{k}(): pass" for k in range(60))})
    items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Read."}]})
    out = oai.responses.compact(model="gpt-4o", input=items, extra_headers={"X-Session-Id": "deep-compact"})
    dumped = [o.model_dump() for o in out.output]
    assert any(o["type"] == "compaction" for o in dumped)
    assert all(o["arguments"] in (deep, f'{{"path": "src/module_{o["call_id"][5:]}.py"}}')
               for o in dumped if o["type"] == "function_call")
