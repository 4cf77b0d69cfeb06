"""An agent's archive tools answered by the service (``POST .../archive/tool-call``): a search
widened to the project's other sessions reads them, and never another project's sessions."""
from __future__ import annotations

import pytest

from tests.service.conftest import Api
from tests.service.helpers import chat


def _compacted(api, title: str) -> int:
    r = api.post("/api/sessions", {"messages": chat(8, tag=title), "title": title, "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    run = api.post(f"/api/sessions/{sid}/compactions", {}).json()
    assert api.get(run["status_url"]).json()["status"] == "succeeded"
    return sid


@pytest.fixture
def sessions(api, client, other_project, django_capture_on_commit_callbacks):
    theirs = Api(client, other_project.test_key, django_capture_on_commit_callbacks)
    return _compacted(api, "one"), _compacted(api, "two"), _compacted(theirs, "theirs")


def _search(api, sid: int, **arguments) -> dict:
    r = api.post(f"/api/sessions/{sid}/archive/tool-call", {"name": "session_search", "arguments": arguments})
    assert r.status_code == 200, r.content
    return r.json()


def test_a_widened_search_reads_the_projects_other_sessions_only(api, sessions):
    one, two, theirs = sessions
    mine = _search(api, one, query="module_1.py")
    assert mine["hits"] and {h["session_id"] for h in mine["hits"]} == {str(one)}
    both = _search(api, one, query="module_1.py", scope="all_sessions", limit=50)
    assert {h["session_id"] for h in both["hits"]} == {str(one), str(two)}
    others = _search(api, one, query="module_1.py", scope="other_sessions", limit=50)
    assert {h["session_id"] for h in others["hits"]} == {str(two)}
    assert str(theirs) not in {h["session_id"] for h in both["hits"] + others["hits"]}
    # a hit's handle loads the original back (arguments as the JSON text a model writes)
    hit = mine["hits"][0]
    r = api.post(f"/api/sessions/{one}/archive/tool-call",
                 {"name": "session_load", "arguments": f'{{"handle": "{hit["handle"]}", "field": "raw"}}'})
    assert r.status_code == 200, r.content
    assert r.json()["message_id"] == hit["message_id"] and "module_1.py" in r.json()["content"]


def test_bad_calls_are_answered_as_tool_errors_and_other_projects_sessions_are_not_found(api, sessions):
    one, _two, theirs = sessions
    assert "scope" in _search(api, one, query="x", scope="everything")["error"]
    r = api.post(f"/api/sessions/{one}/archive/tool-call", {"name": "rm_rf", "arguments": {}})
    assert r.status_code == 200 and "session_load and session_search" in r.json()["error"]
    r = api.post(f"/api/sessions/{theirs}/archive/tool-call", {"name": "session_search", "arguments": {"query": "x"}})
    assert r.status_code == 404
