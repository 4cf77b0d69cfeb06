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
