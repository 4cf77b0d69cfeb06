"""Cache-safe summary requests through the service: the context endpoint
stores the request prefix it served; a run forks exactly that prefix (messages and tools)
and appends one compacting instruction; the run records the request mode and why."""
from __future__ import annotations

import json

from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction.messages import canonical_json
from dashboard.models import SessionContext
from tests.service.helpers import chat, llm_policy
from tests.support.llm_server import ok

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the repository.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


def setup(api, server, **summarizer) -> int:
    r = api.post("/api/policies", {"name": "cache-safe", "activate": True,
                                   "policy": llm_policy(server, **summarizer)})
    assert r.status_code == 201, r.content
    r = api.post("/api/sessions", {"messages": chat(8), "tools": TOOLS, "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def force(api, sid: int) -> dict:
    r = api.post(f"/api/sessions/{sid}/compactions", {})
    assert r.status_code == 202, r.content
    return api.get(r.json()["status_url"]).json()


def test_the_summary_request_is_the_served_prefix_byte_for_byte_plus_one_instruction(api, llm_server):
    sid = setup(api, llm_server, cache_safe=True)
    served = api.get(f"/api/sessions/{sid}/context").json()
    stored = SessionContext.objects.get(session_id=sid)
    assert stored.served_version == served["version"] and json.loads(stored.served_messages()) == served["messages"]
    llm_server.script(ok("## Summary\nThe agent read modules 0 to 7 and reported what each defines."))
    run = force(api, sid)
    assert run["status"] == "succeeded", run["error"]
    assert run["request_mode"] == "cache_safe", run["request_mode_reason"]
    assert "forked the agent's last request" in run["request_mode_reason"]
    # what the engine handed to the model client: the served messages, untouched, plus the instruction
    assert canonical_json(run["prompt"][:-1]) == canonical_json(served["messages"])
    assert run["prompt"][-1]["role"] == "user"
    # on the wire (litellm leaves out "content": null of tool-calling assistant turns)
    sent = llm_server.requests[-1].json
    assert canonical_json(sent["messages"][:-1]) == canonical_json(
        [{k: v for k, v in m.items() if not (k == "content" and v is None)} for m in served["messages"]])
    assert sent["messages"][-1]["role"] == "user" and len(sent["messages"]) == len(served["messages"]) + 1
    assert canonical_json(sent["tools"]) == canonical_json(TOOLS)
    assert [e["data"]["mode"] for e in run["events"] if e["kind"] == "summary_request"] == ["cache_safe"]


def test_without_a_served_prefix_the_run_sends_the_standalone_request_and_says_why(api, llm_server):
    sid = setup(api, llm_server, cache_safe=True)
    llm_server.script(ok("## Summary\nShort."))
    run = force(api, sid)
    assert run["status"] == "succeeded", run["error"]
    assert run["request_mode"] == "standalone" and "no parent request" in run["request_mode_reason"]
    assert "tools" not in llm_server.requests[-1].json


def test_with_cache_safe_off_the_run_records_the_standalone_mode(api, llm_server):
    sid = setup(api, llm_server)
    api.get(f"/api/sessions/{sid}/context")
    llm_server.script(ok("## Summary\nShort."))
    run = force(api, sid)
    assert run["request_mode"] == "standalone" and "off in this policy" in run["request_mode_reason"]


def test_a_prefix_served_before_a_compaction_is_stale_for_the_next_one(api, llm_server):
    sid = setup(api, llm_server, cache_safe=True)
    api.get(f"/api/sessions/{sid}/context")
    llm_server.script(ok("## Summary\nFirst."), ok("## Summary\nSecond."))
    assert force(api, sid)["request_mode"] == "cache_safe"
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": chat(4, tag="more")[1:], "auto_compact": False})
    assert r.status_code == 201
    # the agent did not fetch the new context: the stored prefix lacks the new messages
    run = force(api, sid)
    assert run["status"] == "succeeded"
    assert run["request_mode"] == "standalone" and "lacks" in run["request_mode_reason"]


def test_runs_that_send_no_summary_request_record_no_mode(api, small_session):
    r = api.post(f"/api/sessions/{small_session['id']}/compactions", {"overrides": {"summarize": False}})
    run = api.get(r.json()["status_url"]).json()
    assert run["request_mode"] is None and run["request_mode_reason"]


def test_the_served_prefix_is_written_once_per_context_version(api, small_session):
    sid = small_session["id"]
    with CaptureQueriesContext(connection) as first:
        v1 = api.get(f"/api/sessions/{sid}/context").json()["version"]
    with CaptureQueriesContext(connection) as again:
        assert api.get(f"/api/sessions/{sid}/context").json()["version"] == v1
    updates = [q["sql"] for q in first.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 1 and "served" in updates[0]
    assert not [q for q in again.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "and now?"}]})
    assert r.status_code == 201
    served = api.get(f"/api/sessions/{sid}/context").json()
    ctx = SessionContext.objects.get(session_id=sid)
    assert served["version"] > v1 and ctx.served_version == served["version"]
    assert json.loads(ctx.served_messages()) == served["messages"] and served["messages"][-1]["content"] == "and now?"


def test_the_served_prefix_is_what_was_served_after_later_appends_and_a_compaction(api, small_session):
    """The prefix is kept by reference to the stored context; appends after the GET and a
    compaction that replaces the stored texts leave it exactly what the agent received."""
    sid = small_session["id"]
    api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "seen"}]})
    served = api.get(f"/api/sessions/{sid}/context").json()["messages"]
    api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "not seen"}]})
    assert json.loads(SessionContext.objects.get(session_id=sid).served_messages()) == served
    r = api.post(f"/api/sessions/{sid}/compactions", {})
    assert api.get(r.json()["status_url"]).json()["status"] == "succeeded"
    ctx = SessionContext.objects.get(session_id=sid)
    assert ctx.served_upto is None and json.loads(ctx.served_messages()) == served
    assert served[-1]["content"] == "seen"
