"""Fault drills with real processes, each bounded in time: Redis restarted (empty) while 50
runs are queued; a worker's PostgreSQL connection terminated in the middle of its commit;
forced runs on many sessions while pool processes of two workers are killed at random.
After each: every run finished exactly once, nothing half-written, no worker exited.

(The worker killed mid-run on PostgreSQL + Redis is in test_worker.py. The full-size
random-kill drill, 1,000 runs over 100 sessions, is bench/fault_drill.py.)

Then the drills no one had run: Redis stopped while a worker executes runs and brought
back; PostgreSQL connections terminated (pg_terminate_backend) again and again: a worker's
during its runs and during a long summary call, a live web server's (gunicorn) during
appends and gateway calls. Nothing lost, nothing stored twice, no run stuck, every run
exactly once. The long versions are in bench/fault_drill.py.

Redis here is a redis-server of its own, on a free port (never the shared one); without
the binary the drill skips, or fails under CI=true. The PostgreSQL drills run in the
PostgreSQL pass (pg_terminate_backend) and skip on SQLite, saying so."""
from __future__ import annotations

import importlib.util
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from django.db import OperationalError, connection, transaction

from dashboard.models import (
    CompactionRun,
    GatewaySession,
    RunEvent,
    Session,
    StoredArchiveEntry,
    StoredMessage,
)
from dashboard.services.runs import request as request_module
from dashboard.services.runs import request_run
from tests.service.conftest import IN_CI, REPO, database_url_for_workers
from tests.service.helpers import chat, llm_policy, wait_for
from tests.support.llm_server import ok, slow
from tests.support.own_redis import OwnRedis, free_port

# PostgreSQL pass: fault drills: connection loss (pg_terminate_backend), worker kills, Redis restarts
pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("fault-drills")]
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


def stuck_report(run_ids: list[int], workers) -> str:
    """What an unfinished drill left: each unfinished run's state and last events, each
    session's slot, the broker's folders and each worker's log tail."""
    lines = []
    for run in CompactionRun.objects.filter(pk__in=run_ids).exclude(status__in=FINAL).order_by("id"):
        events = list(RunEvent.objects.filter(run_id=run.pk).order_by("-id").values_list("kind", flat=True)[:4])
        slot = Session.objects.filter(pk=run.session_id).values_list("active_run_id", flat=True).first()
        lines.append(f"run {run.pk} session {run.session_id} (slot {slot}): {run.status} deliveries={run.deliveries} "
                     f"step={run.progress_step} enqueued={run.enqueued_at and f'{run.enqueued_at:%H:%M:%S.%f}'} "
                     f"heartbeat={run.heartbeat_at and f'{run.heartbeat_at:%H:%M:%S.%f}'} events={events[::-1]}")
    for w in workers:
        lines.append(f"-- worker {w.name} alive={w.alive()} pool={w.pool_pids()}\n{w.tail(80)}")
    return "\n".join(lines)


# -- Redis restarted while runs are queued ------------------------------------------------------

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


@pytest.mark.slow
@pytest.mark.redis
def test_redis_stopped_while_a_worker_executes_runs_and_brought_back_loses_none(start_worker, live_api,
                                                                                own_redis):
    """The worker is executing runs when its Redis stops (and comes back empty); runs
    requested meanwhile cannot be sent and execute where they were requested. Every run
    ends once, the worker lives on and takes the runs requested after Redis is back."""
    worker = start_worker("redis", concurrency=2, redis_url=own_redis.url)
    sessions = [new_session(live_api, tag=f"s{k}") for k in range(6)]
    run_ids = [request_run(s, reason=f"before {k}").pk for k in range(4) for s in sessions]
    wait_for(lambda: CompactionRun.objects.filter(pk__in=run_ids, status__in=FINAL).exists(), timeout=120,
             what="the worker to finish a first run")
    own_redis.kill()  # mid-run: the queued and unacknowledged messages go with it
    down = [request_run(s, reason="while Redis is down").pk for s in sessions[:3]]
    inline = CompactionRun.objects.filter(pk__in=down, inline=True).count()
    own_redis.start()
    wait_for(lambda: all_final(run_ids + down), timeout=180, interval=0.3,
             what="every run to finish once Redis is back")
    assert inline == len(down)  # not sent anywhere: executed (or left queued behind a run) by the requester
    assert_exactly_once(live_api, run_ids + down)
    after = request_run(sessions[0], reason="after Redis is back")
    done = wait_for(lambda: CompactionRun.objects.filter(pk=after.pk, status__in=FINAL).first(), timeout=120,
                    what="the worker to take a run after Redis came back")
    assert done.inline is False and done.status in ("succeeded", "skipped"), done.error
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
        if time.monotonic() >= deadline:
            pytest.fail(f"{left} runs still unfinished after 150 s ({kills} kills)\n" + stuck_report(run_ids, workers))
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


