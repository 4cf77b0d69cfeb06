"""Compaction runs executed inline (the worker-process tests are in test_worker.py)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from compaction import Compactor, Policy, get_preset
from compaction.messages import Message
from dashboard.models import CompactionRun, Session, SessionContext, StoredArchiveEntry
from dashboard.services import runs as run_service
from dashboard.services.archive import BufferedArchive
from dashboard.services.common import counter_for
from tests.service.helpers import chat, llm_policy
from tests.support.llm_server import error, ok

# PostgreSQL pass: the run's claim and commit: row locks and batched writes
pytestmark = pytest.mark.postgres


def force(api, sid, **body):
    r = api.post(f"/api/sessions/{sid}/compactions", body)
    assert r.status_code == 202, r.content
    return r.json()


def test_forcing_a_compaction_answers_202_with_a_run_id_and_the_run_shrinks_the_context(api, small_session):
    sid = small_session["id"]
    before = api.get(f"/api/sessions/{sid}/context").json()
    ref = force(api, sid, reason="before the long step")
    assert ref["status_url"] == f"/api/runs/{ref['run_id']}" and ref["created"] is True
    run = api.get(ref["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    assert run["trigger"] == "api" and run["reason"] == "before the long step"
    assert run["tokens_after"]["total"] < run["tokens_before"]["total"] == before["tokens"]["total"]
    assert run["summary"] and run["model"] and run["ledger"]
    assert {e["kind"] for e in run["events"]} >= {"queued", "started", "before_summarize", "after_summarize",
                                                   "succeeded"}
    after = api.get(f"/api/sessions/{sid}/context").json()
    assert after["version"] > before["version"] and after["compactions"] == 1
    assert after["tokens"]["total"] == run["tokens_after"]["total"]
    # one count of the context everywhere: the messages sent. The user messages a summary re-inserts
    # travel inside the summary's turn, so the engine holds more items than are sent.
    assert after["message_count"] == run["messages_after"] == len(after["messages"])
    assert run["messages_before"] == before["message_count"] == len(before["messages"])
    items = SessionContext.objects.get(session_id=sid).load_items()
    assert len(items) > len(after["messages"]) and any(i.get("meta", {}).get("join_summary") for i in items)
    assert len(after["messages"]) < len(before["messages"])
    assert any(run["summary"][:40] in str(m.get("content")) for m in after["messages"])
    detail = api.get(f"/api/sessions/{sid}").json()
    assert detail["compaction_count"] == 1 and detail["context_tokens"] == after["tokens"]["total"]
    assert detail["context_messages"] == len(after["messages"])
    assert detail["message_count"] == small_session["message_count"]  # the history keeps everything


def test_policy_overrides_in_the_force_request_are_used_and_recorded(api, small_session):
    ref = force(api, small_session["id"], overrides={"cut.keep_messages": 2})
    run = api.get(ref["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    assert run["overrides"] == {"cut.keep_messages": 2}
    assert run["policy_snapshot"]["cut"]["keep_messages"] == 2


def test_an_invalid_override_is_refused_with_422_naming_the_setting(api, small_session):
    r = api.post(f"/api/sessions/{small_session['id']}/compactions", {"overrides": {"cut.keep_fraction": 7}})
    assert r.status_code == 422
    assert r.json()["field"] == "cut.keep_fraction"
    bad_key = api.post(f"/api/sessions/{small_session['id']}/compactions", {"overrides": {"cut.nope": 1}})
    assert bad_key.status_code == 422 and bad_key.json()["field"] == "cut.nope"
    assert CompactionRun.objects.count() == 0


def test_an_auto_run_whose_trigger_no_longer_fires_is_skipped_and_says_why(api, small_session,
                                                                          django_capture_on_commit_callbacks):
    session = Session.objects.get(pk=small_session["id"])
    with django_capture_on_commit_callbacks(execute=True):
        run = run_service.request_run(session, trigger="auto", force=False, reason="test")
    run.refresh_from_db()
    assert run.status == "skipped"
    assert "not triggered" in run.error
    assert SessionContext.objects.get(session=session).version == 1


def test_running_a_finished_run_again_does_nothing(api, small_session):
    ref = force(api, small_session["id"])
    session = Session.objects.get(pk=small_session["id"])
    version = SessionContext.objects.get(session=session).version
    assert run_service.execute(ref["run_id"]) == "done"
    assert run_service.execute(ref["run_id"]) == "done"
    assert SessionContext.objects.get(session=session).version == version
    assert StoredArchiveEntry.objects.filter(run_id=ref["run_id"]).count() == len(api.get(ref["status_url"]).json()["archive_refs"])
    assert Session.objects.get(pk=session.pk).compaction_count == 1


def test_a_duplicate_task_for_a_run_that_is_executing_elsewhere_does_nothing(api, small_session):
    session = Session.objects.get(pk=small_session["id"])
    run = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                       policy_snapshot=llm_policy_stub())
    first = run_service.claim(run.pk)
    assert first.state == "claimed"
    assert run_service.claim(run.pk).state == "running_elsewhere"
    assert run_service.execute(run.pk) == "running_elsewhere"


def llm_policy_stub() -> dict:
    return get_preset("default").to_json()


def test_a_second_run_of_a_session_waits_while_one_is_executing(api, small_session):
    session = Session.objects.get(pk=small_session["id"])
    a = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                     policy_snapshot=llm_policy_stub())
    b = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                     policy_snapshot=llm_policy_stub())
    assert run_service.claim(a.pk).state == "claimed"
    assert run_service.claim(b.pk).state == "busy"
    b.refresh_from_db()
    assert b.status == "queued"


def test_messages_appended_while_a_run_executes_stay_after_the_compacted_prefix(api, small_session):
    sid = small_session["id"]
    session = Session.objects.get(pk=sid)
    run = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                       policy_snapshot=llm_policy_stub())
    c = run_service.claim(run.pk)  # the snapshot is taken here
    late = [{"role": "user", "content": "late question"}, {"role": "assistant", "content": "late answer"}]
    assert api.post(f"/api/sessions/{sid}/messages", {"messages": late, "auto_compact": False}).status_code == 201
    # finish the run as the worker would, from the snapshot it claimed
    policy = Policy.load(c.run.policy_snapshot)
    archive = BufferedArchive()
    outcome = Compactor(policy, archive=archive, session_id=str(sid)).compact(
        [Message.from_dict(i) for i in c.items], force=True)
    assert run_service.commit(c.run, c.token, c.items, outcome, archive, counter_for(policy), 0.0) == "succeeded"
    ctx = api.get(f"/api/sessions/{sid}/context").json()
    assert ctx["messages"][-2:] == late
    assert ctx["message_count"] == outcome.messages_after + 2
    run.refresh_from_db()
    assert run.appended_during_run == 2
    replay = api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True and replay["messages"][-2:] == late


def test_an_llm_failure_leaves_the_session_unchanged_and_the_run_records_the_cause(api, small_session, llm_server):
    sid = small_session["id"]
    llm_server.script(error(500, "the model is overloaded"))
    before = api.get(f"/api/sessions/{sid}/context").json()
    ref = force(api, sid, policy=llm_policy(llm_server))
    run = api.get(ref["status_url"]).json()
    assert run["status"] == "failed"
    assert run["error_kind"] == "summary_error"
    assert "overloaded" in run["error"] or "500" in run["error"]
    assert run["attempts"] and len(llm_server.requests) == 1
    assert api.get(f"/api/sessions/{sid}/context").json() == before
    assert StoredArchiveEntry.objects.count() == 0
    detail = api.get(f"/api/sessions/{sid}").json()
    assert detail["compaction_count"] == 0 and detail["active_run_id"] is None


def test_a_summary_from_the_llm_server_lands_in_the_context(api, small_session, llm_server):
    llm_server.script(ok("GOALS: inspect modules. STATE: module 7 done. NEXT: report."))
    ref = force(api, small_session["id"], policy=llm_policy(llm_server))
    run = api.get(ref["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    assert "module 7 done" in run["summary"]
    assert run["model"] == "openai/scripted"
    ctx = api.get(f"/api/sessions/{small_session['id']}/context").json()
    assert any("module 7 done" in str(m.get("content")) for m in ctx["messages"])
    sent = llm_server.requests[0].messages
    assert any("module_0.py" in str(m.get("content")) for m in sent)


def test_the_runs_of_a_session_are_listed_newest_first_with_a_cursor(api, small_session):
    sid = small_session["id"]
    ids = [force(api, sid)["run_id"] for _ in range(3)]
    page = api.get(f"/api/sessions/{sid}/runs?limit=2").json()
    assert [r["id"] for r in page["items"]] == ids[::-1][:2]
    rest = api.get(f"/api/sessions/{sid}/runs?limit=2&cursor={page['next_cursor']}").json()
    assert [r["id"] for r in rest["items"]] == ids[:1] and rest["next_cursor"] is None


def test_a_second_forced_run_folds_the_previous_summary(api):
    r = api.post("/api/sessions", {"messages": chat(12), "auto_compact": False})
    sid = r.json()["session"]["id"]
    force(api, sid)
    api.post(f"/api/sessions/{sid}/messages", {"messages": chat(6, tag="b")[1:], "auto_compact": False})
    second = api.get(force(api, sid)["status_url"]).json()
    assert second["status"] == "succeeded", second["error"]
    kinds = [e["kind"] for e in api.get(f"/api/sessions/{sid}/archive").json()["items"]]
    assert "previous_summary" in kinds
    replay = api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True
    assert replay["count"] == api.get(f"/api/sessions/{sid}").json()["message_count"]


def _stale(run_id: int) -> None:
    CompactionRun.objects.filter(pk=run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=10))


def test_a_run_whose_worker_died_is_queued_again_and_completes_once(api, small_session,
                                                                     django_capture_on_commit_callbacks):
    session = Session.objects.get(pk=small_session["id"])
    run = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                       policy_snapshot=llm_policy_stub())
    assert run_service.claim(run.pk).state == "claimed"  # ...and the worker dies here
    _stale(run.pk)
    with django_capture_on_commit_callbacks(execute=True):
        counts = run_service.recover()
    assert counts["requeued"] == 1
    run.refresh_from_db()
    assert run.status == "succeeded" and run.deliveries == 2
    assert Session.objects.get(pk=session.pk).compaction_count == 1
    kinds = list(run.events.values_list("kind", flat=True))
    assert kinds.count("requeued") == 1 and kinds.count("succeeded") == 1


def test_a_run_that_keeps_losing_its_worker_fails_and_leaves_the_session_unchanged(api, small_session, settings,
                                                                                   django_capture_on_commit_callbacks):
    settings.RUN_MAX_DELIVERIES = 2
    session = Session.objects.get(pk=small_session["id"])
    before = api.get(f"/api/sessions/{session.pk}/context").json()
    run = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                       policy_snapshot=llm_policy_stub())
    for _ in range(2):
        CompactionRun.objects.filter(pk=run.pk).update(status="queued")
        assert run_service.claim(run.pk).state == "claimed"
        _stale(run.pk)
    with django_capture_on_commit_callbacks(execute=True):
        assert run_service.recover()["failed"] == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.error_kind == "worker_lost" and "2 times" in run.error
    assert api.get(f"/api/sessions/{session.pk}/context").json() == before
    assert Session.objects.get(pk=session.pk).active_run_id is None
