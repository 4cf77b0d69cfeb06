"""Search across the sessions of a project: scopes, ranking, hits naming their session and
pointing at the message in its timeline. Runs on SQLite (the fallback) and, with
DATABASE_URL set to PostgreSQL, on full-text search (the same assertions hold on both)."""
from __future__ import annotations

import pytest

from tests.service.conftest import Api
from tests.service.helpers import chat


def _session(api, title, messages):
    r = api.post("/api/sessions", {"messages": messages, "title": title, "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


@pytest.fixture
def three(api):
    a = _session(api, "billing", [{"role": "system", "content": "You are helpful."},
                                  {"role": "user", "content": "The invoice export crashed with a quota error."},
                                  {"role": "assistant", "content": "I will retry the invoice export café."}])
    b = _session(api, "deploys", [{"role": "user", "content": "quota quota: the deploy hit its quota again"},
                                  {"role": "assistant", "content": "Raising the deploy quota now."}])
    c = _session(api, "lunch", [{"role": "user", "content": "Order sandwiches for the team."}])
    return a, b, c


def test_all_sessions_are_searched_ranked_and_each_hit_names_its_session(api, three):
    a, b, c = three
    page = api.get("/api/search?q=quota").json()
    assert page["scope"] == "all_sessions"
    sessions = [h["session_id"] for h in page["items"]]
    assert set(sessions) == {a, b} and c not in sessions
    # the message saying "quota" three times in few words ranks first
    top = page["items"][0]
    assert (top["session_id"], top["position"], top["session_title"]) == (b, 0, "deploys")
    assert [h["score"] for h in page["items"]] == sorted((h["score"] for h in page["items"]), reverse=True)
    assert top["url"] == f"/sessions/{b}/?around=0#msg-0" and "quota" in top["snippet"]
    # every word must occur; words are matched case-insensitively; non-ASCII text is found
    assert [(h["session_id"], h["position"]) for h in api.get("/api/search?q=INVOICE+crashed").json()["items"]] == [(a, 1)]
    assert [h["position"] for h in api.get("/api/search?q=café").json()["items"]] == [2]
    assert api.get("/api/search?q=zebra").json()["items"] == []


def test_scopes_current_and_other_sessions(api, three):
    a, b, _c = three
    cur = api.get(f"/api/search?q=quota&scope=current_session&session_id={a}").json()["items"]
    assert {h["session_id"] for h in cur} == {a}
    other = api.get(f"/api/search?q=quota&scope=other_sessions&session_id={a}").json()["items"]
    assert {h["session_id"] for h in other} == {b}
    r = api.get("/api/search?q=quota&scope=other_sessions")
    assert r.status_code == 400 and "needs session_id" in r.json()["detail"]
    assert api.get("/api/search?q=quota&scope=everything").status_code in (400, 422)


def test_archived_originals_are_found_with_their_timeline_position(api):
    sid = _session(api, "compacted", chat(8))
    run = api.post(f"/api/sessions/{sid}/compactions", {}).json()
    assert api.get(run["status_url"]).json()["status"] == "succeeded"
    hits = api.get("/api/search?q=module_1.py&limit=50").json()["items"]
    archived = [h for h in hits if h["kind"] == "archive"]
    assert archived and all(h["session_id"] == sid and h["entry_id"] for h in archived)
    assert all(h["url"] == f"/sessions/{sid}/?around={h['position']}#msg-{h['position']}" for h in archived)


def test_another_projects_sessions_are_never_searched(api, three, client, other_project):
    theirs = Api(client, other_project.test_key, None)
    assert theirs.get("/api/search?q=quota").json()["items"] == []
    a = three[0]
    r = theirs.get(f"/api/search?q=quota&scope=current_session&session_id={a}")
    assert r.status_code == 404
