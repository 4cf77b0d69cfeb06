"""Fault drills with real processes, each bounded in time: Redis restarted (empty) while 50
runs are queued; a worker's PostgreSQL connection terminated in the middle of its commit;
forced runs on many sessions while pool processes of two workers are killed at random.
After each: every run finished exactly once, nothing half-written, no worker exited.

(The worker killed mid-run on PostgreSQL + Redis is in test_worker.py. The full-size
random-kill drill, 1,000 runs over 100 sessions, is bench/fault_drill.py.)

Redis here is a redis-server of its own, started on port 18201 (never the shared one);
without the binary the drill skips, or fails under CI=true."""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from dashboard.models import CompactionRun, RunEvent, Session, StoredArchiveEntry
from dashboard.services.runs import request_run
from tests.service.conftest import IN_CI
from tests.service.helpers import chat, wait_for

# PostgreSQL pass: fault drills: connection loss (pg_terminate_backend), worker kills, Redis restarts
pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("fault-drills")]

OWN_REDIS_PORT = 18201
FINAL = ("succeeded", "failed", "skipped")


def new_session(api, turns: int = 8, tag: str = "t") -> Session:
    r = api.post("/api/sessions", {"messages": chat(turns, words=20, tag=tag), "auto_compact": False})
    assert r.status_code == 201, r.content
    return Session.objects.get(pk=r.json()["session"]["id"])


def all_final(run_ids: list[int]) -> bool:
    return CompactionRun.objects.filter(pk__in=run_ids).exclude(status__in=FINAL).count() == 0


def assert_exactly_once(api, run_ids: list[int]) -> Counter:
    """Every run ended once, none failed; each session holds exactly the archive entries and
    compactions of its succeeded runs, and its archive replays to its history."""
    runs = list(CompactionRun.objects.filter(pk__in=run_ids))
    statuses = Counter(r.status for r in runs)
    assert statuses["failed"] == 0, [(r.pk, r.error) for r in runs if r.status == "failed"]
    assert sum(statuses.values()) == len(run_ids)
    finals = Counter(RunEvent.objects.filter(run_id__in=run_ids, kind__in=FINAL).values_list("run_id", flat=True))
    assert all(finals[rid] == 1 for rid in run_ids), {rid: finals[rid] for rid in run_ids if finals[rid] != 1}
    for sid in {r.session_id for r in runs}:
        mine = [r for r in runs if r.session_id == sid]
        succeeded = [r for r in mine if r.status == "succeeded"]
        assert Session.objects.get(pk=sid).compaction_count == len(succeeded)
        refs = sorted(ref for r in succeeded for ref in r.archive_refs)
        assert sorted(StoredArchiveEntry.objects.filter(session_id=sid).values_list("entry_id", flat=True)) == refs
        assert api.get(f"/api/sessions/{sid}/archive/replay").json()["matches_history"] is True
    return statuses


# -- Redis restarted while runs are queued ------------------------------------------------------

class OwnRedis:
    """A redis-server without persistence: a restart loses every queued message."""

    def __init__(self, folder: Path, port: int = OWN_REDIS_PORT):
        self.folder, self.port = folder, port
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{port}/0"

    def start(self) -> OwnRedis:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not listen on {self.port}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def own_redis(tmp_path):
    if shutil.which("redis-server") is None:
        msg = "redis-server is not installed (needed to restart a Redis of the test's own)"
        if IN_CI:
            pytest.fail(msg + " (CI=true: fault drills must run)")
        pytest.skip(msg)
    server = OwnRedis(tmp_path).start()
    yield server
    server.kill()


@pytest.mark.slow
@pytest.mark.redis
def test_redis_restarted_while_50_runs_are_queued_loses_none(start_worker, live_api, own_redis):
    # the messages Redis lost come back by the resend: soon, a duplicate delivery is harmless here
    worker = start_worker("redis", concurrency=2, redis_url=own_redis.url, RUN_RESEND_AFTER=3)
    sessions = [new_session(live_api, tag=f"s{k}") for k in range(10)]
    os.killpg(worker.proc.pid, signal.SIGSTOP)  # the worker takes nothing while the runs queue up
    try:
        run_ids = [request_run(s, reason=f"queued {k}").pk for k in range(5) for s in sessions]
        own_redis.kill()  # every queued message is gone with it
        own_redis.start()
    finally:
        os.killpg(worker.proc.pid, signal.SIGCONT)
    wait_for(lambda: all_final(run_ids), timeout=150, interval=0.3, what="all 50 runs to finish after the restart")
    statuses = assert_exactly_once(live_api, run_ids)
    assert statuses["succeeded"] >= len(sessions)
    assert worker.alive(), worker.tail()
    worker.kill()  # checked alive; no need to wait for a warm shutdown


