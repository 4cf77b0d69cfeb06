"""The hot path of an agent loop does not grow with the session: appending one message
costs the same queries at 100 and at 10,000 messages, and none of them reads the history
or the stored live context; a conditional GET of the context at steady state answers from
what is stored (304 without reading the message list at all)."""
from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.models import ContextTail, SessionContext
from dashboard.selectors import sessions as context_selectors

# PostgreSQL pass: the append path's batched writes and query counts
pytestmark = pytest.mark.postgres


def _history(n: int) -> list[dict]:
    """n short messages (a system prompt, then user / assistant turns), far from any trigger."""
    msgs: list[dict] = [{"role": "system", "content": "You are terse."}]
    while len(msgs) < n:
        msgs.append({"role": "user" if len(msgs) % 2 else "assistant", "content": f"m{len(msgs)}"})
    return msgs


def _session(api, n: int) -> int:
    r = api.post("/api/sessions", {"messages": _history(n), "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def _append(api, sid: int, messages: list[dict]) -> list[str]:
    """SQL of one append request (the trigger check included); the append must succeed
    without firing the trigger, so both sizes take the same path."""
    connection.queries_log.clear()  # a full log (it keeps 9,000) would capture nothing
    with CaptureQueriesContext(connection) as q:
        r = api.post(f"/api/sessions/{sid}/messages", {"messages": messages})
    assert r.status_code == 201, r.content
    assert r.json()["trigger"]["fired"] is False and r.json()["compaction"] is None
    return [x["sql"] for x in q.captured_queries]


def _reads_of_session_length(sqls: list[str]) -> list[str]:
    """SELECTs whose result grows with the session: the history (other than by indexed tool
    call id or position), the stored context texts, the tail."""
    bad = []
    for sql in sqls:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        low = sql.lower()
        if "dashboard_sessioncontext" in low or "dashboard_contexttail" in low:
            bad.append(sql)
        elif "dashboard_storedmessage" in low and not re.search(r"tool_call_id\" in|position\" in", low):
            bad.append(sql)
    return bad


def _shape(sqls: list[str]) -> list[str]:
    """Queries with their literal values blanked, to compare two appends' work."""
    return [re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'?'", s)) for s in sqls]


@pytest.mark.parametrize("batch", [
    [{"role": "user", "content": "one more question"}],
    [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_x", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
     {"role": "tool", "tool_call_id": "call_x", "content": "a.py b.py"}],
], ids=["user message", "tool call and result"])
def test_an_append_runs_the_same_queries_at_10000_messages_as_at_100(api, batch):
    small, large = _session(api, 100), _session(api, 10_000)
    for sid in (small, large):  # both with a tail already, and the key lookup cached
        _append(api, sid, [{"role": "user", "content": "warm up"}])
    at_100 = _append(api, small, batch)
    at_10000 = _append(api, large, batch)
    assert _shape(at_100) == _shape(at_10000)
    assert _reads_of_session_length(at_10000) == []
    # and the message is in the context the agent reads next
    messages = api.get(f"/api/sessions/{large}/context").json()["messages"]
    assert len(messages) == 10_001 + len(batch) and messages[-len(batch):] == batch


def test_appends_become_tail_rows_that_a_compaction_folds_into_the_stored_context(api):
    sid = _session(api, 100)
    for k in range(3):
        _append(api, sid, [{"role": "user", "content": f"later {k}"}])
    assert ContextTail.objects.filter(session_id=sid).count() == 3
    assert len(json.loads(SessionContext.objects.get(session_id=sid).items)) == 100
    before = api.get(f"/api/sessions/{sid}/context").json()
    assert [m["content"] for m in before["messages"][-3:]] == ["later 0", "later 1", "later 2"]

    r = api.post(f"/api/sessions/{sid}/compactions", {})
    assert api.get(r.json()["status_url"]).json()["status"] == "succeeded"
    assert not ContextTail.objects.filter(session_id=sid).exists()
    after = api.get(f"/api/sessions/{sid}/context").json()
    assert after["version"] > before["version"] and after["compactions"] == 1
    assert after["messages"][-1]["content"] == "later 2"
    # folded in: the stored context's messages as sent are the whole list (the count is of those)
    stored = SessionContext.objects.get(session_id=sid)
    assert json.loads(stored.rendered) == after["messages"] and len(after["messages"]) == after["message_count"]


def test_a_system_message_appended_after_a_system_injected_summary_takes_the_summary(api):
    """The one append that renders the whole list again: a summary injected as its own
    system message moves into the first real system message, even one that arrives later."""
    msgs = [m for m in _history(60) if m["role"] != "system"]
    sid = api.post("/api/sessions", {"messages": msgs, "auto_compact": False}).json()["session"]["id"]
    r = api.post(f"/api/sessions/{sid}/compactions",
                 {"overrides": {"finalize": {"injection": "system"}}})
    assert api.get(r.json()["status_url"]).json()["status"] == "succeeded"
    first = api.get(f"/api/sessions/{sid}/context").json()["messages"]
    assert first[0]["role"] == "system"
    _append(api, sid, [{"role": "system", "content": "New rules."}])
    now = api.get(f"/api/sessions/{sid}/context").json()["messages"]
    systems = [m for m in now if m["role"] == "system"]
    assert len(systems) == 1 and systems[0] == now[-1]
    assert now[-1]["content"].startswith("New rules.") and first[0]["content"] in now[-1]["content"]


def test_a_conditional_get_of_the_current_version_is_a_304_without_reading_the_context(api):
    sid = _session(api, 10_000)
    r = api.get(f"/api/sessions/{sid}/context")
    assert r.status_code == 200
    # even with the body gone from this process's cache (it keeps 64 MB of bodies)
    context_selectors._BODIES.clear()
    connection.queries_log.clear()  # a full log (it keeps 9,000) would capture nothing
    with CaptureQueriesContext(connection) as q:
        again = api.get(f"/api/sessions/{sid}/context", HTTP_IF_NONE_MATCH=r["ETag"])
    assert again.status_code == 304 and again["ETag"] == r["ETag"] and not again.content
    sqls = [x["sql"].lower() for x in q.captured_queries]
    assert not [s for s in sqls if "rendered" in s or "dashboard_contexttail" in s or "dashboard_storedmessage" in s]
    assert not [s for s in sqls if s.lstrip().startswith("update")]

    _append(api, sid, [{"role": "user", "content": "changed"}])
    fresh = api.get(f"/api/sessions/{sid}/context", HTTP_IF_NONE_MATCH=r["ETag"])
    assert fresh.status_code == 200 and fresh["ETag"] != r["ETag"]
    assert fresh.json()["messages"][-1] == {"role": "user", "content": "changed"}


def test_a_steady_state_get_serves_the_stored_body_without_reading_the_message_list_again(api):
    sid = _session(api, 10_000)
    _append(api, sid, [{"role": "user", "content": "tail"}])
    first = api.get(f"/api/sessions/{sid}/context")
    connection.queries_log.clear()  # a full log (it keeps 9,000) would capture nothing
    with CaptureQueriesContext(connection) as q:
        second = api.get(f"/api/sessions/{sid}/context")
    assert second.status_code == 200 and second.content == first.content
    sqls = [x["sql"].lower() for x in q.captured_queries]
    assert not [s for s in sqls if "rendered" in s or "dashboard_contexttail" in s or "dashboard_storedmessage" in s]
    assert json.loads(second.content)["messages"][-1] == {"role": "user", "content": "tail"}
