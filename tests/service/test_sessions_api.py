"""Sessions over the API: append with the trigger check, history, context, delete."""
from __future__ import annotations

import pytest

from compaction import get_preset
from compaction.messages import Message
from compaction.tokens import MessageCounter, make_counter
from dashboard.models import CompactionRun, Session, StoredArchiveEntry, StoredMessage
from tests.service.helpers import chat


def tokens_policy(threshold: int) -> dict:
    data = get_preset("default").to_json()
    data["trigger"] = {"kind": "tokens", "threshold": threshold}
    data["cut"]["keep_messages"] = 4
    return data


@pytest.mark.postgres
def test_appending_updates_the_totals_by_the_new_messages_tokens(api, small_session):
    sid = small_session["id"]
    new = [{"role": "user", "content": "Now run the tests please."},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c_new", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"pytest\"}"}}]},
           {"role": "tool", "tool_call_id": "c_new", "content": "3 passed"}]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": new})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["appended"] == 3 and body["positions"] == [33, 34, 35] and body["message_count"] == 36
    counter = MessageCounter(make_counter("tiktoken", model=None))
    added = sum(counter.count(Message(m, "x")).total for m in new)
    assert body["context"]["tokens"]["total"] == small_session["context_tokens"] + added
    assert body["trigger"]["fired"] is False and body["compaction"] is None
    detail = api.get(f"/api/sessions/{sid}").json()
    assert detail["history_tokens"] == small_session["history_tokens"] + added
    stored = StoredMessage.objects.get(session_id=sid, position=35)
    assert stored.tokens == counter.count(Message(new[2], "x")).total and len(stored.content_hash) == 64


@pytest.mark.postgres
def test_an_append_that_crosses_the_trigger_queues_an_auto_run_and_says_so(api, project):
    api.post("/api/policies", {"name": "small", "policy": tokens_policy(2500), "activate": True})
    sid = api.post("/api/sessions", {"messages": chat(3)}).json()["session"]["id"]
    quiet = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "hello"}]}).json()
    assert quiet["trigger"]["fired"] is False and quiet["compaction"] is None
    loud = api.post(f"/api/sessions/{sid}/messages", {"messages": chat(4, tag="more")[1:]}).json()
    assert loud["trigger"]["fired"] is True and "tokens" in loud["trigger"]["reason"]
    ref = loud["compaction"]
    assert ref["created"] is True and ref["status_url"] == f"/api/runs/{ref['run_id']}"
    run = api.get(ref["status_url"]).json()
    assert run["trigger"] == "auto" and run["status"] == "succeeded", run["error"]
    ctx = api.get(f"/api/sessions/{sid}/context").json()
    assert ctx["compactions"] == 1 and ctx["tokens"]["total"] < 2500


@pytest.mark.postgres
def test_an_invalid_append_writes_nothing_and_names_the_message(api, small_session):
    sid = small_session["id"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [
        {"role": "user", "content": "fine"},
        {"role": "tool", "tool_call_id": "call_t_0", "content": "answered twice"}]})
    assert r.status_code == 422
    assert "messages[1]" in r.json()["detail"] and "already answered" in r.json()["detail"]
    assert Session.objects.get(pk=sid).message_count == small_session["message_count"]
    assert StoredMessage.objects.filter(session_id=sid).count() == small_session["message_count"]


@pytest.mark.postgres
def test_a_result_for_a_call_made_in_an_earlier_append_is_accepted(api, small_session):
    sid = small_session["id"]
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c_later", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}
    assert api.post(f"/api/sessions/{sid}/messages", {"messages": [call]}).status_code == 201
    early_user = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "x"}]})
    assert early_user.status_code == 422 and "no result" in early_user.json()["detail"]
    result = {"role": "tool", "tool_call_id": "c_later", "content": "a b c"}
    assert api.post(f"/api/sessions/{sid}/messages", {"messages": [result]}).status_code == 201


def test_the_history_pages_through_every_message_in_order(api, small_session):
    sid = small_session["id"]
    seen, cursor = [], None
    while True:
        page = api.get(f"/api/sessions/{sid}/messages?limit=7" + (f"&cursor={cursor}" if cursor else "")).json()
        seen += [m["position"] for m in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(range(small_session["message_count"]))


def test_a_bad_cursor_is_a_400(api, small_session):
    r = api.get(f"/api/sessions/{small_session['id']}/messages?cursor=garbage!")
    assert r.status_code == 400 and "cursor" in r.json()["detail"]


def test_the_context_has_a_version_tag_and_answers_304_when_unchanged(api, small_session):
    sid = small_session["id"]
    r = api.get(f"/api/sessions/{sid}/context")
    body = r.json()
    assert r["ETag"] == f'"{body["tag"]}"' and body["version"] == 1
    assert body["tokens"]["total"] == small_session["context_tokens"]
    assert api.get(f"/api/sessions/{sid}/context", HTTP_IF_NONE_MATCH=r["ETag"]).status_code == 304
    api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "next"}]})
    again = api.get(f"/api/sessions/{sid}/context", HTTP_IF_NONE_MATCH=r["ETag"])
    assert again.status_code == 200 and again.json()["version"] == 2
    assert again.json()["messages"][-1] == {"role": "user", "content": "next"}


