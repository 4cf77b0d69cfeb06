"""Forced compaction run on a 500-message session, enqueue -> done, through a real worker
process, on the filesystem broker and on Redis.

    .venv/bin/python bench/run_latency.py [--runs 20] [--brokers filesystem,redis]
                                          [--redis redis://127.0.0.1:6379/3]

Each run gets a freshly imported 500-message session (import not timed), is requested as
the API does (a queued CompactionRun, the task sent when the transaction commits) and is
executed by `celery -A dashboard worker` (prefork, 1 process) with the offline extractive
summarizer. Latency = from the request to the moment this process sees the run finished
(polling every 5 ms); the worker's own figure (finished_at - created_at) is printed too.
A throw-away SQLite data dir is used unless DATABASE_URL is set. Redis is skipped when
unreachable. Output, one line per broker:

    broker=<name> runs=<n> p50_ms=<float> p95_ms=<float> max_ms=<float>   db_p50_ms=<float> db_p95_ms=<float>
Prints figures only.
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402  (puts the repository on sys.path)

from dashboard.brokers import filesystem_transport_options  # noqa: E402
from dashboard.celery import use_broker  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(q * (len(values) - 1))))
    return values[k]


def start_worker(env: dict, log: Path):
    cmd = [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-l", "info", "--concurrency", "1",
           "--without-mingle", "--without-gossip", "--without-heartbeat"]
    proc = svc.start(cmd, env, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if log.exists() and " ready." in log.read_text(errors="replace"):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace")[-3000:])
        time.sleep(0.1)
    raise RuntimeError("worker not ready")


def one_run(project, messages) -> tuple[float, float]:
    from dashboard.models import CompactionRun  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.runs import request_run  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    session = svc.import_session(project, messages)
    t0 = time.perf_counter()
    run = request_run(session, force=True, reason="bench")
    while True:
        row = CompactionRun.objects.filter(pk=run.pk).values("status", "created_at", "finished_at").first()
        if row["status"] in ("succeeded", "failed", "skipped"):
            wall = (time.perf_counter() - t0) * 1000
            if row["status"] != "succeeded":
                print(f"# run {run.pk} {row['status']}", flush=True)
            return wall, (row["finished_at"] - row["created_at"]).total_seconds() * 1000
        if time.perf_counter() - t0 > 300:
            raise RuntimeError(f"run {run.pk} did not finish")
        time.sleep(0.005)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--brokers", default="filesystem,redis")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/3")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    data = svc.setup_django(args.data_dir)
    project, _key = svc.project_with_key()
    messages = svc.messages_500()
    print(f"# session: {len(messages)} messages; offline extractive summarizer; runs per broker: {args.runs}",
          flush=True)
    for broker in args.brokers.split(","):
        if broker == "redis":
            u = urlparse(args.redis)
            try:
                socket.create_connection((u.hostname, u.port or 6379), timeout=1).close()
            except OSError:
                print(f"# redis: {args.redis} unreachable, skipped", flush=True)
                continue
            redis.Redis.from_url(args.redis).flushdb()
            url, opts, extra = args.redis, {"visibility_timeout": 3600, "polling_interval": 0.1}, {
                "CELERY_BROKER_URL": args.redis}
        else:
            bdir = data / f"broker-{int(time.time())}"
            url, opts = "filesystem://", filesystem_transport_options(bdir)
            extra = {"CELERY_BROKER_URL": "filesystem://", "BROKER_DIR": str(bdir)}
        use_broker(url, opts)
        worker = start_worker(svc.child_env(**extra), data / f"worker-{broker}.log")
        try:
            one_run(project, messages)  # warm-up: first summary in a fresh pool process
            walls, dbs = [], []
            for _ in range(args.runs):
                wall, db = one_run(project, messages)
                walls.append(wall)
                dbs.append(db)
            print(f"broker={broker} runs={len(walls)} p50_ms={statistics.median(walls):.0f} "
                  f"p95_ms={pct(walls, 0.95):.0f} max_ms={max(walls):.0f}   "
                  f"db_p50_ms={statistics.median(dbs):.0f} db_p95_ms={pct(dbs, 0.95):.0f}", flush=True)
        finally:
            svc.stop(worker)


if __name__ == "__main__":
    main()
