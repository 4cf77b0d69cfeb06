"""Fault drill at full size: forced runs over many sessions, executed by several
`celery -A dashboard worker` processes whose pool processes are SIGKILLed at random, then a
check that every run finished exactly once and that no worker (main process) exited.

    .venv/bin/python bench/fault_drill.py [--runs 1000] [--sessions 100] [--workers 2]
        [--concurrency 2] [--kill-every 5.0] [--broker filesystem|redis] [--redis redis://127.0.0.1:6379/6]
        [--seed 7]

The sessions are 33-message agent sessions, imported before the clock starts; runs are
requested as the API's force does (a queued CompactionRun, its task sent on commit), all at
once, round-robin over the sessions. Offline extractive summarizer. Workers run with a fast
heartbeat (0.5 s, stale after 3 s) and RUN_MAX_DELIVERIES=50, so a run killed several times
is retried rather than failed. A throw-away SQLite data dir unless DATABASE_URL is set.
When no run finishes for --stall-after seconds (Celery workers can stop taking messages
after pool processes were SIGKILLed), the workers are restarted and the stall is counted;
workers_alive then counts the workers of the last generation.
Output:

    # setup: ...
    runs=<n> sessions=<n> workers=<n>x<c> broker=<name> kills=<n> stalls=<n> wall_s=<float> runs_per_s=<float>
    succeeded=<n> skipped=<n> failed=<n> unfinished=<n> redelivered=<n> max_deliveries=<n>
    exactly_once=<yes|NO: ...> workers_alive=<n>/<n> archive_consistent=<yes|NO: ...>
Prints figures only.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402  (puts the repository on sys.path)

from dashboard.brokers import filesystem_transport_options  # noqa: E402
from dashboard.celery import use_broker  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--kill-every", type=float, default=5.0, help="mean seconds between two pool-process kills")
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
    from dashboard.models import CompactionRun, RunEvent, Session, StoredArchiveEntry  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.runs import request_run  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    project, _key = svc.project_with_key("drill")
    t0 = time.perf_counter()
    sessions = [svc.import_session(project, session_messages(k)) for k in range(args.sessions)]
    print(f"# setup: {len(sessions)} sessions imported in {time.perf_counter() - t0:.1f} s; data dir {data}",
          flush=True)

    if args.broker == "redis":
        redis.Redis.from_url(args.redis).flushdb()
        url, opts, extra = args.redis, {"visibility_timeout": 3600, "polling_interval": 0.1}, {
            "CELERY_BROKER_URL": args.redis}
    else:
        bdir = data / f"broker-{int(time.time())}"
        url, opts = "filesystem://", filesystem_transport_options(bdir)
        extra = {"CELERY_BROKER_URL": "filesystem://", "BROKER_DIR": str(bdir)}
    use_broker(url, opts)
    env = svc.child_env(**extra, RUN_HEARTBEAT_INTERVAL=0.5, RUN_STALE_AFTER=3, RUN_RECOVERY_INTERVAL=1,
                        RUN_RESEND_AFTER=5, RUN_MAX_DELIVERIES=50, COMPACTION_PRELOAD_LITELLM=1)
    workers = [start_worker(env, data / f"drill-worker{i}.log", f"drill{i}@%h", args.concurrency)
               for i in range(args.workers)]
    rng = random.Random(args.seed)
    try:
        t0 = time.perf_counter()
        run_ids = [request_run(sessions[i % len(sessions)], reason=f"drill {i}").pk for i in range(args.runs)]
        print(f"# {len(run_ids)} runs requested in {time.perf_counter() - t0:.1f} s", flush=True)
        kills, next_kill, last_report = 0, time.perf_counter() + rng.expovariate(1 / args.kill_every), 0.0
        stalls, last_left, last_change = 0, -1, time.perf_counter()
        while True:
            now = time.perf_counter()
            left = CompactionRun.objects.filter(pk__in=run_ids).exclude(status__in=FINAL).count()
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
        wall = time.perf_counter() - t0

        runs = list(CompactionRun.objects.filter(pk__in=run_ids).only("id", "status", "session_id", "deliveries",
                                                                    "archive_refs"))
        statuses = Counter(r.status for r in runs)
        finals = Counter(RunEvent.objects.filter(run_id__in=run_ids, kind__in=FINAL)
                         .values_list("run_id", flat=True))
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
        print(f"runs={len(run_ids)} sessions={len(sessions)} workers={args.workers}x{args.concurrency} "
              f"broker={args.broker} kills={kills} stalls={stalls} wall_s={wall:.1f} "
              f"runs_per_s={len(run_ids) / wall:.2f}")
        print(f"succeeded={statuses['succeeded']} skipped={statuses['skipped']} failed={statuses['failed']} "
              f"unfinished={sum(v for k, v in statuses.items() if k not in FINAL)} "
              f"redelivered={sum(r.deliveries > 1 for r in runs)} max_deliveries={max(r.deliveries for r in runs)}")
        once = "yes" if not twice and not never else f"NO: {len(twice)} ended twice, {len(never)} without an end"
        consistent = "yes" if not problems else f"NO: {problems[:3]}"
        print(f"exactly_once={once} workers_alive={alive}/{len(workers)} archive_consistent={consistent}",
              flush=True)
    finally:
        for w in workers:
            svc.stop(w)


if __name__ == "__main__":
    main()
