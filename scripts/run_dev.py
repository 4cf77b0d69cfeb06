#!/usr/bin/env python
"""What `make run` runs: migrate, create the demo project (prints its API key and a login),
import the demo sessions, then serve http://127.0.0.1:8000 and run a Celery worker on the
embedded filesystem broker. Ctrl-C stops both.

    python scripts/run_dev.py [--port 8000] [--no-import] [--workers 2]

Everything lives in DATA_DIR (default <repo>/.data): the SQLite database, the broker
folders, the demo credentials. Set DATABASE_URL / CELERY_BROKER_URL to use PostgreSQL
and Redis instead.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "2")),
                        help="worker pool processes")
    parser.add_argument("--no-import", action="store_true", help="do not import the demo sessions")
    args = parser.parse_args()

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    env.setdefault("DEBUG", "1")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    py = sys.executable
    manage = [py, str(REPO / "manage.py")]

    def step(cmd: list[str]) -> None:
        result = subprocess.run(cmd, cwd=REPO, env=env)
        if result.returncode != 0:
            sys.exit(result.returncode)

    step(manage + ["migrate", "--noinput", "-v", "0"])
    step(manage + ["load_demo"] + (["--no-import"] if args.no_import else []))

    procs: list[tuple[str, subprocess.Popen]] = []
    web = subprocess.Popen(manage + ["runserver", f"{args.host}:{args.port}", "--noreload"], cwd=REPO, env=env,
                           start_new_session=True)
    procs.append(("web", web))
    worker = subprocess.Popen([py, "-m", "celery", "-A", "dashboard", "worker", "-l", "info",
                               "--concurrency", str(args.workers), "--without-mingle", "--without-gossip"],
                              cwd=REPO, env=env, start_new_session=True)
    procs.append(("worker", worker))
    print(f"\nServing http://{args.host}:{args.port}/  (API docs: /api/docs). Ctrl-C stops the server and the worker.\n",
          flush=True)

    stopping = False

    def stop(*_):
        nonlocal stopping
        if stopping:
            return
        stopping = True
        for _name, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # runserver exits; the worker finishes its current task
        deadline = time.monotonic() + 30
        for _name, p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    code = 0
    try:
        while not stopping:
            for name, p in procs:
                if p.poll() is not None:
                    print(f"{name} exited with {p.returncode}; stopping", file=sys.stderr, flush=True)
                    code = p.returncode or 1
                    stop()
                    break
            time.sleep(0.3)
    finally:
        stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