# -- PostgreSQL connections terminated: the worker's mid-run, the web's mid-append ------------

def require_postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (pg_terminate_backend); the PostgreSQL pass of the suite runs it")


def tagged_database_url(app: str) -> str:
    """The test database's URL for a child process whose connections carry ``app`` as their
    application_name (so the drill terminates exactly that process's connections)."""
    return f"{database_url_for_workers()}?application_name={app}"


class Terminator:
    """Terminates, from a connection of its own, every connection of the test database whose
    application_name is ``app``; counts them."""

    def __init__(self, app: str):
        import psycopg  # noqa: PLC0415  (PostgreSQL-only drills; the SQLite pass never loads the driver)

        s = connection.settings_dict
        self.app, self.terminated = app, 0
        self.conn = psycopg.connect(host=s.get("HOST") or "127.0.0.1", port=s.get("PORT") or 5432,
                                    user=s.get("USER"), password=s.get("PASSWORD") or None, dbname=s["NAME"],
                                    autocommit=True)

    def connected(self) -> int:
        return self.conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                 "AND application_name = %s", (self.app,)).fetchone()[0]

    def terminate(self) -> int:
        n = self.conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND application_name = %s",
                              (self.app,)).fetchone()[0]
        self.terminated += n
        return n

    def close(self) -> None:
        self.conn.close()


class KillLoop:
    """A thread that terminates the connections every 0.05-0.5 s (seeded) until stopped."""

    def __init__(self, terminator: Terminator, seed: int = 7):
        self.terminator, self.rng, self.rounds = terminator, random.Random(seed), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.uniform(0.05, 0.5)):
            self.terminator.terminate()
            self.rounds += 1

    def __enter__(self) -> KillLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.mark.slow
@pytest.mark.postgres
def test_a_worker_whose_connections_are_terminated_during_a_summary_call_commits_it_once(start_worker, live_api,
                                                                                        llm_server):
    """The run waits on a slow summarizer while every connection of its worker is
    terminated. Its heartbeat goes on (on a new connection) and its outcome is written on a
    new connection: one execution, one summary request, not a redelivery that pays for the
    summary again."""
    require_postgres()
    app = f"cs-drill-worker-{os.getpid()}"
    # The summary outlasts RUN_STALE_AFTER by far: a heartbeat that stopped with its
    # connection would get the run taken for lost and executed again. (8 s, not the
    # fixture's 2: a busy machine can hold a heartbeat up for 2 s.)
    llm_server.script(slow(14.0, "SUMMARY: modules inspected, tests pass."), ok("SUMMARY OF A SECOND EXECUTION"))
    worker = start_worker("filesystem", DATABASE_URL=tagged_database_url(app), RUN_STALE_AFTER=8)
    killer = Terminator(app)
    try:
        session = new_session(live_api, turns=10)
        run = request_run(session, policy=llm_policy(llm_server), reason="connections terminated mid-run")
        wait_for(lambda: len(llm_server.requests) == 1, timeout=90, interval=0.05, what="the summary request")
        # the connections of the executing pool process (its own, its heartbeat's) and the
        # main process's (recovery, worker beat): all of them, while the summary is awaited
        wait_for(killer.terminate, timeout=30, what="a connection of the worker to terminate")
        done = wait_for(lambda: CompactionRun.objects.filter(pk=run.pk, status__in=FINAL).first(), timeout=120,
                        what="the run to finish")
    finally:
        killer.close()
    assert done.status == "succeeded", done.error
    assert (done.deliveries, len(llm_server.requests)) == (1, 1)
    assert "SECOND" not in done.summary
    assert not RunEvent.objects.filter(run_id=run.pk, kind="requeued").exists()
    assert_exactly_once(live_api, [run.pk])
    assert worker.alive(), worker.tail()
    worker.kill()  # checked alive; no need to wait for a warm shutdown


