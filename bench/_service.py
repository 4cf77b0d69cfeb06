"""Shared set-up of the service benchmarks: a throw-away data dir (SQLite + filesystem
broker) unless DATABASE_URL is set, Django configured in this process, a 500-message
session, and helpers to start server / worker subprocesses on loopback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import django
from django.core.management import call_command
from django.db import connection

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the benchmarks run as scripts from bench/
    sys.path.insert(0, str(REPO))


def setup_django(data_dir: str | None = None) -> Path:
    data = Path(data_dir or tempfile.mkdtemp(prefix="cs_bench_"))
    os.environ["DATA_DIR"] = str(data)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    return data


def database_url() -> str:
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s.get("USER") or ""
    if s.get("PASSWORD"):
        auth += ":" + s["PASSWORD"]
    return f"postgres://{auth + '@' if auth else ''}{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def messages_500(n: int = 500) -> list[dict]:
    """A deterministic agent session of exactly ``n`` messages (system, then rounds of
    user / assistant tool call / tool result / assistant text), sized like real runs:
    tool results of ~1-3 kB, so 500 messages are ~100k tokens."""
    words = ("def return import class self value path error test file line module config data "
             "request response session token message context summary archive policy").split()

    def text(seed: int, length: int) -> str:
        return " ".join(words[(seed * 7 + i * 13) % len(words)] for i in range(length))

    out = [{"role": "system", "content": "You are a coding agent. " + text(1, 60)}]
    i = 0
    while len(out) < n:
        cid = f"call_{i}"
        out += [
            {"role": "user", "content": f"Step {i}: " + text(i, 40)},
            {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {
                "name": "bash", "arguments": json.dumps({"command": f"grep -rn {words[i % len(words)]} src/"})}}]},
            {"role": "tool", "tool_call_id": cid, "content": "\n".join(
                f"src/m{i}/f{j}.py:{j * 7}: " + text(i + j, 12) for j in range(12 + i % 20))},
            {"role": "assistant", "content": text(i * 3, 50)},
        ]
        i += 1
    return out[:n]  # a trailing call without its result yet is a legal session


def session_ending_at_user_turn(n: int) -> list[dict]:
    """About ``n`` messages of :func:`messages_500` that end where a user may speak next
    (trailing tool calls and results dropped): what the gateway benches resend."""
    msgs = messages_500(n)
    while msgs[-1].get("tool_calls") or msgs[-1]["role"] == "tool":
        msgs.pop()
    return msgs


def project_with_key(name: str = "bench"):
    from dashboard.services.keys import create_api_key, get_or_create_project  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    project, _ = get_or_create_project(name)
    _row, key = create_api_key(project, "bench")
    return project, key


def import_session(project, messages: list[dict]):
    from dashboard.services.sessions import convert_payload  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.sessions import import_session as do_import  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    return do_import(project, convert_payload(messages), auto_compact=False).session


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


def child_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["DATABASE_URL"] = database_url()
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def start_worker(env: dict, log: Path, concurrency: int = 1, *, name: str | None = None,
                 timeout: float = 180) -> subprocess.Popen:
    """A Celery worker (prefork, ``concurrency`` processes) started with ``env``, once its log
    says it is ready; its log is kept in ``log``."""
    cmd = [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-l", "info", "--concurrency",
           str(concurrency), "--without-mingle", "--without-gossip", "--without-heartbeat"]
    if name is not None:
        cmd += ["-n", name]
    proc = start(cmd, env, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and " ready." in log.read_text(errors="replace"):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace")[-3000:])
        time.sleep(0.1)
    raise RuntimeError("worker not ready")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