def test_sessions_are_listed_newest_first_with_a_cursor(api):
    ids = [api.post("/api/sessions", {"messages": chat(1), "title": f"s{i}"}).json()["session"]["id"]
           for i in range(5)]
    page = api.get("/api/sessions?limit=3").json()
    assert [s["id"] for s in page["items"]] == ids[::-1][:3]
    rest = api.get(f"/api/sessions?limit=3&cursor={page['next_cursor']}").json()
    assert [s["id"] for s in rest["items"]] == ids[::-1][3:] and rest["next_cursor"] is None


def test_the_session_detail_shows_window_trigger_and_totals(api, small_session):
    d = api.get(f"/api/sessions/{small_session['id']}").json()
    assert d["window"] > 0 and d["window_source"]
    assert d["trigger"]["fired"] is False and "not triggered" in d["trigger"]["reason"]
    assert d["context_by_category"]["total"] == d["context_tokens"]
    assert d["pending_run"] is None and d["policy_name"] == "default"


@pytest.mark.postgres
def test_deleting_a_session_removes_history_runs_and_archive(api, small_session):
    sid = small_session["id"]
    api.post(f"/api/sessions/{sid}/compactions", {})
    assert StoredArchiveEntry.objects.filter(session_id=sid).exists()
    assert api.delete(f"/api/sessions/{sid}").status_code == 204
    assert api.get(f"/api/sessions/{sid}").status_code == 404
    assert not StoredMessage.objects.filter(session_id=sid).exists()
    assert not CompactionRun.objects.filter(session_id=sid).exists()
    assert not StoredArchiveEntry.objects.filter(session_id=sid).exists()
    assert api.delete(f"/api/sessions/{sid}").status_code == 404


def test_a_session_can_follow_its_own_policy(api, small_session):
    sid = small_session["id"]
    pid = api.post("/api/policies", {"name": "tight", "policy": tokens_policy(500)}).json()["id"]
    d = api.put(f"/api/sessions/{sid}/policy", {"policy_id": pid}).json()
    assert d["policy_id"] == pid and d["policy_name"] == "tight" and d["trigger"]["fired"] is True
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "go on"}]}).json()
    assert r["compaction"]["created"] is True
    assert api.get(f"/api/runs/{r['compaction']['run_id']}").json()["policy_id"] == pid
    cleared = api.put(f"/api/sessions/{sid}/policy", {"policy_id": None}).json()
    assert cleared["policy_id"] is None and cleared["policy_name"] == "default"


def test_an_oversized_tool_result_is_truncated_in_the_context_and_kept_whole_in_history_and_archive(api,
                                                                                                   small_session):
    sid = small_session["id"]
    big = "\n".join(f"line {i}: " + "x" * 80 for i in range(3000))  # ~260k characters
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c_big", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"cat log\"}"}}]}
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [call, {"role": "tool", "tool_call_id": "c_big",
                                                                       "content": big}]})
    assert r.status_code == 201, r.content
    live = api.get(f"/api/sessions/{sid}/context").json()["messages"][-1]
    assert live["tool_call_id"] == "c_big" and len(live["content"]) < len(big) // 4
    assert "line 0:" in live["content"] and "line 2999:" in live["content"]  # head and tail kept
    history = api.get(f"/api/sessions/{sid}/messages?limit=500").json()["items"]
    assert history[-1]["message"]["content"] == big
    entries = api.get(f"/api/sessions/{sid}/archive").json()["items"]
    assert [e["kind"] for e in entries] == ["offloaded"]
    assert api.get(entries[0]["url"]).json()["items"][0]["message"]["content"] == big
    detail = api.get(f"/api/sessions/{sid}").json()
    assert detail["context_tokens"] < detail["history_tokens"]
    assert api.get(f"/api/sessions/{sid}/archive/replay").json()["matches_history"] is True


@pytest.mark.postgres
def test_an_append_past_the_usable_window_queues_a_run_even_when_the_trigger_cannot_fire(api, project):
    """A trigger above the window (eino's 160k at a 3,000-token window) never fires; the
    overflow guard compacts the stored context anyway, so the next context fits."""
    data = get_preset("eino").to_json() | {"context_window": 3000}
    api.post("/api/policies", {"name": "eino-small", "policy": data, "activate": True})
    sid = api.post("/api/sessions", {"messages": chat(2)}).json()["session"]["id"]
    loud = api.post(f"/api/sessions/{sid}/messages", {"messages": chat(12, tag="more")[1:]}).json()
    assert loud["trigger"]["fired"] is False
    ref = loud["compaction"]
    assert ref is not None and ref["created"] is True
    run = api.get(ref["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    ctx = api.get(f"/api/sessions/{sid}/context").json()
    assert ctx["compactions"] == 1 and ctx["tokens"]["total"] <= 3000