@pytest.mark.slow
@pytest.mark.postgres
def test_a_worker_connection_terminated_mid_claim_claims_again_at_once(start_worker, live_api):
    """The worker's connection dies while its claim waits for the session's row lock: the
    claim rolled back, and the worker claims again on a new connection, instead of leaving
    the run queued until the recovery loop re-sends it (RUN_RESEND_AFTER, 10 minutes here)."""
    require_postgres()
    import psycopg  # noqa: PLC0415  (PostgreSQL-only drill; the SQLite pass never loads the driver)

    app = f"cs-drill-worker-{os.getpid()}"
    worker = start_worker("filesystem", DATABASE_URL=tagged_database_url(app), RUN_RESEND_AFTER=600)
    session = new_session(live_api)
    s = connection.settings_dict
    blocker = psycopg.connect(host=s.get("HOST") or "127.0.0.1", port=s.get("PORT") or 5432, user=s.get("USER"),
                              password=s.get("PASSWORD") or None, dbname=s["NAME"])
    killer = Terminator(app)
    os.killpg(worker.proc.pid, signal.SIGSTOP)  # the run's message waits until the lock is held
    try:
        run = request_run(session, reason="claim interrupted")
        blocker.execute("SELECT id FROM dashboard_session WHERE id = %s FOR UPDATE", (session.pk,))
        os.killpg(worker.proc.pid, signal.SIGCONT)
        victim = wait_for(lambda: killer.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s "
            "AND wait_event_type = 'Lock' AND query ILIKE '%%dashboard_session%%'", (app,)).fetchone(),
            timeout=90, what="the worker's claim to wait on the session's row lock")
        killer.conn.execute("SELECT pg_terminate_backend(%s)", victim)
        blocker.rollback()
    finally:
        os.killpg(worker.proc.pid, signal.SIGCONT)
        blocker.close()
        killer.close()
    done = wait_for(lambda: CompactionRun.objects.filter(pk=run.pk, status__in=FINAL).first(), timeout=90,
                    what="the run to be claimed again and finish")
    assert done.status == "succeeded", done.error
    assert done.deliveries == 1
    assert_exactly_once(live_api, [run.pk])
    assert worker.alive(), worker.tail()
    worker.kill()  # checked alive; no need to wait for a warm shutdown


@pytest.mark.slow
@pytest.mark.postgres
def test_runs_whose_worker_connections_are_terminated_again_and_again_finish_exactly_once(start_worker,
                                                                                           live_api):
    """30 runs over 6 sessions while the worker's connections are terminated every
    0.05-0.5 s, then left alone: every run ends once, without waiting for the recovery
    loop's re-send (set to 10 minutes here), and the worker lives on."""
    require_postgres()
    app = f"cs-drill-worker-{os.getpid()}"
    worker = start_worker("filesystem", concurrency=2, DATABASE_URL=tagged_database_url(app),
                          RUN_RESEND_AFTER=600, RUN_MAX_DELIVERIES=50)
    killer = Terminator(app)
    try:
        sessions = [new_session(live_api, tag=f"s{k}") for k in range(6)]
        run_ids = [request_run(s, reason=f"drill {k}").pk for k in range(5) for s in sessions]
        with KillLoop(killer):
            wait_for(lambda: killer.terminated >= 10 or all_final(run_ids), timeout=120, interval=0.2,
                     what="10 worker connections terminated")
        wait_for(lambda: all_final(run_ids), timeout=180, interval=0.3,
                 what="every run to finish once the terminations stopped")
    finally:
        killer.close()
    assert_exactly_once(live_api, run_ids)
    assert worker.alive(), worker.tail()
    worker.kill()  # checked alive; no need to wait for a warm shutdown


