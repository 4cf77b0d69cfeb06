"""`make run` (scripts/run_dev.py) supervises its processes with scripts/supervisor.py: a worker
that exits (killed, crashed) is started again with a back-off and a log line, and the web
server keeps serving all along; only the web server exiting stops everything. Real child
processes: a small HTTP server stands in for the web server, a sleeping Python process for
the worker (the full `make run` drill with a Celery worker is bench/worker_supervision.py)."""
from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PORT = 18210  # in this worktree's port range
# every test here serves on PORT: under pytest-xdist they run one after the other on one worker
pytestmark = pytest.mark.xdist_group("port-18210")


def _load_supervisor():
    spec = importlib.util.spec_from_file_location("supervisor", REPO / "scripts" / "supervisor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["supervisor"] = module
    spec.loader.exec_module(module)
    return module


sup = _load_supervisor()


def wait_until(predicate, timeout: float, what: str):
    """Poll until predicate() is truthy. Deadlines are generous (60 s): a process starting on
    a loaded machine takes seconds, and a passing test never waits them out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def serving() -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture
def running(tmp_path):
    lines: list[str] = []
    made = []

    def start(worker_cmd: list[str], **kw):
        web = sup.Child("web", [sys.executable, "-m", "http.server", str(PORT), "--bind", "127.0.0.1"],
                        cwd=str(tmp_path))
        worker = sup.Child("worker", worker_cmd, restart=True)
        s = sup.Supervisor([web, worker], poll=0.05, log=lines.append, **kw)
        th = threading.Thread(target=s.run, daemon=True)
        th.start()
        made.append((s, th))
        wait_until(serving, 60, "the web stand-in to serve")
        return s, web, worker, lines

    yield start
    for s, th in made:
        s.request_stop()
        th.join(timeout=30)


def test_a_killed_worker_is_restarted_and_the_web_server_keeps_serving(running):
    s, web, worker, lines = running([sys.executable, "-c", "import time; time.sleep(600)"])
    first = worker.pid
    web_pid = web.pid
    os.killpg(first, signal.SIGKILL)
    wait_until(lambda: worker.pid != first and worker.alive(), 60, "the worker to be restarted")
    assert any(f"worker (pid {first}) exited with -9; restarting it in 1 s" in line for line in lines), lines
    assert any(line.startswith("worker restarted (pid ") for line in lines), lines
    assert web.alive() and web.pid == web_pid and serving()


def test_a_worker_that_keeps_crashing_is_restarted_with_a_growing_back_off(running):
    s, web, worker, lines = running([sys.executable, "-c", "raise SystemExit(3)"], max_backoff=2.0)
    wait_until(lambda: worker.restarts >= 3, 60, "three restarts")
    delays = [line.split("restarting it in ")[1].split(" s")[0] for line in lines if "restarting it in" in line]
    assert delays[:3] == ["1", "2", "2"]
    assert web.alive() and serving()


def test_the_web_server_exiting_stops_the_worker_too(running):
    s, web, worker, lines = running([sys.executable, "-c", "import time; time.sleep(600)"])
    os.killpg(web.pid, signal.SIGTERM)
    wait_until(lambda: not worker.alive(), 60, "the worker to be stopped")
    assert s.exit_code != 0 and any(line.startswith("web exited with") for line in lines)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", PORT)) != 0
