"""Requests/s of GET /api/sessions/{id}/context on a 500-message session, against a trivial
JSON view (/healthz) served by the same server in the same run.

    .venv/bin/python bench/api_throughput.py [--port 8190] [--seconds 8] [--clients 4] [--rounds 2]
                                             [--server auto|runserver|gunicorn]

A throw-away data dir (SQLite) is used unless DATABASE_URL is set. The server is gunicorn
(2 workers) when it is installed, else Django's threaded runserver; DEBUG is off. Load comes from
loopback only: `wrk` when it is on PATH, else Python client processes; one connection
per request (see _client). Rounds alternate trivial / context so drift hits both. Output:

    # session: 500 messages, <bytes> bytes of context, <tokens> tokens
    trivial_rps=<float> context_rps=<float> ratio=<context/trivial>    (goal: ratio >= 0.5)
Prints figures only.
"""
from __future__ import annotations

import argparse
import http.client
import importlib.util
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402


def _client(port: int, path: str, headers: dict, seconds: float, out) -> None:
    # One connection per request ("Connection: close"): Django's runserver answers a
    # keep-alive request in two small writes, and Nagle + delayed ACK then add ~40 ms to
    # every request whatever the view does, which would hide the views' own costs.
    headers = dict(headers, Connection="close")
    done = errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", path, headers=headers)
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                done += 1
            else:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
        finally:
            conn.close()
    out.put((done, errors))


def load_python(port: int, path: str, headers: dict, seconds: float, clients: int) -> float:
    q = mp.Queue()
    procs = [mp.Process(target=_client, args=(port, path, headers, seconds, q)) for _ in range(clients)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.monotonic() - t0
    done = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    if errors:
        print(f"# {path}: {errors} failed requests", flush=True)
    return done / max(elapsed, seconds)


def load_wrk(port: int, path: str, headers: dict, seconds: float, clients: int) -> float:
    cmd = ["wrk", "-t", "2", "-c", str(clients), "-d", f"{int(seconds)}s", "-H", "Connection: close"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run(cmd + [f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return float(m.group(1)) if m else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8190)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server", choices=("auto", "runserver", "gunicorn"), default="auto",
                    help="auto: gunicorn when installed (the production server), else runserver")
    ap.add_argument("--gunicorn-workers", type=int, default=2)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    data = svc.setup_django(args.data_dir)
    project, key = svc.project_with_key()
    session = svc.import_session(project, svc.messages_500())
    from dashboard.models import SessionContext  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    size = len(SessionContext.objects.get(session=session).rendered)
    print(f"# session: {session.message_count} messages, {size} bytes of context, {session.context_total} tokens",
          flush=True)

    env = svc.child_env(DEBUG="0", LOG_LEVEL="WARNING")
    if args.server == "auto":
        args.server = "gunicorn" if importlib.util.find_spec("gunicorn") else "runserver"
    if args.server == "gunicorn":
        if importlib.util.find_spec("gunicorn") is None:
            sys.exit("gunicorn is not installed (pip install gunicorn)")
        import gunicorn  # noqa: PLC0415  (optional: only when serving with gunicorn)

        env["PYTHONPATH"] += os.pathsep + str(Path(gunicorn.__file__).parent.parent)
        cmd = [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "-b", f"127.0.0.1:{args.port}",
               "-w", str(args.gunicorn_workers), "--threads", "2", "--access-logfile", "-", "--log-level", "warning"]
    else:
        cmd = [sys.executable, str(svc.REPO / "manage.py"), "runserver", f"127.0.0.1:{args.port}", "--noreload"]
    server = svc.start(cmd, env, data / "server.log")
    try:
        svc.wait_http(f"http://127.0.0.1:{args.port}/healthz")
        load = load_wrk if shutil.which("wrk") else load_python
        print(f"# server={args.server} client={'wrk' if load is load_wrk else 'python'} clients={args.clients} "
              f"seconds={args.seconds} rounds={args.rounds}", flush=True)
        ctx_path = f"/api/sessions/{session.pk}/context"
        auth = {"Authorization": f"Bearer {key}"}
        load(args.port, ctx_path, auth, 1.0, 1)  # warm-up
        trivial, context = [], []
        for r in range(args.rounds):
            trivial.append(load(args.port, "/healthz", {}, args.seconds, args.clients))
            context.append(load(args.port, ctx_path, auth, args.seconds, args.clients))
            print(f"# round {r + 1}: trivial_rps={trivial[-1]:.1f} context_rps={context[-1]:.1f}", flush=True)
        t, c = statistics.median(trivial), statistics.median(context)
        print(f"trivial_rps={t:.1f} context_rps={c:.1f} ratio={c / t:.2f}")
    finally:
        svc.stop(server)


if __name__ == "__main__":
    main()
