"""A worker's pool processes are forked from the process whose recovery loop and heartbeat
threads use the database. A process forked while one of them was inside SQLite inherited
SQLite's process-wide mutexes locked and hung on its first query: a pool process that
never serves, holding the task it was given. Without the guard, 70 of 300 forks hung here."""
from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest
from django.db import connection

from dashboard.services.runs.recover import start_recovery_loop, stop_recovery_loop
from dashboard.services.workers import BeatLoop

FORKS = 40


def forked_children_that_hang(db_path: str) -> int:
    """Fork FORKS children that each open the database and read from it (as a new pool
    process does); how many were still stuck after 5 s."""
    hung = 0
    for _ in range(FORKS):
        pid = os.fork()
        if pid == 0:  # the child: a query, then out without running any of pytest's exit code
            signal.alarm(5)
            try:
                db = sqlite3.connect(db_path, timeout=60)
                db.execute("SELECT count(*) FROM dashboard_compactionrun").fetchone()
                db.close()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        hung += os.WIFSIGNALED(status)
        time.sleep(0.002)  # let the threads get back into their loops
    return hung


@pytest.mark.django_db(transaction=True)
def test_processes_forked_while_the_recovery_and_heartbeat_threads_query_do_not_hang(settings):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's process-wide mutexes are what a fork copied locked; the SQLite pass runs this")
    # both threads as a worker's main process runs them, passes back to back
    settings.RUN_RECOVERY_INTERVAL = 0.001
    settings.WORKER_HEARTBEAT_INTERVAL = 0.001
    # a connection per pass (DB_CONN_MAX_AGE=0): opening and closing one is where SQLite
    # holds its process-wide mutexes longest
    connection.settings_dict["CONN_MAX_AGE"] = 0
    start_recovery_loop()
    beat = BeatLoop("fork-guard-test@host").start()
    try:
        hung = forked_children_that_hang(str(connection.settings_dict["NAME"]))
    finally:
        stop_recovery_loop()
        beat.stop()
    assert hung == 0, f"{hung} of {FORKS} forked processes hung on their first query"
