"""Fault drills at full size, one kind of fault per invocation (--fault):

  pool-kill   forced runs over many sessions, executed by several `celery -A dashboard
              worker` processes whose pool processes are SIGKILLed at random;
  redis-stop  the same runs on a Redis broker of the drill's own (a redis-server it starts
              on a free port, no persistence), stopped every --every seconds on average for
              --outage seconds and started again empty, while the workers execute; some
              runs are requested while it is down;
  pg-worker   the same runs on PostgreSQL, every connection of the workers terminated
              (pg_terminate_backend) every --every seconds on average;
  pg-web      a live web server (gunicorn, 1 worker x 2 threads) on PostgreSQL taking
              --appends appends (one message each) and a gateway call every 4th append (the
              scripted upstream of tests/support), while every connection of the web
              process is terminated every --every seconds on average; the client retries a
              request that failed (5xx or dropped), as an agent does.

Then a check that nothing was lost or done twice.

    .venv/bin/python bench/fault_drill.py [--fault pool-kill|redis-stop|pg-worker|pg-web]
        [--runs 1000] [--sessions 100] [--workers 2] [--concurrency 2] [--kill-every 5.0]
        [--every 4.0] [--outage 3.0] [--faults 20] [--appends 1000]
        [--resend-after 5] [--broker filesystem|redis] [--redis redis://127.0.0.1:6379/6] [--seed 7]

pg-worker and pg-web need DATABASE_URL=postgres://...; redis-stop needs the redis-server
binary. The sessions are 33-35-message agent sessions, imported before the clock starts;
runs are requested as the API's force does (a queued CompactionRun, its task sent on
commit), all at once, round-robin over the sessions. Offline extractive summarizer.
Workers run with a fast heartbeat (0.5 s, stale after 3 s), RUN_RESEND_AFTER=5 (or
--resend-after) and RUN_MAX_DELIVERIES=50, so a run killed several times is retried rather than failed. A
throw-away SQLite data dir unless DATABASE_URL is set.
pool-kill: when no run finishes for --stall-after seconds (Celery workers can stop taking
messages after pool processes were SIGKILLed), the workers are restarted and the stall is
counted; workers_alive then counts the workers of the last generation.
Output (pool-kill, redis-stop, pg-worker):

    # setup: ...
    runs=<n> sessions=<n> workers=<n>x<c> broker=<name> kills=<n> stalls=<n> wall_s=<float> runs_per_s=<float>
    succeeded=<n> skipped=<n> failed=<n> unfinished=<n> redelivered=<n> max_deliveries=<n>
    exactly_once=<yes|NO: ...> workers_alive=<n>/<n> archive_consistent=<yes|NO: ...>
    fault=<name> faults=<n> <what was hit>=<n> recoveries=<n> max_recover_s=<float> drain_s=<float> lost=<n> duplicated=<n>

recoveries: executions that did not finish and were taken again (deliveries - 1, summed)
plus runs executed inline because the broker was down; max_recover_s: the longest time
from the end of a fault to the next run finishing; drain_s: from the end of the last fault
to every run finished; lost: runs never finished or finished without their final event;
duplicated: runs finished twice plus sessions whose compactions or archive entries do not
match their succeeded runs.
Output (pg-web):

    appends=<n> gateway_calls=<n> faults=<n> connections_terminated=<n> failed_requests=<n> wall_s=<float>
    max_recover_s=<float> lost=<n> duplicated=<n> in_order=<yes|NO> gateway_sessions=<n> web_alive=<yes|no>

failed_requests: answers the client had to retry (5xx or dropped connection);
max_recover_s: the longest time from a request's first failed attempt to its success.
Prints figures only.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402  (puts the repository on sys.path)

from dashboard.brokers import filesystem_transport_options  # noqa: E402
from dashboard.celery import use_broker  # noqa: E402
from tests.support.llm_server import ScriptedLLMServer, ok  # noqa: E402
from tests.support.own_redis import OwnRedis, free_port  # noqa: E402

FINAL = ("succeeded", "failed", "skipped")


def session_messages(k: int) -> list[dict]:
    return svc.messages_500(33 + (k % 3))


def pool_pids(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (the pool replaces a dead process from a thread)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def start_worker(env: dict, log: Path, name: str, concurrency: int):
    return svc.start_worker(env, log, concurrency, name=name, timeout=120)


class Terminator:
    """pg_terminate_backend of every connection of this database tagged ``app``."""

    def __init__(self, app: str):
        import psycopg  # noqa: PLC0415  (PostgreSQL drills only)

        self.app, self.terminated, self.rounds = app, 0, 0
        self.conn = psycopg.connect(svc.database_url().replace("postgres://", "postgresql://", 1), autocommit=True)

    def terminate(self) -> int:
        row = self.conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE datname = current_database() AND application_name = %s",
                                (self.app,)).fetchone()
        n = int(row[0]) if row else 0
        self.terminated += n
        self.rounds += 1
        return n


def tagged_url(app: str) -> str:
    return f"{svc.database_url()}?application_name={app}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fault", default="pool-kill", choices=["pool-kill", "redis-stop", "pg-worker", "pg-web"])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--kill-every", type=float, default=5.0, help="pool-kill: mean seconds between two kills")
    ap.add_argument("--every", type=float, default=4.0,
                    help="redis-stop, pg-worker, pg-web: mean seconds between two faults")
    ap.add_argument("--outage", type=float, default=3.0, help="redis-stop: seconds Redis stays down")
    ap.add_argument("--faults", type=int, default=20, help="redis-stop, pg-worker: faults to inject, at most")
    ap.add_argument("--appends", type=int, default=1000, help="pg-web: appends to make")
    ap.add_argument("--resend-after", type=float, default=5.0,
                    help="the workers' RUN_RESEND_AFTER (the service's default is 300)")
    ap.add_argument("--broker", default="filesystem", choices=["filesystem", "redis"])
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/6")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--stall-after", type=float, default=60.0,
                    help="no run finished for this long: the workers are restarted (counted as a stall)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the workers on the way out

    data = svc.setup_django(args.data_dir)
    if args.fault in ("pg-worker", "pg-web") and not svc.database_url().startswith("postgres"):
        sys.exit(f"--fault {args.fault} needs DATABASE_URL=postgres://... (pg_terminate_backend)")
    if args.fault == "redis-stop" and shutil.which("redis-server") is None:
        sys.exit("--fault redis-stop needs the redis-server binary")
    project, key = svc.project_with_key(f"drill-{os.getpid()}")  # a fresh project: its own gateway sessions
    if args.fault == "pg-web":
        web_drill(args, data, project, key)
        return
    t0 = time.perf_counter()
    sessions = [svc.import_session(project, session_messages(k)) for k in range(args.sessions)]
    print(f"# setup: {len(sessions)} sessions imported in {time.perf_counter() - t0:.1f} s; data dir {data}",
          flush=True)

    own_redis = None
    if args.fault == "redis-stop":
        own_redis = OwnRedis(data).start()
        args.broker, args.redis = "redis", own_redis.url
    if args.broker == "redis":
        redis.Redis.from_url(args.redis).flushdb()
        url, opts, extra = args.redis, {"visibility_timeout": 3600, "polling_interval": 0.1}, {
            "CELERY_BROKER_URL": args.redis}
    else:
        bdir = data / f"broker-{int(time.time())}"
        url, opts = "filesystem://", filesystem_transport_options(bdir)
        extra = {"CELERY_BROKER_URL": "filesystem://", "BROKER_DIR": str(bdir)}
    app = f"cs-drill-worker-{os.getpid()}"
    if args.fault == "pg-worker":
        extra["DATABASE_URL"] = tagged_url(app)
    use_broker(url, opts)
    env = svc.child_env(**extra, RUN_HEARTBEAT_INTERVAL=0.5, RUN_STALE_AFTER=3, RUN_RECOVERY_INTERVAL=1,
                        RUN_RESEND_AFTER=args.resend_after, RUN_MAX_DELIVERIES=50, COMPACTION_PRELOAD_LITELLM=1)
    workers = [start_worker(env, data / f"drill-worker{i}.log", f"drill{i}@%h", args.concurrency)
               for i in range(args.workers)]
    try:
        if args.fault == "pool-kill":
            run_ids, wall, kills, stalls = pool_kill(args, sessions, workers, env, data)
            report(args, sessions, workers, run_ids, wall, kills, stalls)
        else:
            run_ids, wall, faults = broker_or_database_faults(args, sessions, own_redis, app)
            figures = report(args, sessions, workers, run_ids, wall, faults["faults"], 0)
            hit = (f"connections_terminated={faults['terminated']}" if args.fault == "pg-worker"
                   else f"requested_while_down={faults['requested_while_down']}")
            print(f"fault={args.fault} faults={faults['faults']} {hit} recoveries={figures['recoveries']} "
                  f"max_recover_s={faults['max_recover_s']:.1f} drain_s={faults['drain_s']:.1f} "
                  f"lost={figures['lost']} duplicated={figures['duplicated']}", flush=True)
    finally:
        for w in workers:
            svc.stop(w)
        if own_redis is not None:
            own_redis.kill()


def unfinished(run_ids: list[int]) -> int:
    from dashboard.models import CompactionRun  # noqa: PLC0415  (needs Django set up: main() runs first)

    return CompactionRun.objects.filter(pk__in=run_ids).exclude(status__in=FINAL).count()


def pool_kill(args, sessions, workers, env, data) -> tuple[list[int], float, int, int]:
    from dashboard.services.runs import request_run  # noqa: PLC0415  (needs Django set up: main() runs first)

    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    run_ids = [request_run(sessions[i % len(sessions)], reason=f"drill {i}").pk for i in range(args.runs)]
    print(f"# {len(run_ids)} runs requested in {time.perf_counter() - t0:.1f} s", flush=True)
    kills, next_kill, last_report = 0, time.perf_counter() + rng.expovariate(1 / args.kill_every), 0.0
    stalls, last_left, last_change = 0, -1, time.perf_counter()
    while True:
        now = time.perf_counter()
        left = unfinished(run_ids)
        if not left or now - t0 > args.timeout:
            break
        if left != last_left:
            last_left, last_change = left, now
        elif now - last_change > args.stall_after:
            # No run finished for a while although the workers are up: their consumers
            # stopped taking messages. Restart the workers (counted) and go on.
            stalls += 1
            print(f"# t={now - t0:.0f}s stall: {left} runs left, none finished for {args.stall_after:.0f} s; "
                  f"restarting the workers", flush=True)
            for i, w in enumerate(workers):
                svc.stop(w)
                workers[i] = start_worker(env, data / f"drill-worker{i}-r{stalls}.log", f"drill{i}@%h",
                                          args.concurrency)
            last_change = time.perf_counter()
            continue
        if now >= next_kill:
            pids = [p for w in workers if w.poll() is None for p in pool_pids(w.pid)]
            if pids:
                try:
                    os.kill(rng.choice(pids), signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
            next_kill = now + rng.expovariate(1 / args.kill_every)
        if now - last_report > 30:
            print(f"# t={now - t0:.0f}s left={left} kills={kills}", flush=True)
            last_report = now
        time.sleep(0.1)
    return run_ids, time.perf_counter() - t0, kills, stalls


def broker_or_database_faults(args, sessions, own_redis: OwnRedis | None, app: str):
    """redis-stop / pg-worker: faults at random while the runs execute (a termination round
    that found no connection open is not counted), at most --faults of them, from the first
    finished run on and none once a third of the runs is left (the rest finishes undisturbed, so the
    drain after the last fault is measured). Each fault's recovery: the time from its end to
    the next run finishing."""
    from dashboard.services.runs import request_run  # noqa: PLC0415  (needs Django set up: main() runs first)

    rng = random.Random(args.seed)
    terminator = Terminator(app) if args.fault == "pg-worker" else None
    t0 = time.perf_counter()
    run_ids = [request_run(sessions[i % len(sessions)], reason=f"drill {i}").pk for i in range(args.runs)]
    print(f"# {len(run_ids)} runs requested in {time.perf_counter() - t0:.1f} s", flush=True)
    faults, requested_while_down, last_fault_end = 0, 0, None
    recover_from: float | None = None  # end of the latest fault whose recovery is not yet seen
    recoveries: list[float] = []
    next_fault = time.perf_counter() + rng.expovariate(1 / args.every)
    left_before, last_report = unfinished(run_ids), 0.0
    while True:
        now = time.perf_counter()
        left = unfinished(run_ids)
        if left < left_before and recover_from is not None:
            recoveries.append(now - recover_from)
            recover_from = None
        left_before = left
        if not left or now - t0 > args.timeout:
            break
        # faults from the first finished run on (the workers are busy by then) until a third is left
        if now >= next_fault and faults < args.faults and len(run_ids) // 3 < left < len(run_ids):
            if terminator is not None and not terminator.terminate():
                next_fault = now + 0.1  # no connection of the workers open at this instant: not a fault
                continue
            faults += 1
            if own_redis is not None:
                own_redis.kill()
                # runs requested while Redis is down cannot be sent: they execute here (inline)
                extra = [request_run(sessions[(faults * 7 + k) % len(sessions)], reason=f"while down {faults}").pk
                         for k in range(2)]
                run_ids += extra
                requested_while_down += len(extra)
                time.sleep(max(0.0, args.outage - (time.perf_counter() - now)))
                own_redis.start()
            last_fault_end = recover_from = time.perf_counter()
            left_before = unfinished(run_ids)
            next_fault = last_fault_end + rng.expovariate(1 / args.every)
        if now - last_report > 30:
            print(f"# t={now - t0:.0f}s left={left} faults={faults}", flush=True)
            last_report = now
        time.sleep(0.05)
    end = time.perf_counter()
    if recover_from is not None:  # the last fault's recovery is the end of the drain
        recoveries.append(end - recover_from)
    return run_ids, end - t0, {
        "faults": faults, "requested_while_down": requested_while_down,
        "terminated": terminator.terminated if terminator else 0,
        "max_recover_s": max(recoveries, default=0.0),
        "drain_s": end - last_fault_end if last_fault_end is not None else 0.0}


def report(args, sessions, workers, run_ids: list[int], wall: float, kills: int, stalls: int) -> dict:
    from dashboard.models import (  # noqa: PLC0415  (needs Django set up: main() runs first)
        CompactionRun,
        RunEvent,
        Session,
        StoredArchiveEntry,
    )

    runs = list(CompactionRun.objects.filter(pk__in=run_ids).only("id", "status", "session_id", "deliveries",
                                                                "archive_refs", "inline"))
    statuses = Counter(r.status for r in runs)
    finals = Counter(RunEvent.objects.filter(run_id__in=run_ids, kind__in=FINAL).values_list("run_id", flat=True))
    twice = [rid for rid in run_ids if finals[rid] > 1]
    never = [r.pk for r in runs if r.status in FINAL and finals[r.pk] == 0]
    problems = []
    for s in sessions:
        mine = [r for r in runs if r.session_id == s.pk and r.status == "succeeded"]
        compactions = Session.objects.filter(pk=s.pk).values_list("compaction_count", flat=True).first()
        refs = sorted(ref for r in mine for ref in r.archive_refs)
        stored = sorted(StoredArchiveEntry.objects.filter(session_id=s.pk).values_list("entry_id", flat=True))
        if compactions != len(mine) or refs != stored:
            problems.append(f"session {s.pk}: {compactions} compactions for {len(mine)} succeeded runs, "
                            f"{len(stored)} archive entries for {len(refs)} refs")
    alive = sum(w.poll() is None for w in workers)
    left = sum(v for k, v in statuses.items() if k not in FINAL)
    print(f"runs={len(run_ids)} sessions={len(sessions)} workers={args.workers}x{args.concurrency} "
          f"broker={args.broker if args.fault != 'redis-stop' else 'redis (own, restarted)'} kills={kills} "
          f"stalls={stalls} wall_s={wall:.1f} runs_per_s={len(run_ids) / wall:.2f}")
    print(f"succeeded={statuses['succeeded']} skipped={statuses['skipped']} failed={statuses['failed']} "
          f"unfinished={left} redelivered={sum(r.deliveries > 1 for r in runs)} "
          f"max_deliveries={max(r.deliveries for r in runs)}")
    once = "yes" if not twice and not never else f"NO: {len(twice)} ended twice, {len(never)} without an end"
    consistent = "yes" if not problems else f"NO: {problems[:3]}"
    print(f"exactly_once={once} workers_alive={alive}/{len(workers)} archive_consistent={consistent}", flush=True)
    return {"recoveries": sum(max(0, r.deliveries - 1) for r in runs) + sum(r.inline for r in runs),
            "lost": left + len(never), "duplicated": len(twice) + len(problems)}


def web_drill(args, data: Path, project, key: str) -> None:
    """pg-web: appends and gateway calls through gunicorn while its connections are
    terminated; the client retries what failed."""
    from dashboard.models import GatewaySession, StoredMessage  # noqa: PLC0415  (needs Django set up: main() runs first)

    session = svc.import_session(project, session_messages(0))
    base = session.message_count
    app = f"cs-drill-web-{os.getpid()}"
    terminator = Terminator(app)
    with ScriptedLLMServer() as upstream:
        upstream.script(*[ok(f"answer {i}") for i in range(args.appends // 4 + 10)])
        port = free_port()
        env = svc.child_env(DATABASE_URL=tagged_url(app), DEBUG="0", RUN_NO_WORKER_FALLBACK="off",
                            CELERY_BROKER_URL="filesystem://", BROKER_DIR=str(data / "web-broker"),
                            GATEWAY_API_BASE=upstream.api_base, GATEWAY_API_KEY="operator-upstream-key")
        web = svc.start([sys.executable, "-m", "gunicorn", "dashboard.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1",
                         "--threads", "2"], env, data / "drill-web.log")
        stop = threading.Event()
        rng = random.Random(args.seed)

        def kill_loop() -> None:
            while not stop.wait(rng.expovariate(1 / args.every)):
                terminator.terminate()

        try:
            svc.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
            failed: Counter = Counter()
            outages: list[float] = []

            def post(path: str, body: dict, want: int, headers: dict | None = None) -> dict:
                first_failure = None
                for _ in range(200):
                    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                                 method="POST", headers={"Authorization": f"Bearer {key}",
                                                                         "Content-Type": "application/json",
                                                                         **(headers or {})})
                    try:
                        with urllib.request.urlopen(req, timeout=60) as r:
                            if r.status == want:
                                if first_failure is not None:
                                    outages.append(time.perf_counter() - first_failure)
                                return json.loads(r.read())
                            failed[r.status] += 1
                    except urllib.error.HTTPError as exc:
                        if exc.code < 500:
                            raise RuntimeError(f"{path}: {exc.code} {exc.read()[:300]!r}") from None
                        failed[exc.code] += 1
                    except OSError as exc:
                        failed[type(exc).__name__] += 1
                    first_failure = first_failure or time.perf_counter()
                    time.sleep(0.05)
                raise RuntimeError(f"{path}: no {want} in 200 attempts")

            killer = threading.Thread(target=kill_loop, daemon=True)
            t0 = time.perf_counter()
            killer.start()
            sent, history, calls = [], [{"role": "system", "content": "You are a careful coding agent."}], 0
            for i in range(args.appends):
                sent.append(f"appended {i}")
                post(f"/api/sessions/{session.pk}/messages",
                     {"messages": [{"role": "user", "content": sent[-1]}], "auto_compact": False}, 201)
                if i % 4 == 0:
                    history.append({"role": "user", "content": f"question {i}"})
                    reply = post("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": history}, 200,
                                 {"X-Session-Id": "drill-agent"})
                    history.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"]})
                    calls += 1
                if i and i % 200 == 0:
                    print(f"# t={time.perf_counter() - t0:.0f}s appends={i} calls={calls} "
                          f"terminated={terminator.terminated} failed={sum(failed.values())}", flush=True)
            stop.set()
            killer.join()
            # a last call, undisturbed: the previous call's write may have been cut
            history.append({"role": "user", "content": "last"})
            reply = post("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": history}, 200,
                         {"X-Session-Id": "drill-agent"})
            history.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"]})
            calls += 1
            wall = time.perf_counter() - t0
            deadline = time.monotonic() + 60
            while True:  # the gateway stores a call's messages after answering it
                ids = set(GatewaySession.objects.filter(project=project).values_list("session_id", flat=True))
                gw = [json.loads(r) if isinstance(r, str) else r for sid in ids for r in StoredMessage.objects.filter(
                    session_id=sid).order_by("position").values_list("raw", flat=True)]
                if len(gw) >= len(history) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            stored = [r["content"] for r in StoredMessage.objects.filter(session_id=session.pk, position__gte=base)
                      .order_by("position").values_list("raw", flat=True)]
            want_gw = [(m["role"], m["content"]) for m in history]
            got_gw = [(m["role"], m["content"]) for m in gw]
            lost = len(set(sent) - set(stored)) + len(set(want_gw) - set(got_gw))
            duplicated = (len(stored) - len(set(stored))) + (len(got_gw) - len(set(got_gw)))
            in_order = stored == sent and got_gw == want_gw
            print(f"appends={len(sent)} gateway_calls={calls} faults={terminator.rounds} "
                  f"connections_terminated={terminator.terminated} failed_requests={sum(failed.values())} "
                  f"({dict(failed)}) wall_s={wall:.1f}")
            print(f"max_recover_s={max(outages, default=0.0):.2f} lost={lost} duplicated={duplicated} "
                  f"in_order={'yes' if in_order else 'NO'} gateway_sessions={len(ids)} "
                  f"web_alive={'yes' if web.poll() is None else 'no'}", flush=True)
        finally:
            stop.set()
            svc.stop(web)


if __name__ == "__main__":
    main()
