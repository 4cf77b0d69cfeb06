"""Suite-wide setup that must hold before any test module is imported: under pytest-xdist
(``make test`` runs ``pytest -n 2``) each worker process gets resources of its own.

- Redis: worker N uses the database TEST_REDIS_URL names plus N (db 3 and 4 by default),
  so one worker's FLUSHDB never empties the queue of a run the other is waiting for. The
  variable is rewritten in this process's environment, so worker processes that a test
  starts inherit the same database.
- SQLite: the test database is named after the process id (dashboard.settings), so each
  xdist worker has its own file; PostgreSQL test databases get pytest-django's per-worker
  suffix (test_<name>_gw0, ...).

Tests that share something fixed (a port, a file outside tmp_path) carry
``@pytest.mark.xdist_group("<resource>")``; ``--dist loadgroup`` runs a group's tests one
after the other on one worker.
"""
from __future__ import annotations

import os

import pytest
from django.db import connection
from django.test.utils import override_settings

from tests.support import passwords, schedule
from tests.support.xdist import redis_url_for_this_worker

# Once per process: a pytest started by a test inherits both variables and must not move on.
if os.environ.get("CS_TEST_REDIS_WORKER") != os.environ.get("PYTEST_XDIST_WORKER", ""):
    os.environ["TEST_REDIS_URL"] = redis_url_for_this_worker(
        os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/3"))
    os.environ["CS_TEST_REDIS_WORKER"] = os.environ.get("PYTEST_XDIST_WORKER", "")


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the slowest tests start first (tests/support/schedule.py)."""
    if hasattr(config, "workerinput"):
        items[:] = schedule.slowest_first(items, schedule.recorded())


@pytest.fixture(scope="session", autouse=True)
def _quick_password_hashing():
    """Users' passwords hash with few iterations (tests/support/passwords.py)."""
    with override_settings(PASSWORD_HASHERS=passwords.HASHERS):
        yield


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test databases, with one thing more at the end on PostgreSQL: the
    sessions still open on this worker's test database (threads of live test servers, the
    pool connections of worker processes a drill killed) are closed before it is dropped,
    which otherwise failed with "being accessed by other users" and left the database behind."""
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
