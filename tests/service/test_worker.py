"""Runs executed by real `celery -A dashboard worker` processes, on the filesystem broker
and on Redis (db 3): completion, concurrency, and a worker killed mid-run."""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client

from dashboard.models import (
    CompactionRun,
    RunEvent,
    Session,
    SessionContext,
    StoredArchiveEntry,
    StoredMessage,
)
from dashboard.services.runs import request_run
from tests.service.helpers import chat, llm_policy, wait_for
from tests.support.llm_server import ok, slow

# PostgreSQL pass: real worker processes committing concurrently with the web side; a worker killed mid-run
pytestmark = pytest.mark.postgres

BROKERS = ["filesystem", pytest.param("redis", marks=pytest.mark.redis)]


def run_row(run_id: int) -> CompactionRun:
    return CompactionRun.objects.get(pk=run_id)


def finished(run_id: int):
    r = run_row(run_id)
    return r if r.status in ("succeeded", "failed", "skipped") else None


def new_session(api, turns: int = 10) -> int:
    r = api.post("/api/sessions", {"messages": chat(turns), "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


@pytest.mark.slow
@pytest.mark.parametrize("broker", BROKERS)
def test_a_forced_run_is_completed_by_a_worker_process(broker, start_worker, live_api):
    start_worker(broker)
    sid = new_session(live_api)
    r = live_api.post(f"/api/sessions/{sid}/compactions", {"reason": "from the test"})
    assert r.status_code == 202
    run_id = r.json()["run_id"]
    run = wait_for(lambda: finished(run_id), timeout=120, what="the worker to finish the run")
    assert run.status == "succeeded", run.error
    body = live_api.get(f"/api/runs/{run_id}").json()
    assert body["progress"]["step"] == "done" and body["deliveries"] == 1
    ctx = live_api.get(f"/api/sessions/{sid}/context").json()
    assert ctx["compactions"] == 1 and ctx["message_count"] == run.messages_after


@pytest.mark.slow
def test_a_run_inside_a_long_summary_call_shows_its_step_before_it_ends(start_worker, live_api, llm_server):
    """A run writes its progress only after RUN_PROGRESS_AFTER seconds, and then on every
    heartbeat: one waiting on a slow summarizer must show that it is summarizing while it
    waits, not only once it is done."""
    llm_server.script(slow(4.0, "SUMMARY: modules inspected, tests pass."))
    start_worker("filesystem")
    sid = new_session(live_api, turns=10)
    run = request_run(Session.objects.get(pk=sid), policy=llm_policy(llm_server), reason="slow summary")
    seen = wait_for(lambda: (lambda r: r if r.status == "running" and r.progress_step == "summarize" else None)(
        run_row(run.pk)), timeout=60, interval=0.05, what="the run to show its summarize step")
    assert seen.finished_at is None
    assert RunEvent.objects.filter(run_id=run.pk, kind="started").exists()
    done = wait_for(lambda: finished(run.pk), timeout=60, what="the run to finish")
    assert done.status == "succeeded", done.error
    assert done.progress_step == "done" and done.progress_attempt == 1
    kinds = list(RunEvent.objects.filter(run_id=run.pk).order_by("id").values_list("kind", flat=True))
    assert kinds[:2] == ["queued", "started"] and kinds[-1] == "succeeded"
    assert kinds.index("generate_summary") < kinds.index("succeeded")


@pytest.mark.slow
def test_concurrent_appends_while_forced_runs_execute_lose_and_reorder_nothing(start_worker, live_api, client,
                                                                              llm_server):
    # Summaries take 0.4 s each, so runs overlap the appends; two pool processes could
    # execute two runs at once if runs were not serialized per session.
    llm_server.script(*[slow(0.4, f"SUMMARY {i}: modules inspected, tests pass.") for i in range(40)])
    start_worker("filesystem", concurrency=2)
    sid = new_session(live_api, turns=6)
    initial = Session.objects.get(pk=sid).message_count
    policy = llm_policy(llm_server)
    policy["cut"]["keep_messages"] = 4
    threads_n, per_thread = 3, 24
    errors: list[str] = []

    def appender(t: int) -> None:
        c = Client()
        try:
            for i in range(per_thread):
                msgs = [{"role": "user", "content": f"thread {t} question {i}"},
                        {"role": "assistant", "content": f"thread {t} answer {i}"}]
                r = c.post(f"/api/sessions/{sid}/messages", {"messages": msgs, "auto_compact": False},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {live_api.key}")
                if r.status_code != 201:
                    errors.append(f"{t}/{i}: {r.status_code} {r.content[:200]!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    run_ids = []
    for k in range(5):
        # Several runs queued on one session at once (a forced run pending would absorb
        # another force through the API, so they are requested from the service).
        run = request_run(Session.objects.get(pk=sid), policy=policy, reason=f"run {k}")
        run_ids.append(run.pk)
        threads[k % threads_n].join(timeout=0.3)
    for th in threads:
        th.join()
    assert errors == []
    runs = [wait_for(lambda rid=rid: finished(rid), timeout=180, what=f"run {rid}") for rid in run_ids]
    assert all(r.status in ("succeeded", "skipped") for r in runs), [(r.status, r.error) for r in runs]
    assert sum(r.status == "succeeded" for r in runs) >= 2

    # never two runs executing on the session at once
    spans = []
    for r in runs:
        events = list(RunEvent.objects.filter(run=r).order_by("id"))
        start = next(e.created_at for e in events if e.kind == "started")
        end = next(e.created_at for e in events if e.kind in ("succeeded", "skipped", "failed"))
        spans.append((start, end, r.pk))
    spans.sort()
    for (_s1, e1, a), (s2, _e2, b) in zip(spans, spans[1:]):
        assert s2 >= e1, f"runs {a} and {b} overlapped"
    assert [rid for _, _, rid in spans] == sorted(run_ids)  # and they ran in the order they were asked for

    # no message lost or reordered
    total = initial + threads_n * per_thread * 2
    session = Session.objects.get(pk=sid)
    assert session.message_count == total
    positions = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("position", "raw"))
    assert [p for p, _ in positions] == list(range(total))
    for t in range(threads_n):
        mine = [raw["content"] for _, raw in positions if str(raw.get("content", "")).startswith(f"thread {t} ")]
        expected = [f"thread {t} {kind} {i}" for i in range(per_thread) for kind in ("question", "answer")]
        assert mine == expected
    items = SessionContext.objects.get(session_id=sid).load_items()
    ordinals = [i["ordinal"] for i in items if i["provenance"] == "original"]
    assert ordinals == sorted(ordinals) and len(set(ordinals)) == len(ordinals)
    replay = live_api.get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True and replay["count"] == total


@pytest.mark.slow
@pytest.mark.parametrize("broker", BROKERS)
def test_a_worker_killed_mid_run_is_replaced_and_the_run_completes_exactly_once(broker, start_worker, live_api,
                                                                              llm_server):
    # The first summary request hangs (the worker is killed while waiting for it); the
    # second, from the worker that takes over, answers.
    llm_server.script(slow(60, "NEVER DELIVERED"), ok("SUMMARY AFTER RESTART: modules 0-9 inspected."))
    first = start_worker(broker)
    sid = new_session(live_api)
    r = live_api.post(f"/api/sessions/{sid}/compactions", {"policy": llm_policy(llm_server)})
    run_id = r.json()["run_id"]
    wait_for(lambda: len(llm_server.requests) == 1 and run_row(run_id).status == "running", timeout=120,
             what="the summary request of the first worker")
    first.kill()
    assert run_row(run_id).status == "running"  # the dead worker left it mid-run
    start_worker(broker)
    run = wait_for(lambda: finished(run_id), timeout=120, what="the second worker to finish the run")
    assert run.status == "succeeded", run.error
    assert run.deliveries == 2
    assert "AFTER RESTART" in run.summary and len(llm_server.requests) == 2
    kinds = list(RunEvent.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds.count("started") == 2 and kinds.count("succeeded") == 1 and "requeued" in kinds
    # exactly once: one summary in the context, one set of archive entries, one compaction
    ctx = live_api.get(f"/api/sessions/{sid}/context").json()
    summaries = [m for m in ctx["messages"] if "AFTER RESTART" in str(m.get("content"))]
    assert len(summaries) == 1 and not any("NEVER" in str(m.get("content")) for m in ctx["messages"])
    assert ctx["compactions"] == 1
    assert sorted(StoredArchiveEntry.objects.filter(session_id=sid).values_list("entry_id", flat=True)) == sorted(
        run.archive_refs)
    assert live_api.get(f"/api/sessions/{sid}/archive/replay").json()["matches_history"] is True