# -- PostgreSQL connection dropped mid-commit ------------------------------------------------------

@pytest.mark.slow
def test_a_worker_connection_terminated_mid_commit_writes_nothing_and_the_run_is_retried(start_worker, live_api):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (pg_terminate_backend); the PostgreSQL pass of the suite runs it")
    import psycopg  # noqa: PLC0415  (PostgreSQL-only drill; the SQLite pass never loads the driver)

    worker = start_worker("filesystem")
    session = new_session(live_api)
    s = connection.settings_dict
    params = {"host": s.get("HOST") or "127.0.0.1", "port": s.get("PORT") or 5432, "user": s.get("USER"),
              "password": s.get("PASSWORD") or None, "dbname": s["NAME"]}
    # One connection holds the lock (in its transaction); another, in autocommit, looks at
    # pg_stat_activity (read inside a transaction it would be a snapshot that never changes).
    blocker, watcher = psycopg.connect(**params), psycopg.connect(**params, autocommit=True)
    try:
        # Archive items are the last rows a commit inserts before the live context and the run
        # row: the worker's commit transaction has written its archive entries and waits here.
        blocker.execute("LOCK TABLE dashboard_archiveitem IN SHARE MODE")
        run = request_run(session, reason="commit interrupted")
        victim = wait_for(lambda: watcher.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND query ILIKE '%%dashboard_archiveitem%%' AND pid <> %s", (blocker.info.backend_pid,)).fetchone(),
            timeout=90, what="the worker's commit to wait on the archive-items table")
        watcher.execute("SELECT pg_terminate_backend(%s)", victim)
        blocker.rollback()
        # The terminated transaction was rolled back: not one archive entry of it is visible.
        assert watcher.execute("SELECT count(*) FROM dashboard_storedarchiveentry WHERE session_id = %s",
                               (session.pk,)).fetchone() == (0,)
    finally:
        blocker.close()
        watcher.close()
    done = wait_for(lambda: CompactionRun.objects.filter(pk=run.pk, status__in=FINAL).first(), timeout=90,
                    what="the run to be retried and finish")
    assert done.status == "succeeded", done.error
    assert done.deliveries == 2
    # Retried at once by the worker that lost its connection, not after a stale heartbeat.
    requeued = RunEvent.objects.get(run_id=run.pk, kind="requeued")
    assert "database connection lost" in requeued.data["reason"]
    assert_exactly_once(live_api, [run.pk])
    assert worker.alive(), worker.tail()
    worker.kill()  # checked alive; no need to wait for a warm shutdown


# -- random pool-process kills under forced runs -------------------------------------------------

@pytest.mark.slow
def test_forced_runs_over_many_sessions_with_random_pool_kills_finish_exactly_once(start_worker, live_api):
    workers = [start_worker("filesystem", concurrency=2, RUN_MAX_DELIVERIES=20) for _ in range(2)]
    sessions = [new_session(live_api, tag=f"s{k}") for k in range(10)]
    run_ids = [request_run(s, reason=f"drill {k}").pk for k in range(5) for s in sessions]
    rng = random.Random(7)
    kills = 0
    deadline = time.monotonic() + 150
    while True:
        left = CompactionRun.objects.filter(pk__in=run_ids).exclude(status__in=FINAL).count()
        if not left:
            break
        assert time.monotonic() < deadline, f"{left} runs still unfinished after 150 s"
        # Kill while most runs are still to do; the last third then finishes undisturbed.
        if kills < 5 and left > len(run_ids) // 3:
            pids = [p for w in workers for p in w.pool_pids()]
            if pids:
                try:
                    os.kill(rng.choice(pids), signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
        # short pauses: on an idle machine the runs go fast, and the kills must land mid-work
        time.sleep(rng.uniform(0.05, 0.3))
    assert kills >= 3
    assert_exactly_once(live_api, run_ids)
    assert all(w.alive() for w in workers), [w.tail() for w in workers]
    for w in workers:
        w.kill()  # checked alive; no need to wait for a warm shutdown
