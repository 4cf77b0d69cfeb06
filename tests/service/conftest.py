"""Fixtures of the service tests.

Database: SQLite (a file, so worker processes can share it) unless DATABASE_URL points at
PostgreSQL; CI runs the suite both ways. Runs execute inline (Celery eager mode) except in
tests that start a real worker process with ``start_worker`` (filesystem broker in a temp
dir, or Redis db 3). Tests that need Redis skip with the reason when it is unreachable,
except under CI=true, where they fail.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
import redis
from django.db import connection

from dashboard.brokers import filesystem_transport_options
from dashboard.celery import app, use_broker
from dashboard.services import keys
from dashboard.services.keys import create_api_key, get_or_create_project
from tests.service.helpers import chat
from tests.support import gateway_writes
from tests.support.llm_server import ScriptedLLMServer

REPO = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/3")
IN_CI = os.environ.get("CI", "").lower() == "true"


# -- services ------------------------------------------------------------------------

def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_redis() -> None:
    u = urlparse(REDIS_URL)
    if not _reachable(u.hostname or "127.0.0.1", u.port or 6379):
        msg = f"Redis is not reachable at {REDIS_URL}"
        if IN_CI:
            pytest.fail(msg + " (CI=true: Redis tests must run)")
        pytest.skip(msg)


# -- celery mode ----------------------------------------------------------------------

@pytest.fixture(autouse=True)
def _eager_celery(settings):
    """Runs execute inline unless a test starts a worker; no recovery thread in tests. The
    no-worker fallback is off unless a test turns it on (a run left queued on purpose must
    not execute in this process later, during another test)."""

    # With a settings namespace, Celery reads CELERY_* keys first: set those.
    app.conf.CELERY_TASK_ALWAYS_EAGER = True
    app.conf.CELERY_TASK_EAGER_PROPAGATES = True
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.RUN_NO_WORKER_FALLBACK = "off"
    keys.clear_cache()
    yield
    app.conf.CELERY_TASK_ALWAYS_EAGER = True
    keys.clear_cache()


def _use_broker(url: str, transport_options: dict) -> None:
    use_broker(url, transport_options)


# -- API helpers -----------------------------------------------------------------------

class Api:
    """The Django test client with a project's key; runs queued during a request execute
    inline (after the request's transaction commits), as a worker would run them."""

    def __init__(self, client, key: str | None, capture=None):
        self.client = client
        self.key = key
        self.capture = capture

    def headers(self, key: str | None = "default", style: str = "bearer") -> dict:
        key = self.key if key == "default" else key
        if key is None:
            return {}
        return {"HTTP_AUTHORIZATION": f"Bearer {key}"} if style == "bearer" else {"HTTP_X_API_KEY": key}

    def _call(self, method: str, path: str, body=None, key="default", style="bearer", **extra):
        kwargs = dict(self.headers(key, style), **extra)
        if body is not None:
            kwargs["data"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
            kwargs["content_type"] = "application/json"
        fn = getattr(self.client, method)
        if self.capture is not None:
            with self.capture(execute=True):
                return fn(path, **kwargs)
        return fn(path, **kwargs)

    def get(self, path, **kw):
        return self._call("get", path, **kw)

    def post(self, path, body=None, **kw):
        return self._call("post", path, body if body is not None else {}, **kw)

    def put(self, path, body=None, **kw):
        return self._call("put", path, body if body is not None else {}, **kw)

    def delete(self, path, **kw):
        return self._call("delete", path, **kw)


@pytest.fixture
def project(db):
    p, _ = get_or_create_project("acme")
    _row, key = create_api_key(p, "tests")
    p.test_key = key
    return p


@pytest.fixture
def other_project(db):
    p, _ = get_or_create_project("globex")
    _row, key = create_api_key(p, "tests")
    p.test_key = key
    return p


@pytest.fixture
def api(client, project, django_capture_on_commit_callbacks):
    return Api(client, project.test_key, django_capture_on_commit_callbacks)


@pytest.fixture
def live_api(client, project):
    """For transactional tests (real commits): no callback capture needed."""
    return Api(client, project.test_key, None)


# -- sessions to work with ----------------------------------------------------------------


@pytest.fixture
def small_session(api):
    r = api.post("/api/sessions", {"messages": chat(8), "title": "small", "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]



# -- a scripted LLM over HTTP ------------------------------------------------------------------

SCRIPTED_CONNECTION = "scripted"


def scripted_connection(server) -> dict:
    """The operator's connection to the scripted server (a loopback address, so private
    networks are allowed), with the test key in CS_TEST_LLM_KEY."""
    return {"name": SCRIPTED_CONNECTION, "models": ["openai/*"], "api_base": server.api_base,
            "api_key_env": "CS_TEST_LLM_KEY", "allow_private_network": True}


@pytest.fixture
def llm_server(settings, monkeypatch):
    """A scripted OpenAI-compatible server, declared by the operator as the model
    connection "scripted" (in this process's settings and in the environment that worker
    processes started by the test inherit)."""
    with ScriptedLLMServer() as server:
        declared = [scripted_connection(server)]
        settings.COMPACTION_CONNECTIONS = declared
        monkeypatch.setenv("COMPACTION_CONNECTIONS", json.dumps(declared))
        yield server



@pytest.fixture(autouse=True)
def _gateway_writes(monkeypatch):
    """Gateway answers are counted until the write after them has run (see
    tests.support.gateway_writes): the gateway tests' SDK clients wait for it."""
    gateway_writes.install(monkeypatch)


@pytest.fixture(autouse=True)
def _llm_key(monkeypatch):
    monkeypatch.setenv("CS_TEST_LLM_KEY", "test-key")


# -- real worker processes ----------------------------------------------------------------------

def database_url_for_workers() -> str:
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{s['NAME']}"
    user = quote(s.get("USER") or "")
    pw = quote(s.get("PASSWORD") or "")
    auth = f"{user}:{pw}@" if pw else (f"{user}@" if user else "")
    return f"postgres://{auth}{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


class Worker:
    def __init__(self, cmd, env, log: Path):
        self.cmd, self.env, self.log = cmd, env, log
        self.proc: subprocess.Popen | None = None
        self.name = ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pool_pids(self) -> list[int]:
        """The pool processes the worker's main process forked, from any of its threads (the
        pool replaces a dead process from a thread of its own; Linux /proc)."""
        if not self.alive():
            return []
        found = []
        for task in Path(f"/proc/{self.proc.pid}/task").glob("*"):
            try:
                found += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                pass
        return found

    def start(self, timeout: float = 90) -> Worker:
        self._fh = open(self.log, "ab")
        self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=REPO, stdout=self._fh, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")[offset:] if self.log.exists() else ""
            if " ready." in text:
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready after {timeout}s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes: a machine dying mid-run."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, grace: float = 3.0) -> None:
        """End of the test: a warm shutdown if it is quick, else SIGKILL. Nothing is checked
        after it; waiting up to 20 s (a run still in a scripted, hanging model call) cost the
        suite's teardowns tens of seconds."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # warm shutdown: the main process stops its pool
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # pool processes left behind, if any
            except ProcessLookupError:
                pass
            if self.proc.poll() is None:
                self.proc.wait(timeout=10)
        if getattr(self, "_fh", None):
            self._fh.close()

    def tail(self, n: int = 60) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@pytest.fixture
def start_worker(transactional_db, tmp_path, request):
    """start_worker(broker="filesystem"|"redis", pool="prefork", concurrency=1, redis_url=None) -> Worker.

    The worker shares this test's database and broker; its runs heartbeat every 0.3 s, a run
    silent for 8 s is treated as lost and a run queued for 20 s is sent again (short, so
    recovery tests finish quickly, yet far above what a loaded machine delays a heartbeat or
    a worker's start by: with 2 s and 3 s, a run starved of CPU for 2 s was taken from the
    living worker that held it, and a second worker still starting got a third delivery)."""
    workers: list[Worker] = []
    state: dict = {}

    def start(broker: str = "filesystem", pool: str = "prefork", concurrency: int = 1, redis_url: str | None = None,
              **env_extra) -> Worker:
        if "broker" not in state:
            if broker == "redis":
                if redis_url is None:
                    require_redis()
                redis_url = redis_url or REDIS_URL
                redis.Redis.from_url(redis_url).flushdb()
                url, opts = redis_url, {"visibility_timeout": 3600, "polling_interval": 0.1}
                broker_env = {"CELERY_BROKER_URL": redis_url}
            else:
                bdir = tmp_path / "broker"
                url, opts = "filesystem://", filesystem_transport_options(bdir)
                broker_env = {"CELERY_BROKER_URL": "filesystem://", "BROKER_DIR": str(bdir)}
            _use_broker(url, opts)
            state.update(broker=broker, env=broker_env, folder=tmp_path / "broker")
        env = dict(os.environ)
        env.update(state["env"])
        env.update({
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "DATABASE_URL": database_url_for_workers(),
            "PYTHONPATH": str(REPO),
            "RUN_HEARTBEAT_INTERVAL": "0.3",
            "RUN_STALE_AFTER": "8",
            "RUN_RECOVERY_INTERVAL": "0.5",
            "RUN_RESEND_AFTER": "20",
            "CS_TEST_LLM_KEY": "test-key",
            "CELERY_TASK_ALWAYS_EAGER": "0",
        })
        env.update({k: str(v) for k, v in env_extra.items()})
        n = len(workers) + 1
        cmd = [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-l", "info", "--pool", pool,
               "--concurrency", str(concurrency), "--without-mingle", "--without-gossip", "--without-heartbeat",
               "-n", f"test{n}-{os.getpid()}@%h"]
        w = Worker(cmd, env, tmp_path / f"worker{n}.log").start()
        w.name = f"test{n}-{os.getpid()}@{socket.gethostname()}"
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()

    app.conf.CELERY_TASK_ALWAYS_EAGER = True
    if request.node.rep_call_failed if hasattr(request.node, "rep_call_failed") else False:
        for w in workers:
            print(f"--- {w.log} ---\n{w.tail()}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call_failed = rep.failed
