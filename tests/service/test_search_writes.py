"""Search finds what every writer just stored: an import, an append, a compaction's archive,
a gateway call. On PostgreSQL the stored documents of migration 0025 are generated columns the
database writes itself, so these assert that no write path skips them (COPY, multi-row
INSERTs, single inserts); on SQLite the same assertions hold for the fallback. Also: when a
query matches more rows than are ranked, the most recently written ones are the ones ranked,
on both databases."""
from __future__ import annotations

import openai
import pytest
from django.test import Client as DjangoClient

from dashboard.selectors import search as sel
from tests.service.helpers import chat
from tests.support import gateway_writes
from tests.support.llm_server import ok

pytestmark = pytest.mark.postgres


def _found(api, q: str) -> list[tuple[str, int, int]]:
    r = api.get(f"/api/search?q={q}&limit=50")
    assert r.status_code == 200, r.content
    return [(h["kind"], h["session_id"], h["position"]) for h in r.json()["items"]]


def test_imports_appends_and_archives_are_searchable_at_once(api):
    r = api.post("/api/sessions", {"messages": [*chat(6), {"role": "user", "content": "check the walrus gauge"}],
                                   "title": "imported", "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    assert _found(api, "walrus") == [("message", sid, 25)]
    # many messages at once (a COPY on PostgreSQL) and then one
    more = [{"role": "assistant", "content": f"the pelican number {k} answered"} for k in range(5)]
    assert api.post(f"/api/sessions/{sid}/messages", {"messages": more}).status_code == 201
    assert api.post(f"/api/sessions/{sid}/messages",
                    {"messages": [{"role": "user", "content": "and the heron?"}]}).status_code == 201
    assert sorted(p for _k, _s, p in _found(api, "pelican")) == [26, 27, 28, 29, 30]
    assert _found(api, "heron") == [("message", sid, 31)]
    # a compaction's archive: the original of a message it took out is found as an archive hit
    assert not [h for h in _found(api, "module_2.py") if h[0] == "archive"]
    run = api.post(f"/api/sessions/{sid}/compactions", {}).json()
    assert api.get(run["status_url"]).json()["status"] == "succeeded"
    assert [h for h in _found(api, "module_2.py") if h[0] == "archive"]


def test_when_more_rows_match_than_are_ranked_the_newest_are_ranked(api, monkeypatch):
    monkeypatch.setattr(sel, "CANDIDATES", 3)
    older = api.post("/api/sessions", {"messages": [{"role": "user", "content": "otter otter otter"}],
                                       "title": "older", "auto_compact": False}).json()["session"]["id"]
    newer = api.post("/api/sessions", {"messages": [{"role": "user", "content": f"otter note {k}"} for k in range(4)],
                                       "title": "newer", "auto_compact": False}).json()["session"]["id"]
    # the older message would rank first (it says "otter" three times), but only the three
    # most recently written matches are ranked
    assert _found(api, "otter") == [("message", newer, 1), ("message", newer, 2), ("message", newer, 3)]
    monkeypatch.setattr(sel, "CANDIDATES", 10)
    assert _found(api, "otter")[0] == ("message", older, 0)


@pytest.fixture
def gateway(live_server, transactional_db, project, llm_server, settings):
    settings.GATEWAY_API_BASE = llm_server.api_base
    settings.GATEWAY_API_KEY = "operator-upstream-key"
    return live_server


def test_a_gateway_call_is_searchable_once_answered(gateway, project, llm_server):
    llm_server.script(ok("The capybara lives in Brazil."))
    oai = openai.OpenAI(base_url=gateway.url + "/v1", api_key=project.test_key, max_retries=0,
                        http_client=gateway_writes.http_client())
    answer = oai.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Where does the capybara live?"}])
    sid = int(answer.headers["x-compaction-session"])
    client = DjangoClient(HTTP_AUTHORIZATION=f"Bearer {project.test_key}")
    hits = client.get("/api/search?q=capybara").json()["items"]
    assert [(h["session_id"], h["position"], h["role"]) for h in hits] == [(sid, 0, "user"), (sid, 1, "assistant")]