def test_a_task_send_that_fails_after_the_commit_is_logged_and_fails_nothing_committed(transactional_db, live_api,
                                                                                       monkeypatch, caplog):
    """Found by the worker drill: the connection dropped between a run's commit and the
    send of the next run's task (enqueue reads the worker beats first). Django logs a failed
    robust on_commit callback by its __qualname__, which the functools.partial used for it
    lacked: the AttributeError escaped into the committed transaction's caller (a request
    answered 500 after its writes, and a client repeats a stored append) and the callbacks
    after it never ran. The send is made to fail here (monkeypatched): a connection dying in
    that microsecond window cannot be timed from a test."""
    session = new_session(live_api)

    def send_fails(run_id: int, task_id: str) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(request_module, "enqueue", send_fails)
    later: list[str] = []
    with transaction.atomic():
        run = request_run(session, reason="its task cannot be sent")
        transaction.on_commit(lambda: later.append("ran"))
    assert later == ["ran"]
    assert CompactionRun.objects.get(pk=run.pk).status == "queued"  # the recovery loop sends it again
    assert "server closed the connection unexpectedly" in caplog.text


class WebServer:
    """gunicorn serving the project (one worker process, two threads, as deployed), on the
    test database, its connections tagged with ``app``."""

    def __init__(self, folder: Path, app: str, **env_extra):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=str(REPO), DJANGO_SETTINGS_MODULE="dashboard.settings",
                   DATABASE_URL=tagged_database_url(app), DEBUG="0", RUN_NO_WORKER_FALLBACK="off",
                   CELERY_BROKER_URL="filesystem://", BROKER_DIR=str(folder / "web-broker"))
        env.update({k: str(v) for k, v in env_extra.items()})
        self.log = folder / "web.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "-b", f"127.0.0.1:{self.port}", "-w", "1",
             "--threads", "2"], cwd=REPO, env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
            start_new_session=True)
        wait_for(self._up, timeout=90, interval=0.2, what="gunicorn to answer /healthz")

    def _up(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text(errors="replace")[-3000:]
        try:
            return httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def web_server(transactional_db, tmp_path, project, llm_server):
    """start(app) -> a WebServer whose gateway's upstream is the scripted server."""
    if importlib.util.find_spec("gunicorn") is None:
        msg = "gunicorn is not installed (the web process of the drill)"
        if IN_CI:
            pytest.fail(msg + " (CI=true: fault drills must run)")
        pytest.skip(msg)
    servers: list[WebServer] = []

    def start(app: str) -> WebServer:
        servers.append(WebServer(tmp_path, app, GATEWAY_API_BASE=llm_server.api_base,
                                 GATEWAY_API_KEY="operator-upstream-key"))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def post_until_answered(client: httpx.Client, path: str, body: dict, ok_status: int, failures: Counter,
                        headers: dict | None = None) -> dict:
    """What a client does: repeat the request while the server answers 5xx or drops the
    connection (counted in ``failures``); a bounded number of times."""
    for _ in range(50):
        try:
            r = client.post(path, json=body, headers=headers)
        except httpx.TransportError as exc:
            failures[type(exc).__name__] += 1
            continue
        if r.status_code == ok_status:
            return r.json()
        assert r.status_code >= 500, (r.status_code, r.text[:500])
        failures[r.status_code] += 1
    pytest.fail(f"{path}: no answer {ok_status} in 50 attempts ({dict(failures)})")


@pytest.mark.slow
@pytest.mark.postgres
def test_appends_and_gateway_calls_while_the_web_connections_are_terminated_store_each_message_once(
        web_server, live_api, project, llm_server):
    """A live server (gunicorn) whose database connections are terminated between requests
    and in the middle of them. A connection terminated while idle is replaced when the next
    request uses it (that request succeeds); one terminated mid-request fails it, rolled
    back, and the client's retry stores it. After the drill, every appended message and
    every gateway call's messages are stored exactly once, in order."""
    require_postgres()
    app = f"cs-drill-web-{os.getpid()}"
    web = web_server(app)
    killer = Terminator(app)
    llm_server.script(*[ok(f"answer {i}") for i in range(200)])  # 400 rounds make 100 calls
    auth = {"Authorization": f"Bearer {project.test_key}"}
    failures: Counter = Counter()
    try:
        with httpx.Client(base_url=web.url, headers=auth, timeout=60) as client:
            session = new_session(live_api, turns=2)
            path = f"/api/sessions/{session.pk}/messages"
            sent = []

            def append(text: str) -> None:
                sent.append({"role": "user", "content": text})
                post_until_answered(client, path, {"messages": [sent[-1]], "auto_compact": False}, 201, failures)

            # 1. the connection the server keeps between requests is terminated while idle:
            # the next request still succeeds (a new connection), at the first attempt
            append("before")
            assert killer.connected() >= 1
            killer.terminate()
            r = client.post(path, json={"messages": [{"role": "user", "content": "after"}], "auto_compact": False})
            assert r.status_code == 201, r.text[:500]
            sent.append({"role": "user", "content": "after"})

            # 2. terminated again and again, between requests and during them
            history = [{"role": "system", "content": "You are a careful coding agent."}]
            with KillLoop(killer, seed=11):
                # 40 rounds, then more until the loop has terminated 5 connections: a
                # connection exists only while requests come and go, so the requests go on
                # until then (on a fast machine 40 rounds can fall between two kills)
                deadline = time.monotonic() + 120
                i = 0
                while i < 40 or (killer.terminated < 5 and i < 400 and time.monotonic() < deadline):
                    append(f"appended {i}")
                    if i % 4 == 0:
                        history.append({"role": "user", "content": f"question {i}"})
                        body = {"model": "openai/gpt-4o-mini", "messages": history}
                        reply = post_until_answered(client, "/v1/chat/completions", body, 200, failures,
                                                    headers={"X-Session-Id": "drill-agent"})
                        history.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"]})
                    i += 1
            assert killer.terminated >= 5, f"only {killer.terminated} web connections terminated in {i} rounds"
            # the last call's write, after its answer, lands on a healthy connection
            body = {"model": "openai/gpt-4o-mini", "messages": [*history, {"role": "user", "content": "last"}]}
            reply = post_until_answered(client, "/v1/chat/completions", body, 200, failures,
                                        headers={"X-Session-Id": "drill-agent"})
            history += [{"role": "user", "content": "last"},
                        {"role": "assistant", "content": reply["choices"][0]["message"]["content"]}]
    finally:
        killer.close()
    stored = list(StoredMessage.objects.filter(session_id=session.pk).order_by("position").values_list("raw",
                                                                                                       flat=True))
    assert [m["content"] for m in stored[-len(sent):]] == [m["content"] for m in sent]
    assert len(stored) == Session.objects.get(pk=session.pk).message_count == 9 + len(sent)

    def agent_session() -> list | None:
        ids = list(GatewaySession.objects.filter(project=project).values_list("session_id", flat=True))
        assert len(set(ids)) == 1, ids  # one conversation, one session: no fork from a half-stored call
        raws = list(StoredMessage.objects.filter(session_id=ids[0]).order_by("position").values_list("raw",
                                                                                                    flat=True))
        return raws if len(raws) >= len(history) else None

    raws = wait_for(agent_session, timeout=60, what="the gateway to store the last call")
    assert [(m["role"], m["content"]) for m in raws] == [(m["role"], m["content"]) for m in history]
    assert web.proc.poll() is None
