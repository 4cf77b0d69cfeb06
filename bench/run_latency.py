"""Forced compaction run on a 500-message session, enqueue -> done, through a real worker
process, on the embedded filesystem broker, on kombu's own filesystem transport (which the
embedded broker replaced) and on Redis.

    .venv/bin/python bench/run_latency.py [--runs 20] [--brokers kombu-filesystem,filesystem,redis]
                                          [--redis redis://127.0.0.1:6379/3] [--distinct]

One worker per broker is started first; then the brokers take turns, one run each per round,
so that all of them run under the same machine load (the first round is a warm-up).

Each run gets a freshly imported 500-message session (import not timed). By default every
session holds the same texts, so from the second run on the worker process has counted
them before (its token counts are cached per process); with ``--distinct`` every run's
texts are new to the worker (each text carries the run's number), as a session seen by a
worker for the first time is. The run is requested as
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
from dashboard.celery import app, use_broker  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(q * (len(values) - 1))))
    return values[k]


def start_worker(env: dict, log: Path):
    return svc.start_worker(env, log, 1, timeout=120)


def distinct(messages: list[dict], n: int) -> list[dict]:
    """The session with every text made new: the run's number in front of each content."""
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), str):
            m["content"] = f"[run {n}] {m['content']}"
        out.append(m)
    return out


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
    ap.add_argument("--brokers", default="kombu-filesystem,filesystem,redis",
                    help="kombu-filesystem: kombu's own filesystem transport (what the embedded broker was)")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/3")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--distinct", action="store_true", help="texts new to the worker on every run")
    args = ap.parse_args()

    data = svc.setup_django(args.data_dir)
    project, _key = svc.project_with_key()
    messages = svc.messages_500()
    print(f"# session: {len(messages)} messages; offline extractive summarizer; runs per broker: {args.runs}; "
          f"texts: {'new on every run' if args.distinct else 'the same on every run'}", flush=True)
    # One worker per broker, all started first; then the runs take turns (one run on each
    # broker, then the next round), so every broker sees the same machine load.
    setups = {}
    try:
        for broker in args.brokers.split(","):
            transport = None
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
            elif broker in ("filesystem", "kombu-filesystem"):
                bdir = data / f"broker-{broker}-{int(time.time())}"
                url, opts = "filesystem://", filesystem_transport_options(bdir)
                extra = {"CELERY_BROKER_URL": "filesystem://", "BROKER_DIR": str(bdir)}
                if broker == "kombu-filesystem":  # kombu's own transport, on both sides
                    transport = "kombu.transport.filesystem:Transport"
                    extra["BROKER_FILESYSTEM_TRANSPORT"] = "kombu"
            else:
                raise SystemExit(f"unknown broker {broker!r}")
            worker = start_worker(svc.child_env(**extra), data / f"worker-{broker}.log")
            setups[broker] = (url, opts, transport, worker)
        walls: dict[str, list[float]] = {b: [] for b in setups}
        dbs: dict[str, list[float]] = {b: [] for b in setups}
        serial = 0  # the run's number, which --distinct writes into its texts
        for round_ in range(args.runs + 1):
            for broker, (url, opts, transport, _worker) in setups.items():
                use_broker(url, opts)
                app.conf.CELERY_BROKER_TRANSPORT = transport
                serial += 1
                wall, db = one_run(project, distinct(messages, serial) if args.distinct else messages)
                if round_:  # round 0 warms up: the first summary in a fresh pool process
                    walls[broker].append(wall)
                    dbs[broker].append(db)
        for broker in setups:
            w, d = walls[broker], dbs[broker]
            print(f"broker={broker} runs={len(w)} p50_ms={statistics.median(w):.0f} "
                  f"p95_ms={pct(w, 0.95):.0f} max_ms={max(w):.0f}   "
                  f"db_p50_ms={statistics.median(d):.0f} db_p95_ms={pct(d, 0.95):.0f}", flush=True)
    finally:
        for _url, _opts, _transport, worker in setups.values():
            svc.stop(worker)

if __name__ == "__main__":
    main()
