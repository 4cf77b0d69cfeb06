"""Drill of `make run`: start scripts/run_dev.py in a throw-away data dir, SIGKILL its Celery
worker (the whole process group, pool included) a few times, and measure how long until a
new worker is ready, whether the web server answered all along, and whether a forced run
requested while the worker was down still completes.

    .venv/bin/python bench/worker_supervision.py [--port 18212] [--kills 3]

The web server is polled (GET /login/) every 0.2 s from the first kill to the end. Output:

    kill=<i> worker_back_s=<float> web_failures=<n>/<polls>
    forced_run_while_down: status=<status> inline=<bool> done_s=<float>
    run_dev_alive=<yes|NO> supervisor_lines=<n>
Prints figures only.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def worker_pid(run_dev: int) -> int | None:
    for pid in children(run_dev):
        if "celery" in cmdline(pid):
            return pid
    return None


def request(url: str, key: str | None = None, body: dict | None = None) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {key}"} if key else {})})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18212)
    ap.add_argument("--kills", type=int, default=3)
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="cs_supervision_"))
    env = dict(os.environ, DATA_DIR=str(data), PORT=str(args.port), DEBUG="1", LOG_LEVEL="WARNING",
               RUN_NO_WORKER_WAIT="60")
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    log = data / "run_dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "run_dev.py"), "--no-import", "--workers", "1"],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{args.port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if " ready." in log.read_text(errors="replace") and worker_pid(proc.pid):
                try:
                    urllib.request.urlopen(base + "/login/", timeout=2).read()
                    break
                except OSError:
                    pass
            if proc.poll() is not None:
                raise SystemExit(log.read_text(errors="replace")[-3000:])
            time.sleep(0.3)
        key = json.loads((data / "demo_credentials.json").read_text())["api_key"]
        polls, failures, stop = [0], [0], threading.Event()

        def poll_web() -> None:
            while not stop.is_set():
                polls[0] += 1
                try:
                    urllib.request.urlopen(base + "/login/", timeout=5).read()
                except OSError:
                    failures[0] += 1
                stop.wait(0.2)

        poller = threading.Thread(target=poll_web, daemon=True)
        poller.start()
        messages = [{"role": "user", "content": f"question {i} " + "word " * 80} if i % 2 == 0 else
                    {"role": "assistant", "content": f"answer {i} " + "word " * 80} for i in range(60)]
        sid = request(base + "/api/sessions", key, {"messages": messages, "auto_compact": False})["session"]["id"]
        for i in range(args.kills):
            pid = worker_pid(proc.pid)
            if pid is None:
                raise SystemExit("no worker under run_dev")
            ready_before = log.read_text(errors="replace").count(" ready.")
            t0 = time.perf_counter()
            os.killpg(pid, signal.SIGKILL)
            if i == 0:  # a run requested while no worker is running
                ref = request(f"{base}/api/sessions/{sid}/compactions", key, {"reason": "worker down"})
                run_id, t_run = ref["run_id"], time.perf_counter()
            while log.read_text(errors="replace").count(" ready.") <= ready_before:
                if time.perf_counter() - t0 > 120:
                    raise SystemExit("the worker did not come back within 120 s")
                time.sleep(0.1)
            print(f"kill={i + 1} worker_back_s={time.perf_counter() - t0:.1f} "
                  f"web_failures={failures[0]}/{polls[0]}", flush=True)
            if i == 0:
                while True:
                    run = request(f"{base}/api/runs/{run_id}", key)
                    if run["status"] in ("succeeded", "failed", "skipped") or time.perf_counter() - t_run > 120:
                        break
                    time.sleep(0.2)
                print(f"forced_run_while_down: status={run['status']} inline={run['inline']} "
                      f"done_s={time.perf_counter() - t_run:.1f}", flush=True)
            time.sleep(3)
        stop.set()
        poller.join()
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("[supervisor]")]
        print(f"web_failures={failures[0]}/{polls[0]} run_dev_alive={'yes' if proc.poll() is None else 'NO'} "
              f"supervisor_lines={len(lines)}", flush=True)
        for line in lines:
            print(f"# {line}")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
