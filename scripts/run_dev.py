#!/usr/bin/env python
"""What `make run` runs: migrate, create the demo project, start a Celery worker and Celery
beat (the continuous tuning schedule) on the embedded filesystem broker, import the demo
sessions (their compactions go to that worker), serve http://127.0.0.1:8000, and once the
server answers, print the demo project's API key and a login (last, so the servers' banners
do not scroll them away). Ctrl-C stops all three. A worker or beat that exits is restarted
(with a back-off and a log line, scripts/supervisor.py); the web server keeps serving meanwhile.

    python scripts/run_dev.py [--port 8000] [--no-import] [--corpus DIR] [--workers 2]     (make run PORT=9000)

Everything lives in DATA_DIR (default <repo>/.data): the SQLite database, the broker
folders, the demo credentials, beat's schedule file. Set DATABASE_URL / CELERY_BROKER_URL to use PostgreSQL
and Redis instead.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from supervisor import Child, Supervisor

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "2")),
                        help="worker pool processes")
    parser.add_argument("--no-import", action="store_true", help="do not import the demo sessions")
    parser.add_argument("--corpus", help="folder of session files to import (default ../shared/corpus)")
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
    # the project, its key and the login; their lines are printed last, below the servers' banners
    login = subprocess.run(manage + ["load_demo", "--no-import"], cwd=REPO, env=env, capture_output=True, text=True)
    if login.returncode != 0:
        sys.stderr.write(login.stdout + login.stderr)
        return login.returncode

    # The worker starts first: the demo import queues compactions, and with a live worker
    # they go to it (none is left waiting for a worker in the importing process).
    worker = Child("worker", [py, "-m", "celery", "-A", "dashboard", "worker", "-l", "info",
                              "--concurrency", str(args.workers), "--without-mingle", "--without-gossip"],
                   restart=True, env=env, cwd=str(REPO))
    # Celery beat sends the continuous tuning task on TUNING_SCHEDULE; its schedule file is
    # CELERY_BEAT_SCHEDULE_FILENAME (in DATA_DIR), so the repository stays clean.
    beat = Child("beat", [py, "-m", "celery", "-A", "dashboard", "beat", "-l", "info"], restart=True, env=env,
                 cwd=str(REPO))
    web = Child("web", manage + ["runserver", f"{args.host}:{args.port}", "--noreload"], env=env, cwd=str(REPO))
    supervisor = Supervisor([worker, beat, web])
    running = threading.Thread(target=supervisor.run, name="supervisor", daemon=True)

    def stop(*_: object) -> None:
        supervisor.request_stop()  # the loop in run() then stops the children

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    running.start()
    try:
        if not args.no_import:
            corpus = ["--corpus", args.corpus] if args.corpus else []
            done = subprocess.run(manage + ["load_demo", "--wait-for-worker", "60", "--no-credentials", *corpus],
                                  cwd=REPO, env=env)
            if done.returncode != 0:
                supervisor.request_stop()
        if wait_for_web(args.host, args.port, running):
            print(f"\n{login.stdout.strip()}\n\nServing http://{args.host}:{args.port}/ : sign in there with the "
                  f"login above (API docs: /api/docs, API keys: on the dashboard). Ctrl-C stops the server, the "
                  f"worker and beat.\n", flush=True)
        while running.is_alive():
            running.join(0.5)
    finally:
        supervisor.request_stop()
        running.join()
    return supervisor.exit_code


def wait_for_web(host: str, port: int, running: threading.Thread, timeout: float = 120.0) -> bool:
    """True once the web server accepts connections (False: it stopped, or never came up)."""
    deadline = time.monotonic() + timeout
    while running.is_alive() and time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


if __name__ == "__main__":
    sys.exit(main())
