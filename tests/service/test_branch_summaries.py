"""Branch summaries through the API: filter keys on import and append, per-key summaries
refreshed by runs (allowlist, cascade), retrieval with fallback."""
from __future__ import annotations

import json

from dashboard.models import CompactionRun, StoredMessage

SEARCH, CART = "shop/search", "shop/cart"


def keyed_chat(turns: int = 6) -> list[dict]:
    """An agent session whose tool traffic is keyed by branch; system and user turns are not."""
    msgs = [{"role": "system", "content": "You are a shopping agent."}]
    for i in range(turns):
        key = SEARCH if i % 2 == 0 else CART
        tool = "search_products" if key == SEARCH else "add_to_cart"
        cid = f"call_{i}"
        msgs.append({"role": "user", "content": f"Step {i}: handle request {i} " + "detail " * 40})
        msgs.append({"role": "assistant", "content": None, "filter_key": key, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps({"q": f"item {i}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "filter_key": key,
                     "content": f"{tool} result {i}: " + "row " * 60})
        msgs.append({"role": "assistant", "content": f"Done with step {i}. " + "note " * 30, "filter_key": key})
    return msgs


def without_keys(msgs: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "filter_key"} for m in msgs]


def make_session(api, branches: dict | None = None, messages: list[dict] | None = None, **body) -> int:
    policy = {"reduction": {"enabled": False}, "branches": branches or {}}
    r = api.post("/api/policies", {"name": f"branches-{json.dumps(branches, sort_keys=True)}", "policy": policy,
                                   "activate": True})
    assert r.status_code == 201, r.content
    r = api.post("/api/sessions", {"messages": messages or keyed_chat(), "auto_compact": False, **body})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def force(api, sid: int, **body) -> dict:
    r = api.post(f"/api/sessions/{sid}/compactions", body)
    assert r.status_code in (200, 202), r.content
    run = api.get(r.json()["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    return run


def summaries(api, sid: int, key: str | None = None) -> dict:
    r = api.get(f"/api/sessions/{sid}/summaries" + (f"?key={key}" if key is not None else ""))
    assert r.status_code == 200, r.content
    return r.json()


def test_filter_keys_beside_messages_are_stored_on_the_rows_and_never_in_the_message(api):
    sid = make_session(api)
    rows = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("filter_key", "raw"))
    assert [k for k, _ in rows][:4] == [None, None, SEARCH, SEARCH]
    assert all("filter_key" not in raw for _, raw in rows)
    page = api.get(f"/api/sessions/{sid}/messages?limit=3").json()["items"]
    assert [m["filter_key"] for m in page] == [None, None, SEARCH]
    replay = api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] and replay["messages"] == without_keys(keyed_chat())


def test_a_forced_run_keeps_a_summary_per_key_and_one_for_the_whole_session(api):
    sid = make_session(api)
    run = force(api, sid)
    assert set(run["result"]["branches"]["updated"]) == {SEARCH, CART, ""}
    data = summaries(api, sid, SEARCH)
    assert data["used"] == SEARCH and data["fallback"] == "exact" and data["requested"] == SEARCH
    assert "search_products" in data["summary"]["text"] and "add_to_cart" not in data["summary"]["text"]
    assert {k["key"] for k in data["keys"]} == {"", SEARCH, CART}
    assert data["summary"]["run_id"] == str(run["id"]) and data["position"] == len(keyed_chat())
    kinds = [e["kind"] for e in run["events"]]
    assert "before_branch_summary" in kinds and "after_branch_summary" in kinds


def test_a_missing_key_falls_back_to_the_whole_session_summary(api):
    sid = make_session(api)
    force(api, sid)
    for key in ("shop/toolbox", "other/tool", "shop/search2"):
        data = summaries(api, sid, key)
        assert data["used"] == "" and data["fallback"] == "whole_session", key
    whole = summaries(api, sid)
    assert whole["requested"] == "" and whole["used"] == "" and whole["fallback"] == "exact"
    # a descendant of a stored key is not the same key: it falls back too
    assert summaries(api, sid, SEARCH + "/web")["fallback"] == "whole_session"


def test_the_allowlist_is_segment_aware_and_blocks_other_branches(api):
    sid = make_session(api, {"allowlist": ["shop/search"]})
    force(api, sid)
    assert {k["key"] for k in summaries(api, sid)["keys"]} == {"", SEARCH}
    assert summaries(api, sid, CART)["fallback"] == "whole_session"


def test_an_empty_allowlist_without_cascade_keeps_no_summary_for_keyed_messages(api):
    msgs = [{"role": "system", "content": "agent"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 80} for i in range(8)]
    sid = make_session(api, {"allowlist": [], "cascade": False}, messages=msgs, filter_key=SEARCH)
    assert set(StoredMessage.objects.filter(session_id=sid).values_list("filter_key", flat=True)) == {SEARCH}
    run = force(api, sid)
    assert run["result"]["branches"]["updated"] == []
    data = summaries(api, sid, SEARCH)
    assert data["summary"] is None and data["used"] is None and data["fallback"] == "none" and data["keys"] == []


def test_without_cascade_a_branch_trigger_leaves_the_whole_session_summary_alone(api):
    msgs = [{"role": "system", "content": "agent"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 80} for i in range(8)]
    sid = make_session(api, {"cascade": False}, messages=msgs, filter_key=SEARCH)
    force(api, sid)
    assert [k["key"] for k in summaries(api, sid)["keys"]] == [SEARCH]
    assert summaries(api, sid)["fallback"] == "any"  # no whole-session summary: the newest of any key


def test_appended_keyed_messages_trigger_a_run_that_names_the_key_and_refreshes_that_branch(api):
    sid = make_session(api)
    force(api, sid)
    before = summaries(api, sid, CART)["summary"]["version"]
    extra = [{"role": "user", "content": "one more thing " + "word " * 50},
             {"role": "assistant", "content": "added it " + "word " * 50}]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": extra, "filter_key": CART})
    assert r.status_code == 201, r.content
    r = api.post(f"/api/sessions/{sid}/compactions", {"filter_key": CART})
    run = api.get(r.json()["status_url"]).json()
    assert run["filter_key"] == CART and run["status"] == "succeeded"
    assert run["result"]["branches"]["triggers"][0] == CART
    after = summaries(api, sid, CART)["summary"]
    assert after["version"] == before + 1 and after["covered"] == len(keyed_chat()) + 2
    assert list(StoredMessage.objects.filter(session_id=sid).order_by("-position")
                .values_list("filter_key", flat=True)[:2]) == [CART, CART]


def test_an_auto_run_triggered_by_a_keyed_append_records_the_key(api):
    # a tiny session frees little: no minimum, so the run summarizes rather than waits
    r = api.post("/api/policies", {"name": "low", "activate": True, "policy": {
        "trigger": {"kind": "messages", "threshold": 10}, "reduction": {"enabled": False},
        "landing": {"min_freed": 0}}})
    assert r.status_code == 201
    r = api.post("/api/sessions", {"messages": keyed_chat(3), "auto_compact": False})
    sid = r.json()["session"]["id"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [
        {"role": "user", "content": "next " * 30, "filter_key": "shop/search/web"}]})
    assert r.status_code == 201, r.content
    ref = r.json()["compaction"]
    assert ref is not None and ref["inline"] is False
    run = CompactionRun.objects.get(pk=ref["run_id"])
    assert run.filter_key == "shop/search/web" and run.status == "succeeded"


def test_bad_filter_keys_are_refused_with_422_naming_the_field(api, small_session):
    sid = small_session["id"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [
        {"role": "user", "content": "x", "filter_key": "shop//search"}]})
    assert r.status_code == 422 and "messages[0].filter_key" in r.json()["detail"]
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "x", "filter_key": 3}]})
    assert r.status_code == 422 and "filter_key" in r.json()["detail"]
    assert api.get(f"/api/sessions/{sid}/summaries?key=a//b").status_code == 422
    assert api.get(f"/api/sessions/{sid}").json()["message_count"] == small_session["message_count"]


def test_filter_keys_need_messages_that_map_one_to_one(api):
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}], "filter_key": "a/b"},
                         {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}],
            "system": "be brief", "format": "anthropic"}
    r = api.post("/api/sessions", body)
    assert r.status_code == 422 and "filter_key" in r.json()["detail"]


def test_sessions_without_filter_keys_keep_no_branch_summaries(api, small_session):
    force(api, small_session["id"])
    data = summaries(api, small_session["id"], "any/key")
    assert data["fallback"] == "none" and data["keys"] == []
    run = CompactionRun.objects.filter(session_id=small_session["id"]).latest("id")
    assert "branches" not in run.result
