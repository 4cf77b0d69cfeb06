"""`make run` (scripts/run_dev.py) as a new user sees it: the worker is up before the demo
import, so the compactions the import queues go to it (no "queued with no live worker"
warning, no run executed by the importing process), and the API key and login are printed
last, below the web server's and the worker's banners. Celery beat runs beside them: with a
short TUNING_SCHEDULE its tuning task goes through the embedded filesystem broker to the
worker, and its schedule file is written in DATA_DIR, not in the repository. Real processes: run_dev.py with its
Celery worker and runserver, on a throw-away data folder, a free port and a small corpus
whose sessions are over their model's window (each import queues a compaction)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    for i in range(3):
        messages = [{"role": "system", "content": "You are a careful coding agent."}]
        for t in range(12):
            page = " ".join(f"line{k} of the log page {t}" for k in range(120))
            messages += [{"role": "user", "content": f"Step {t} of session {i}: {page}"},
                         {"role": "assistant", "content": f"Noted step {t}."}]
        (folder / f"s{i}.json").write_text(json.dumps({"id": f"demo-{i}", "model": "gpt-4", "messages": messages}))
    return folder


def test_make_run_starts_the_worker_before_the_import_and_prints_the_login_last(tmp_path):
    port = _free_port()
    env = dict(os.environ, DATA_DIR=str(tmp_path / "data"), DEBUG="1", TUNING_SCHEDULE="5")
    in_repo = sorted(REPO.glob("celerybeat-schedule*"))
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    log = tmp_path / "run_dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "run_dev.py"), "--port", str(port),
                                 "--workers", "1", "--corpus", str(_corpus(tmp_path / "corpus"))],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while "Serving http://" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "run_dev.py did not get to serving in 300 s:\n" + \
                log.read_text(errors="replace")[-3000:]
            time.sleep(0.3)
        while "Task dashboard.tune_project[" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline + 60, "beat's tuning task did not reach the worker:\n" + \
                log.read_text(errors="replace")[-3000:]
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    assert "Imported 3 session(s)" in text
    assert "no live worker" not in text, "the import's compactions waited for a worker in the importing process"
    login = text.index("API key:")
    assert text.index(" ready.") < login, "the worker's banner comes before the login"
    assert text.index("Starting development server") < login, "the web server's banner comes before the login"
    assert login < text.index("Serving http://") and text.count("API key:") == 1
    assert "beat: Starting..." in text and "Sending due task continuous-tuning (dashboard.continuous_tuning)" in text
    assert sorted((tmp_path / "data").glob("celerybeat-schedule*")), "beat's schedule file is in DATA_DIR"
    assert sorted(REPO.glob("celerybeat-schedule*")) == in_repo, "beat wrote nothing in the repository"
