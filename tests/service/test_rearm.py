"""Hysteresis in the service: a run that finds too little to free (landing.min_freed) holds
automatic runs back until that many new tokens arrived, instead of one skipped run per append."""
from __future__ import annotations

from dashboard.models import CompactionRun, RunStatus, Session
from tests.service.helpers import chat

POLICY = {"context_window": 8000, "reserved_output_tokens": 0, "reduction": {"enabled": False},
          "trigger": {"kind": "messages", "threshold": 10}, "landing": {"min_freed": 2000}}


def append(api, sid: int, content: str) -> dict:
    r = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": content}]})
    assert r.status_code == 201, r.content
    return r.json()


def test_a_skipped_run_waits_for_the_minimum_of_new_tokens_before_the_next_automatic_run(api):
    assert api.post("/api/policies", {"name": "hysteresis", "activate": True, "policy": POLICY}).status_code == 201
    sid = api.post("/api/sessions", {"messages": chat(3, words=10), "auto_compact": False}).json()["session"]["id"]

    first = append(api, sid, "one more small step")
    assert first["trigger"]["fired"] and first["compaction"] is not None
    run = CompactionRun.objects.get(pk=first["compaction"]["run_id"])
    assert run.status == RunStatus.SKIPPED and "landing.min_freed" in run.error
    session = Session.objects.get(pk=sid)
    assert session.rearm_at_total == session.history_total + 2000

    # the trigger still says "fired", but no run is queued for a few more small messages
    for k in range(3):
        later = append(api, sid, f"another small step {k}")
        assert later["trigger"]["fired"] and later["compaction"] is None
    assert CompactionRun.objects.filter(session_id=sid).count() == 1

    # enough new tokens: automatic runs are armed again
    armed = append(api, sid, " ".join(f"detail{i}" for i in range(1500)))
    assert armed["compaction"] is not None and armed["compaction"]["created"] is True
    assert CompactionRun.objects.filter(session_id=sid).count() == 2

