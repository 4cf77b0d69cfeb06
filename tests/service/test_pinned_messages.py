"""Pinning over the API: a message marked at import or append stays verbatim through a
compaction; the flag never reaches the stored message or the context sent to a provider;
a pin that names no message is refused and writes nothing."""
from __future__ import annotations

from dashboard.models import Session, StoredMessage
from tests.service.helpers import chat

NOTE = "Remember for the whole session: deploy only from the release branch."


def _force(api, sid, **body):
    r = api.post(f"/api/sessions/{sid}/compactions", {"overrides": {"cut.keep_messages": 2}, **body})
    assert r.status_code == 202, r.content
    run = api.get(r.json()["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    return run


def _contents(api, sid) -> list:
    return [m.get("content") for m in api.get(f"/api/sessions/{sid}/context").json()["messages"]]


def test_a_message_pinned_beside_its_fields_at_import_survives_a_compaction(api):
    messages = chat(8)
    messages.insert(1, {"role": "user", "content": NOTE, "pinned": True})
    r = api.post("/api/sessions", {"messages": messages, "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    assert "pinned" not in StoredMessage.objects.get(session_id=sid, position=1).raw
    _force(api, sid)
    contents = _contents(api, sid)
    assert NOTE in contents
    assert chat(8)[1]["content"] not in contents   # an unpinned message of the same age was summarized
    assert all("pinned" not in m for m in api.get(f"/api/sessions/{sid}/context").json()["messages"])


def test_a_message_pinned_by_index_in_an_append_survives_a_compaction(api, small_session):
    sid = small_session["id"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [
        {"role": "user", "content": "unpinned question"}, {"role": "user", "content": NOTE}], "pinned": [1]})
    assert r.status_code == 201, r.content
    api.post(f"/api/sessions/{sid}/messages", {"messages": chat(6, tag="later")[1:]})
    _force(api, sid)
    contents = _contents(api, sid)
    assert NOTE in contents and "unpinned question" not in contents


def test_a_pin_outside_the_request_is_refused_naming_the_field_and_writes_nothing(api, small_session):
    sid = small_session["id"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "hi"}], "pinned": [3]})
    assert r.status_code == 422
    assert r.json()["field"] == "pinned[0]" and "outside" in r.json()["detail"]
    assert Session.objects.get(pk=sid).message_count == small_session["message_count"]


def test_a_pinned_flag_that_is_not_a_boolean_is_refused(api, small_session):
    sid = small_session["id"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "hi", "pinned": "yes"}]})
    assert r.status_code == 422 and r.json()["field"] == "messages[0].pinned"
    assert Session.objects.get(pk=sid).message_count == small_session["message_count"]


def test_pins_need_openai_messages_at_import(api):
    anthropic = [{"role": "user", "content": [{"type": "text", "text": "hello"}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}]
    r = api.post("/api/sessions", {"messages": anthropic, "pinned": [0], "auto_compact": False})
    assert r.status_code == 422 and r.json()["field"] == "pinned"
    assert not Session.objects.exists()
