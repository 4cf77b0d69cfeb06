"""Dry runs of a policy over a stored session."""
from __future__ import annotations

from compaction import simulate
from dashboard.models import CompactionRun
from tests.service.helpers import chat


def test_simulate_reports_what_the_cli_reports_and_writes_nothing(api):
    msgs = chat(30)
    sid = api.post("/api/sessions", {"messages": msgs, "auto_compact": False}).json()["session"]["id"]
    policy = {"trigger": {"kind": "tokens", "threshold": 3000}, "cut": {"keep_messages": 4}}
    r = api.post(f"/api/sessions/{sid}/simulate", {"policy": policy})
    assert r.status_code == 200, r.content
    report = r.json()["report"]
    expected = simulate(msgs, r.json()["policy"])
    expected.pop("_session", None)
    assert report["compactions"] and len(report["compactions"]) == len(expected["compactions"])
    assert {k for k in expected} <= set(report)
    # needed-context recall, baselines and cache figures; what was needed depends on the history alone
    assert set(report["lookahead"]) == set(expected["lookahead"])
    assert report["lookahead"]["needed"] == expected["lookahead"]["needed"] > 0
    assert CompactionRun.objects.count() == 0
    assert api.get(f"/api/sessions/{sid}").json()["context_version"] == 1


def test_simulate_accepts_a_preset_or_a_stored_policy(api, small_session):
    sid = small_session["id"]
    assert api.post(f"/api/sessions/{sid}/simulate", {"preset": "trpc"}).json()["policy"]["name"] == "trpc"
    pid = api.post("/api/policies", {"name": "mine", "preset": "sagents"}).json()["id"]
    assert api.post(f"/api/sessions/{sid}/simulate", {"policy_id": pid}).json()["policy"]["name"] == "sagents"
    bad = api.post(f"/api/sessions/{sid}/simulate", {"preset": "nope"})
    assert bad.status_code == 422 and bad.json()["field"] == "preset"


def test_two_sessions_with_the_same_history_simulate_to_the_same_report(api):
    """Archive entry ids hash the replay's session id and summaries quote them: a replay named
    after the session's key counted different tokens for the same messages."""
    msgs = chat(30)
    policy = {"trigger": {"kind": "tokens", "threshold": 3000}, "cut": {"keep_messages": 4}}
    reports = []
    for _ in range(2):
        sid = api.post("/api/sessions", {"messages": msgs, "auto_compact": False}).json()["session"]["id"]
        api.post("/api/sessions", {"messages": chat(3), "auto_compact": False})  # the next key is not adjacent
        reports.append(api.post(f"/api/sessions/{sid}/simulate", {"policy": policy}).json()["report"])
    assert reports[0]["compactions"]
    assert [c["tokens_after"] for c in reports[0]["compactions"]] == [c["tokens_after"] for c in reports[1]["compactions"]]
    assert reports[0]["final_context_tokens"] == reports[1]["final_context_tokens"]
