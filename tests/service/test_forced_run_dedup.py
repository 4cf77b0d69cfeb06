"""Forcing a compaction while a forced run of the session is pending shares that run.

The runs here stay queued: tasks go to a filesystem broker that no worker reads, as when
the workers are busy or slow."""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client

from dashboard.brokers import filesystem_transport_options
from dashboard.celery import use_broker
from dashboard.models import CompactionRun, RunStatus, Session
from dashboard.services.runs import force_run, request_run
from dashboard.services.runs import request as run_requests
from tests.service.helpers import chat, wait_for

# PostgreSQL pass: concurrent forces: the row lock that makes them one run
pytestmark = pytest.mark.postgres


@pytest.fixture
def no_worker(tmp_path):
    """Tasks are sent to a broker nobody consumes: every run stays queued."""
    use_broker("filesystem://", filesystem_transport_options(tmp_path / "broker"))
    yield


def new_session(api) -> int:
    r = api.post("/api/sessions", {"messages": chat(6), "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def force(api, sid: int, body: dict | None = None):
    return api.post(f"/api/sessions/{sid}/compactions", body or {"reason": "test"})


def test_twenty_concurrent_forces_on_one_session_make_one_run(transactional_db, no_worker, live_api):
    sid = new_session(live_api)
    n = 20
    barrier = threading.Barrier(n)
    results: list[tuple[int, dict]] = []
    errors: list[str] = []

    def forcer(i: int) -> None:
        c = Client()
        try:
            barrier.wait(timeout=30)
            r = c.post(f"/api/sessions/{sid}/compactions", {"reason": f"force {i}"},
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {live_api.key}")
            results.append((r.status_code, r.json()))
        except Exception as exc:  # report every thread's failure, not only the first
            errors.append(f"{i}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=forcer, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert errors == []
    assert len(results) == n
    assert {status for status, _ in results} == {202}
    assert len({body["run_id"] for _, body in results}) == 1
    assert sum(body["created"] for _, body in results) == 1
    assert CompactionRun.objects.filter(session_id=sid).count() == 1


def test_a_force_arriving_while_another_holds_the_session_waits_for_it_and_shares_its_run(
        transactional_db, no_worker, live_api, monkeypatch):
    """The interleaving the session lock exists for, forced rather than hoped for: the first
    force has looked for a pending run (none) and not yet inserted its own when the second
    arrives. The first holds on until the second is blocked on the lock (PostgreSQL: a lock
    wait in pg_locks; SQLite: inside its BEGIN IMMEDIATE, which waits for the write lock) or
    has finished. With the lock, the second sees the first's run; without it, the second
    finds no pending run either and both insert one."""
    sid = new_session(live_api)
    session = Session.objects.get(pk=sid)
    first_checked, second_done, second_begins = threading.Event(), threading.Event(), threading.Event()
    second_pid: list[int] = []
    results: dict[str, tuple[int, bool]] = {}
    errors: list[str] = []
    real_pending_run = run_requests.pending_run

    def second_blocked() -> bool:
        if connection.vendor != "postgresql":
            return second_begins.is_set()
        if not second_pid:                 # the second force has not connected yet
            return False
        with connection.cursor() as cur:   # pg_locks is live (pg_stat_activity is per-transaction)
            cur.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", [second_pid[0]])
            return cur.fetchone()[0] > 0

    def pending_run(s, **kw):
        found = real_pending_run(s, **kw)
        if threading.current_thread().name == "first-force":
            first_checked.set()
            wait_for(lambda: second_done.is_set() or second_blocked(), timeout=120,
                     what="the second force to block on the session lock or finish")
        return found

    monkeypatch.setattr(run_requests, "pending_run", pending_run)

    def notice_begin(execute, sql, params, many, context):
        if sql.startswith("BEGIN"):
            second_begins.set()
        return execute(sql, params, many, context)

    def forcer(name: str) -> None:
        try:
            if name == "second-force" and connection.vendor == "postgresql":
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_backend_pid()")
                    second_pid.append(cur.fetchone()[0])
            with connection.execute_wrapper(notice_begin if name == "second-force" else
                                            lambda execute, *a: execute(*a)):
                run, created = force_run(session, reason=name)
            results[name] = (run.pk, created)
        except Exception as exc:  # reported below with the thread's name
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            if name == "second-force":
                second_done.set()
            connection.close()

    first = threading.Thread(target=forcer, args=("first-force",), name="first-force")
    first.start()
    wait_for(first_checked.is_set, timeout=120, what="the first force to check for a pending run")
    second = threading.Thread(target=forcer, args=("second-force",), name="second-force")
    second.start()
    first.join(timeout=180)
    second.join(timeout=180)
    assert errors == []
    assert results["first-force"][1] is True
    assert results["second-force"] == (results["first-force"][0], False), \
        "the second force made its own run: it did not wait for the first force's session lock"
    assert CompactionRun.objects.filter(session_id=sid).count() == 1


def test_a_force_while_a_forced_run_is_queued_returns_that_run(no_worker, api):
    sid = new_session(api)
    first = force(api, sid)
    assert first.status_code == 202 and first.json()["created"] is True
    again = force(api, sid, {"reason": "impatient client"})
    assert again.status_code == 202
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.json()["created"] is False
    assert again.json()["status"] == "queued"
    assert CompactionRun.objects.filter(session_id=sid).count() == 1


def test_a_force_while_a_forced_run_is_running_returns_that_run(no_worker, api):
    sid = new_session(api)
    run_id = force(api, sid).json()["run_id"]
    CompactionRun.objects.filter(pk=run_id).update(status=RunStatus.RUNNING)
    again = force(api, sid)
    assert again.status_code == 202
    assert (again.json()["run_id"], again.json()["created"], again.json()["status"]) == (run_id, False, "running")


def test_a_force_with_other_settings_while_one_is_pending_is_refused_naming_it(no_worker, api):
    sid = new_session(api)
    run_id = force(api, sid).json()["run_id"]
    r = force(api, sid, {"overrides": {"cut.keep_messages": 3}})
    assert r.status_code == 409, r.content
    assert f"run {run_id}" in r.json()["detail"]
    assert CompactionRun.objects.filter(session_id=sid).count() == 1
    # the same settings as the pending run are shared, whichever way they are spelled
    same = force(api, sid, {"overrides": {}})
    assert same.status_code == 202 and same.json()["run_id"] == run_id


def test_a_pending_automatic_run_does_not_absorb_a_force(no_worker, api):
    sid = new_session(api)
    auto = request_run(Session.objects.get(pk=sid), trigger="auto", force=False, reason="trigger fired")
    r = force(api, sid)
    assert r.status_code == 202 and r.json()["created"] is True
    assert r.json()["run_id"] != auto.pk
    assert force(api, sid).json()["run_id"] == r.json()["run_id"]


def test_a_force_after_the_run_finished_makes_a_new_run(api):
    sid = new_session(api)
    first = force(api, sid).json()
    assert CompactionRun.objects.get(pk=first["run_id"]).status in ("succeeded", "skipped")
    second = force(api, sid).json()
    assert second["created"] is True and second["run_id"] != first["run_id"]


def test_pressing_force_summarize_twice_shows_the_same_run(no_worker, api, admin_client):
    sid = new_session(api)
    r1 = admin_client.post(f"/sessions/{sid}/force/", {"reason": "one"})
    r2 = admin_client.post(f"/sessions/{sid}/force/", {"reason": "two"})
    assert r1.status_code == r2.status_code == 302
    assert r1["Location"] == r2["Location"]
    assert CompactionRun.objects.filter(session_id=sid).count() == 1
