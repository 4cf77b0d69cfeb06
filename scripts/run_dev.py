#!/usr/bin/env python
"""What `make run` runs: migrate, create the demo project (prints its API key and a login),
import the demo sessions, then serve http://127.0.0.1:8000 and run a Celery worker on the
embedded filesystem broker. Ctrl-C stops both. A worker that exits is restarted (with a
back-off and a log line, scripts/supervisor.py); the web server keeps serving meanwhile.

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

    web = Child("web", manage + ["runserver", f"{args.host}:{args.port}", "--noreload"], env=env, cwd=str(REPO))
    worker = Child("worker", [py, "-m", "celery", "-A", "dashboard", "worker", "-l", "info",
                              "--concurrency", str(args.workers), "--without-mingle", "--without-gossip"],
                   restart=True, env=env, cwd=str(REPO))
    supervisor = Supervisor([web, worker])
    print(f"\nServing http://{args.host}:{args.port}/ : sign in there with the login above (API docs: /api/docs, "
          f"API keys: on the dashboard). Ctrl-C stops the server and the worker.\n", flush=True)

    def stop(*_: object) -> None:
        supervisor.request_stop()  # the loop in run() then stops the children

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
