"""Sync fallback: when a run cannot be enqueued (broker down, queue full)
it executes inline in the request that needed it, is recorded the same way, and the
response says so. Tested with the broker stopped: the publisher points at a Redis port
nothing listens on (real commits, so the on-commit enqueue really runs)."""
from __future__ import annotations

import kombu.pools
import pytest

from dashboard.celery import app
from dashboard.models import CompactionRun, RunStatus
from tests.service.helpers import chat

DEAD_BROKER = "redis://127.0.0.1:6390/0"


@pytest.fixture
def broker_down(transactional_db, settings):
    """Real (non-eager) publishing to a broker nobody listens on."""
    saved = (app.conf.CELERY_BROKER_URL, app.conf.CELERY_BROKER_TRANSPORT_OPTIONS)

    def use(url, options):
        app.conf.CELERY_TASK_ALWAYS_EAGER = False
        app.conf.CELERY_BROKER_URL = url
        app.conf.CELERY_BROKER_TRANSPORT_OPTIONS = options
        kombu.pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    settings.CELERY_BROKER_URL = DEAD_BROKER
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.RUN_ENQUEUE_RETRIES = 0
    use(DEAD_BROKER, {"max_retries": 0})
    yield
    use(*saved)
    app.conf.CELERY_TASK_ALWAYS_EAGER = True


def test_a_forced_run_with_the_broker_down_runs_inline_and_loses_nothing(live_api, broker_down):
    messages = chat(10)
    r = live_api.post("/api/sessions", {"messages": messages, "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    before = live_api.get(f"/api/sessions/{sid}/context").json()

    r = live_api.post(f"/api/sessions/{sid}/compactions", {"reason": "broker is down"})
    assert r.status_code == 200, r.content
    ref = r.json()
    assert ref["inline"] is True and ref["status"] == "succeeded" and ref["created"] is True

    run = live_api.get(ref["status_url"]).json()
    assert run["status"] == "succeeded" and run["inline"] is True, run["error"]
    assert "broker unavailable" in run["inline_reason"]
    kinds = [e["kind"] for e in run["events"]]
    assert kinds[:3] == ["queued", "inline", "started"] and kinds[-1] == "succeeded"
    assert run["tokens_after"]["total"] < run["tokens_before"]["total"] == before["tokens"]["total"]

    after = live_api.get(f"/api/sessions/{sid}/context").json()
    assert after["compactions"] == 1 and after["version"] > before["version"]
    replay = live_api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True and replay["messages"] == messages
    detail = live_api.get(f"/api/sessions/{sid}").json()
    assert detail["pending_run"] is None and detail["active_run_id"] is None


def test_an_append_whose_trigger_fires_with_the_broker_down_compacts_inline(live_api, broker_down):
    r = live_api.post("/api/policies", {"name": "low", "activate": True, "policy": {
        "trigger": {"kind": "messages", "threshold": 30}, "reduction": {"enabled": False},
        "landing": {"min_freed": 0}}})  # a small session: summarize, do not wait for more tokens
    assert r.status_code == 201, r.content
    messages = chat(7)
    r = live_api.post("/api/sessions", {"messages": messages, "auto_compact": False})
    sid = r.json()["session"]["id"]
    extra = chat(2, tag="x")[1:]
    r = live_api.post(f"/api/sessions/{sid}/messages", {"messages": extra})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["trigger"]["fired"] is True
    assert body["compaction"]["inline"] is True and body["compaction"]["status"] == "succeeded"
    run = CompactionRun.objects.get(pk=body["compaction"]["run_id"])
    assert run.inline and run.trigger == "auto" and run.status == RunStatus.SUCCEEDED
    replay = live_api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True and replay["messages"] == messages + extra


def test_a_full_queue_runs_the_compaction_inline_without_asking_the_broker(live_api, broker_down, settings, project):
    settings.RUN_QUEUE_MAX = 1
    r = live_api.post("/api/sessions", {"messages": chat(3, tag="other"), "auto_compact": False})
    other = r.json()["session"]["id"]
    # a run waiting in the queue (its worker is busy elsewhere)
    CompactionRun.objects.create(project_id=project.pk, session_id=other, trigger="api", status=RunStatus.QUEUED)
    r = live_api.post("/api/sessions", {"messages": chat(8), "auto_compact": False})
    sid = r.json()["session"]["id"]
    r = live_api.post(f"/api/sessions/{sid}/compactions", {})
    assert r.status_code == 200, r.content
    run = live_api.get(r.json()["status_url"]).json()
    assert run["inline"] is True and run["status"] == "succeeded"
    assert run["inline_reason"].startswith("queue full: 1 runs are waiting")


def test_runs_are_enqueued_normally_when_the_broker_is_up(api, small_session):
    r = api.post(f"/api/sessions/{small_session['id']}/compactions", {})
    assert r.status_code == 202 and r.json()["inline"] is False
    run = api.get(r.json()["status_url"]).json()
    assert run["inline"] is False and run["inline_reason"] == "" and run["status"] == "succeeded"
