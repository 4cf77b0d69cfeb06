"""``POST /v1/responses/compact`` and ``/v1/responses``, driven by the real ``openai`` SDK
(``client.responses.compact``) against a live test server. The summarizer is the offline
extractive one (a litellm custom provider, no network), so nothing is mocked."""
from __future__ import annotations

import json

import openai
import pytest

from dashboard.models import CompactionRun, GatewayCall, GatewaySession, StoredMessage
from tests.service import test_gateway
from tests.service.test_gateway import Client, sdk
from tests.support.llm_server import ok

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

INSTRUCTIONS = "You are a careful coding agent."


def _items(turns: int) -> list[dict]:
    """A Responses-style agent conversation: a task, then ``turns`` function calls with
    their (long) outputs, and the assistant's last word."""
    items: list[dict] = [{"type": "message", "role": "user", "content": "Read every module and summarise it."}]
    for i in range(turns):
        items.append({"type": "function_call", "call_id": f"call_{i}", "name": "read_file",
                      "arguments": f'{{"path": "src/module_{i}.py"}}'})
        items.append({"type": "function_call_output", "call_id": f"call_{i}",
                      "output": f"# src/module_{i}.py\n" + "\n".join(f"def helper_{i}_{k}(x):\n    return x * {k}"
                                                                     for k in range(40))})
    items.append({"type": "message", "role": "assistant",
                  "content": [{"type": "output_text", "text": "All modules read."}]})
    return items


def _pairs_intact(output: list[dict]) -> bool:
    called: set[str] = set()
    for item in output:
        if item["type"] == "function_call":
            called.add(item["call_id"])
        elif item["type"] == "function_call_output" and item["call_id"] not in called:
            return False
    return True


def test_compact_returns_the_compacted_window_with_a_readable_summary_and_its_archive(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    items = _items(20)
    raw = oai.responses.with_raw_response.compact(model="gpt-4o", input=items, instructions=INSTRUCTIONS,
                                                  extra_headers={"X-Session-Id": "compact-1"})
    out = raw.parse()
    assert out.object == "response.compaction"
    dumped = [o.model_dump() for o in out.output]
    compactions = [o for o in dumped if o["type"] == "compaction"]
    assert len(compactions) == 1
    summary = compactions[0]
    assert summary["summary"] and summary["encrypted_content"] == summary["summary"]
    assert "module" in summary["summary"], "the summary is readable text about the conversation"
    assert len(dumped) < len(items), "the window is smaller than what was sent"
    assert _pairs_intact(dumped)
    assert not any(o["type"] == "message" and o["role"] == "system" for o in dumped), "instructions are not echoed"
    assert dumped[-1]["type"] == "message" and dumped[-1]["content"][0]["text"] == "All modules read."

    # The handle gives back what the summary replaced; the session is an ordinary one.
    sid = int(raw.headers["x-compaction-session"])
    assert summary["archive"]["session"] == sid and summary["archive"]["entries"]
    entries = summary["archive"]["entries"]
    assert any(e["id"] in summary["summary"] for e in entries), "the summary names its archive entry"
    replaced = [Client(project).get(e["url"] + "?limit=500").json() for e in entries]
    assert {r["session_id"] for r in replaced} == {sid}
    assert "def helper_0_1(" in json.dumps(replaced), "the archive gives back the first tool output"
    run = CompactionRun.objects.get(pk=int(raw.headers["x-compaction-run"]))
    assert run.session_id == sid and run.status == "succeeded" and run.force
    assert StoredMessage.objects.filter(session_id=sid).count() == 1 + 1 + 20 * 2 + 1  # instructions, task, pairs, last
    call = GatewayCall.objects.get(session_id=sid)
    assert (call.endpoint, call.status_code, call.run_id) == ("responses/compact", 200, run.pk)
    assert call.estimated_prompt_tokens > 6000
    # usage is the summarizer's, as its provider (here the offline extractive one) reported it;
    # litellm has no price for that summarizer, so the call has none (not a price of zero).
    assert out.usage.input_tokens == sum(a["usage"]["prompt_tokens"] for a in run.attempts) > 0
    assert call.provider_prompt_tokens == out.usage.input_tokens
    assert call.cost_usd is None
    assert not llm_server.requests, "compaction needs no upstream model call with the extractive summarizer"

    # The output, sent back with one more turn, reads back (the compaction item as its summary).
    again = oai.responses.compact(model="gpt-4o", instructions=INSTRUCTIONS,
                                  input=dumped + [{"role": "user", "content": "Now list the helpers."}])
    assert again.object == "response.compaction"
    texts = [o.model_dump() for o in again.output]
    assert texts[-1]["content"][0]["text"] == "Now list the helpers."


def test_same_items_and_policy_give_the_same_window(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)

    def window(name: str) -> list[dict]:
        out = oai.responses.compact(model="gpt-4o", input=_items(12), extra_headers={"X-Session-Id": name})
        items = [o.model_dump() for o in out.output]
        # The archive handle names this session's entries: the one part that differs by design.
        handles = [e["id"] for o in items if o["type"] == "compaction" for e in o["archive"]["entries"]]
        text = json.dumps([{k: v for k, v in o.items() if k not in ("id", "archive")} for o in items])
        for n, handle in enumerate(handles):
            text = text.replace(handle, f"<entry {n}>")
        return json.loads(text)

    assert window("twin-a") == window("twin-b")
    assert GatewaySession.objects.filter(identity__in=["id:twin-a", "id:twin-b"]).count() == 2


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "input[0].type", "web_search_call"),
    ({"input": [{"type": "compaction", "encrypted_content": "gAAAA-opaque"}]}, "input[0]", "not made by this gateway"),
    ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id", "no response 'resp_1' is kept"),
    ({"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]}, None, "nope"),
    ({"input": "hi", "tools": []}, "tools", "Unrecognized"),
])
def test_a_bad_compact_body_is_a_400_naming_what_to_fix(gateway, project, llm_server, body, param, words):
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.BadRequestError) as bad:
        oai.post("/responses/compact", body=dict({"model": "gpt-4o"}, **body), cast_to=object)
    if param is not None:
        assert bad.value.body["param"] == param
    assert words in bad.value.message


