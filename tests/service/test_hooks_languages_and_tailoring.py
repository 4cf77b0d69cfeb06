"""Hooks and language in stored policies, and the tailored context served by the context
endpoint."""
from __future__ import annotations

import pytest

from compaction.hooks import register_hook, unregister_hook
from tests.service.helpers import chat


@pytest.mark.parametrize("hooks, field", [
    ({"pre_summary": ["redact_secrets", "no_such_hook"]}, "hooks.pre_summary.1"),
    ({"post_summary": "no_such_hook"}, "hooks.post_summary.0"),
    ({"input_builder": "no_such_hook"}, "hooks.input_builder"),
    ({"tool_call_formatter": "no_such_hook"}, "hooks.tool_call_formatter"),
    ({"tool_result_formatter": "no_such_hook"}, "hooks.tool_result_formatter"),
])
def test_a_policy_naming_an_unregistered_hook_gets_422_naming_the_field(api, hooks, field):
    r = api.post("/api/policies", {"name": "bad hooks", "policy": {"hooks": hooks}})
    assert r.status_code == 422, r.content
    body = r.json()
    assert body["field"] == field and "no_such_hook" in body["detail"] and "registered" in body["detail"]
    assert api.get("/api/policies").json()["items"] == []


def test_unknown_hooks_in_updates_overrides_and_forced_runs_are_refused_too(api, small_session):
    r = api.post("/api/policies", {"name": "ok", "policy": {"hooks": {"pre_summary": ["strip_ansi"]}}})
    assert r.status_code == 201, r.content
    pid = r.json()["id"]
    r = api.put(f"/api/policies/{pid}", {"overrides": {"hooks.post_summary": ["nope"]}})
    assert r.status_code == 422 and r.json()["field"] == "hooks.post_summary.0"
    r = api.post(f"/api/sessions/{small_session['id']}/compactions",
                 {"overrides": {"hooks.input_builder": "nope"}})
    assert r.status_code == 422 and r.json()["field"] == "hooks.input_builder"
    r = api.post(f"/api/sessions/{small_session['id']}/compactions", {"policy": {"hooks": {"pre_summary": "nope"}}})
    assert r.status_code == 422 and r.json()["field"] == "hooks.pre_summary.0"


def test_registered_hooks_and_a_language_are_accepted_and_used_by_runs(api, small_session):
    seen = []

    def mark(text: str) -> str:
        seen.append(len(text))
        return text + "\n[checked by the service test hook]"

    register_hook("post_summary", "service_test_mark", mark, replace=True)
    try:
        policy = {"language": "zh", "reduction": {"enabled": False},
                  "hooks": {"pre_summary": ["redact_secrets", "collapse_whitespace"],
                            "post_summary": "service_test_mark", "tool_result_formatter": "first_line"}}
        r = api.post("/api/policies", {"name": "zh hooks", "policy": policy})
        assert r.status_code == 201, r.content
        stored = r.json()["policy"]
        assert stored["language"] == "zh" and stored["finalize"]["language"] == "zh"
        assert stored["hooks"]["post_summary"] == ["service_test_mark"]
        r = api.put(f"/api/sessions/{small_session['id']}/policy", {"policy_id": r.json()["id"]})
        assert r.status_code == 200
        r = api.post(f"/api/sessions/{small_session['id']}/compactions", {})
        run = api.get(r.json()["status_url"]).json()
        assert run["status"] == "succeeded", run["error"]
        assert seen and run["summary"].endswith("[checked by the service test hook]")
        ctx = api.get(f"/api/sessions/{small_session['id']}/context").json()
        summary_turn = next(m for m in ctx["messages"] if "[checked by the service test hook]" in str(m["content"]))
        assert any("\u4e00" <= ch <= "\u9fff" for ch in summary_turn["content"])  # the Chinese preamble
    finally:
        unregister_hook("post_summary", "service_test_mark")


def test_an_unknown_language_gets_422_naming_the_field(api):
    r = api.post("/api/policies", {"name": "xx", "policy": {"language": "xx"}})
    assert r.status_code == 422 and r.json()["field"] == "language" and "zh" in r.json()["detail"]


def test_the_hooks_endpoint_lists_the_registered_names_and_languages(api):
    body = api.get("/api/hooks").json()
    names = {(h["kind"], h["name"]) for h in body["hooks"]}
    assert {("pre_summary", "redact_secrets"), ("input_builder", "single_user_message"),
            ("tool_result_formatter", "head_tail_2000")} <= names
    assert {lang["code"] for lang in body["languages"]} >= {"en", "zh"}
    assert "post_summary" in body["kinds"]


def test_the_context_endpoint_serves_the_tailored_context_when_the_policy_tailors(api):
    window, reserve = 6000, 1000
    r = api.post("/api/policies", {"name": "tailor", "activate": True, "policy": {
        "context_window": window, "summarize": False, "reduction": {"enabled": False},
        "trigger": {"kind": "tokens", "threshold": 3000},
        "tailoring": {"enabled": True, "reserved_output_tokens": reserve}}})
    assert r.status_code == 201, r.content
    messages = chat(12)
    r = api.post("/api/sessions", {"messages": messages, "auto_compact": False})
    sid = r.json()["session"]["id"]
    before = api.get(f"/api/sessions/{sid}/context").json()
    assert before["tokens"]["total"] > window - reserve
    r = api.post(f"/api/sessions/{sid}/compactions", {})
    run = api.get(r.json()["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    assert any(e["kind"] == "tailor" for e in run["events"])
    after = api.get(f"/api/sessions/{sid}/context").json()
    assert after["tokens"]["total"] <= window - reserve < before["tokens"]["total"]
    assert after["messages"][0] == messages[0]                 # the system message stays
    assert after["messages"][-1] == messages[-1]               # so does the latest turn
    assert len(after["messages"]) == run["messages_after"] < len(messages)
    assert after["tokens"]["total"] == run["tokens_after"]["total"]
    replay = api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True and replay["messages"] == messages
