"""What the servers write to their logs: a 500 leaves its traceback with DEBUG off, and a
credential put in a query string never reaches a log line (runserver, gunicorn, ours)."""
from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.test import Client

from dashboard import log_filters
from dashboard.log_filters import scrub_credentials
from dashboard.services import keys
from dashboard.services.projects import set_member

REPO = Path(__file__).resolve().parents[2]
SECRET = "cs_ThisIsTheSecretPartOfAKey0123456789"


@contextmanager
def console_of(logger_name: str):
    """What the handlers settings.LOGGING gives ``logger_name`` print (their real filters and
    formatters; only their stream is swapped for a buffer)."""
    handlers = [h for h in logging.getLogger(logger_name).handlers if isinstance(h, logging.StreamHandler)]
    assert handlers, f"no console handler on {logger_name}"
    buffer = io.StringIO()
    old = [h.setStream(buffer) for h in handlers]
    try:
        yield buffer
    finally:
        for h, stream in zip(handlers, old, strict=True):
            h.setStream(stream)


def _boom(*args, **kwargs):
    raise RuntimeError("boom from inside the view")


@pytest.mark.parametrize("where", ["api", "page"])
def test_a_500_logs_its_traceback_with_debug_off(settings, db, project, django_user_model, monkeypatch, where):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    if where == "api":
        monkeypatch.setattr("dashboard.selectors.sessions.list_sessions", _boom)
        request = lambda: client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {project.test_key}")  # noqa: E731
    else:
        bob = django_user_model.objects.create_user("bob", password="pw-pw-pw-pw")
        set_member(project, bob, "owner")  # pages show a user only their projects
        client.force_login(bob)
        monkeypatch.setattr("dashboard.views.sessions_list.sessions_page", _boom)
        request = lambda: client.get("/sessions/")  # noqa: E731
    records: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("django.request").addHandler(catcher)
    try:
        with console_of("django.request") as out:
            r = request()
    finally:
        logging.getLogger("django.request").removeHandler(catcher)
    assert r.status_code == 500
    errors = [rec for rec in records if rec.levelno >= logging.ERROR]
    assert errors and errors[0].exc_info and errors[0].exc_info[0] is RuntimeError
    printed = out.getvalue()
    assert "Traceback (most recent call last)" in printed and "boom from inside the view" in printed


@pytest.mark.parametrize("line, kept", [
    (f'"GET /api/sessions?api_key={SECRET}&limit=5 HTTP/1.1" 401 27', "limit=5"),
    ('"GET /api/sessions?limit=5&token=abc123 HTTP/1.1" 401 27', "limit=5"),
    (f'"GET /api/sessions?Authorization=Bearer%20{SECRET} HTTP/1.1" 401 27', "/api/sessions?"),
    (f'"GET /sessions/?q=x&whatever={SECRET} HTTP/1.1" 200 10', "q=x"),
    ('"GET /api/sessions?password=hunter2 HTTP/1.1" 401 27', "/api/sessions"),
])
def test_credentials_in_a_query_string_are_scrubbed(line, kept):
    out = scrub_credentials(line)
    assert SECRET not in out and "hunter2" not in out and "abc123" not in out
    assert "[scrubbed]" in out and kept in out and out.endswith(line.rsplit('"', 1)[1])


def test_ordinary_query_strings_are_left_alone():
    line = '"GET /sessions/12/?summary_key=app/tool&around=40 HTTP/1.1" 200 512'
    assert scrub_credentials(line) == line


def test_the_filter_knows_the_key_prefix():
    assert log_filters.API_KEY_PREFIX == keys.KEY_PREFIX


def test_our_loggers_scrub_too():
    with console_of("dashboard") as out:
        logging.getLogger("dashboard.runs").warning("refused %s", f"/api/sessions?key={SECRET}")
    assert SECRET not in out.getvalue() and "key=[scrubbed]" in out.getvalue()


# -- real servers -------------------------------------------------------------------------------

def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _free_port() -> int:
    """A port nothing listens on now (the kernel's pick), so a busy fixed port cannot skip
    the test."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(cmd: Callable[[int], list[str]], tmp_path: Path) -> tuple[subprocess.Popen, Path, int]:
    """Start the server on a free port; (process, its log, the port)."""
    env = dict(os.environ, DEBUG="0", DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(REPO),
               DJANGO_SETTINGS_MODULE="dashboard.settings")
    # its own SQLite file: the suite's DATABASE_URL (the PostgreSQL pass) names a database
    # that only exists under pytest-django's test name
    env.pop("DATABASE_URL", None)
    for attempt in range(3):   # another process may take the port between our pick and the bind
        port = _free_port()
        log = tmp_path / f"server-{attempt}.log"
        proc = subprocess.Popen(cmd(port), cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if "in use" in log.read_text():
                    break
                pytest.fail(f"server exited: {log.read_text()}")
            if not _free(port):
                return proc, log, port
            time.sleep(0.2)
        else:
            proc.kill()
            pytest.fail(f"server did not listen on {port}: {log.read_text()}")
    pytest.fail("three free ports were taken before the server could bind them")


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


SERVERS: dict[str, Callable[[int], list[str]]] = {
    "runserver": lambda port: [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
    "gunicorn": lambda port: [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "-b", f"127.0.0.1:{port}",
                              "-w", "1", "--access-logfile", "-", "--access-logformat",
                              '%(r)s %(s)s q=%(q)s auth=%({authorization}i)s'],
}


@pytest.mark.parametrize("server", list(SERVERS))
def test_the_access_log_of_a_real_server_holds_no_key(tmp_path, server):
    proc, log, port = _serve(SERVERS[server], tmp_path)
    try:
        assert _get(f"http://127.0.0.1:{port}/healthz?api_key={SECRET}&probe=1") == 200
        req = urllib.request.Request(f"http://127.0.0.1:{port}/healthz?probe=2",
                                     headers={"Authorization": f"Bearer {SECRET}"})
        urllib.request.urlopen(req, timeout=10).close()
        deadline = time.monotonic() + 60  # the access log line may come late on a loaded machine
        while "probe=2" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)
    text = log.read_text()
    assert "probe=1" in text and "probe=2" in text, text
    assert "api_key=[scrubbed]" in text and SECRET not in text, text


def test_an_upstream_echo_of_a_key_is_logged_without_it():
    """A failure logged with an upstream's error text (which echoed the request's key) and its
    traceback: the console line holds neither the bearer token nor the provider key."""
    echoed = "Incorrect API key provided: sk-proj-EchoedKey0123456789. Authorization: Bearer op-key-0123456789abc"
    log = logging.getLogger("dashboard.gateway.views")
    with console_of("dashboard") as out:
        try:
            raise RuntimeError(f"upstream said: {echoed}")
        except RuntimeError:
            log.exception("gateway request failed: %s", echoed)
    text = out.getvalue()
    assert "gateway request failed" in text and "RuntimeError: upstream said: Incorrect API key provided" in text
    assert "sk-proj-EchoedKey0123456789" not in text and "op-key-0123456789abc" not in text
    assert "Authorization: Bearer [REDACTED]" in text