def test_reading_a_response_back_is_a_404_that_names_what_is_served(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.NotFoundError) as missing:
        oai.responses.retrieve("resp_123")
    message = missing.value.body["message"]
    assert "POST /v1/responses and" in message and "/v1/responses/compact" in message and "previous_response_id" in message
    assert missing.value.body["code"] == "unsupported_endpoint"
    with pytest.raises(openai.AuthenticationError):
        sdk(gateway, "not-a-key").responses.create(model="gpt-4o", input="hello")
    assert not llm_server.requests


def test_the_compacted_window_sent_back_to_responses_create_continues_the_session(gateway, project, llm_server):
    """The output of ``responses.compact`` is the client's new history: sent back with a new
    question to ``responses.create``, its compaction item stands for the stored messages it
    replaced, so the session continues (no fork) and the upstream gets the compacted context."""
    oai = sdk(gateway, project.test_key)
    items = _items(20)
    raw = oai.responses.with_raw_response.compact(model="gpt-4o", input=items, instructions=INSTRUCTIONS)
    sid = int(raw.headers["x-compaction-session"])
    window = [o.model_dump() for o in raw.parse().output]
    compaction = next(o for o in window if o["type"] == "compaction")
    # what an SDK keeps of the item is enough: the Agents SDK, for one, drops created_by
    kept = [{k: v for k, v in o.items() if k != "created_by"} for o in window]
    llm_server.script(ok("There are 800 helpers."))
    out = oai.responses.with_raw_response.create(model="gpt-4o", instructions=INSTRUCTIONS,
                                                 input=kept + [{"role": "user", "content": "Count the helpers."}])
    assert out.parse().output_text == "There are 800 helpers."
    assert int(out.headers["x-compaction-session"]) == sid, "the compacted window continues its session"
    assert GatewaySession.objects.count() == 1
    stored = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert len(stored) == len(items) + 3 and stored[-2] == {"role": "user", "content": "Count the helpers."}
    sent = llm_server.requests[0].json["messages"]
    assert any(compaction["summary"] in str(m.get("content")) for m in sent), "the upstream got the summary"
    assert "def helper_0_1(" not in json.dumps(sent), "and not what it replaced"
    assert sent[-1] == {"role": "user", "content": "Count the helpers."}


def test_a_conversation_with_nothing_to_compact_comes_back_as_it_is(gateway, project, llm_server):
    raw = sdk(gateway, project.test_key).responses.with_raw_response.compact(model="gpt-4o", input="just one question")
    out = raw.parse()
    assert [o.model_dump()["type"] for o in out.output] == ["message"]
    assert raw.http_response.json()["output"][0]["content"] == [{"type": "input_text", "text": "just one question"}]
    run = CompactionRun.objects.get(pk=int(raw.headers["x-compaction-run"]))
    assert run.status == "skipped"
    assert out.usage.total_tokens == 0
