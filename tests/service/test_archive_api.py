"""The archive: entries, paging through one entry, search, replay."""
from __future__ import annotations

import pytest

from tests.service.helpers import chat


@pytest.fixture
def compacted(api, small_session):
    sid = small_session["id"]
    run = api.post(f"/api/sessions/{sid}/compactions", {}).json()
    assert api.get(run["status_url"]).json()["status"] == "succeeded"
    return sid


def test_a_compaction_archives_the_evicted_originals(api, compacted):
    entries = api.get(f"/api/sessions/{compacted}/archive").json()["items"]
    assert [e["kind"] for e in entries] == ["evicted"]
    e = entries[0]
    assert e["item_count"] > 10 and len(e["content_hash"]) == 64 and e["url"] == f"/api/archive/{e['id']}"


def test_an_entry_is_read_with_offset_and_limit(api, compacted):
    entry = api.get(f"/api/sessions/{compacted}/archive").json()["items"][0]
    first = api.get(f"{entry['url']}?offset=0&limit=5").json()
    assert [i["index"] for i in first["items"]] == [0, 1, 2, 3, 4] and first["next_offset"] == 5
    assert first["items"][0]["message"]["role"] == "system" or first["items"][0]["ordinal"] is not None
    last = api.get(f"{entry['url']}?offset={entry['item_count'] - 2}&limit=5").json()
    assert len(last["items"]) == 2 and last["next_offset"] is None
    history = api.get(f"/api/sessions/{compacted}/messages?limit=500").json()["items"]
    for item in first["items"]:
        assert item["message"] == history[item["ordinal"]]["message"]


def test_search_finds_archived_text_and_points_at_the_item(api, compacted):
    page = api.get(f"/api/sessions/{compacted}/archive/search?q=MODULE_1.py").json()
    assert page["items"], page
    hit = page["items"][0]
    assert "module_1.py" in hit["snippet"].lower()
    item = api.get(hit["url"]).json()["items"][0]
    assert "module_1.py" in str(item["message"]).lower()
    assert api.get(f"/api/sessions/{compacted}/archive/search?q=zzz-not-there").json()["items"] == []


def test_replay_rebuilds_the_original_sequence_from_archive_and_context(api, compacted):
    replay = api.get(f"/api/sessions/{compacted}/archive/replay").json()
    history = [m["message"] for m in api.get(f"/api/sessions/{compacted}/messages?limit=500").json()["items"]]
    assert replay["matches_history"] is True
    assert replay["messages"] == history == chat(8)


def test_an_unknown_entry_is_404(api, compacted):
    assert api.get("/api/archive/ar_doesnotexist").status_code == 404
