"""Keeps the processes of `make run` alive (standard library only; scripts/run_dev.py uses it).

Each process is a :class:`Child`. A child with ``restart=True`` (the Celery worker) that
exits is started again after a back-off (1 s, doubling up to ``max_backoff``; back to 1 s
once it has stayed up ``stable_after`` seconds), with a log line each time. A child with
``restart=False`` (the web server) that exits stops everything: without it there is
nothing to use. So a worker that dies of anything never takes the web server with it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


def _log(line: str) -> None:
    print(f"[supervisor] {line}", file=sys.stderr, flush=True)


@dataclass
class Child:
    name: str
    cmd: Sequence[str]
    restart: bool = False
    env: dict[str, str] | None = None
    cwd: str | None = None
    proc: subprocess.Popen[Any] | None = None
    restarts: int = 0
    started_at: float = 0.0
    backoff: float = 1.0
    next_start: float | None = None
    history: list[tuple[float, int | None]] = field(default_factory=list)  # (when, exit code)

    def start(self) -> None:
        self.proc = subprocess.Popen(list(self.cmd), cwd=self.cwd, env=self.env, start_new_session=True)
        self.started_at = time.monotonic()
        self.next_start = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Supervisor:
    def __init__(self, children: Sequence[Child], *, max_backoff: float = 30.0, stable_after: float = 60.0,
                 poll: float = 0.3, log: Callable[[str], None] = _log):
        self.children = list(children)
        self.max_backoff, self.stable_after, self.poll = max_backoff, stable_after, poll
        self.log = log
        self.exit_code = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        for child in self.children:
            child.start()

    def tick(self) -> bool:
        """One look at every child; False once the supervisor should stop."""
        now = time.monotonic()
        for child in self.children:
            if child.proc is None or self._stopping.is_set():
                continue
            code = child.proc.poll()
            if code is None:
                if child.restart and now - child.started_at >= self.stable_after:
                    child.backoff = 1.0
                continue
            if child.next_start is None:
                child.history.append((now, code))
                if not child.restart:
                    self.log(f"{child.name} exited with {code}; stopping")
                    self.exit_code = code or 1
                    return False
                delay = child.backoff
                child.backoff = min(self.max_backoff, child.backoff * 2)
                child.next_start = now + delay
                self.log(f"{child.name} (pid {child.proc.pid}) exited with {code}; restarting it in {delay:g} s "
                         f"(restart {child.restarts + 1}); the other processes keep running")
            elif now >= child.next_start:
                child.restarts += 1
                child.start()
                self.log(f"{child.name} restarted (pid {child.pid})")
        return True

    def run(self) -> int:
        """Start every child and supervise until a non-restarting child exits or
        :meth:`stop` is called; returns the exit code."""
        self.start()
        try:
            while not self._stopping.is_set():
                if not self.tick():
                    break
                self._stopping.wait(self.poll)
        finally:
            self.stop()
        return self.exit_code

    def request_stop(self) -> None:
        """Ask :meth:`run` to stop (safe from a signal handler)."""
        self._stopping.set()

    def stop(self, grace: float = 30.0) -> None:
        with self._lock:
            self._stopping.set()
            for child in self.children:
                if child.alive():
                    assert child.proc is not None
                    child.proc.send_signal(signal.SIGTERM)  # runserver exits; the worker finishes its task
            deadline = time.monotonic() + grace
            for child in self.children:
                if child.proc is None:
                    continue
                try:
                    child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(child.proc.pid, signal.SIGKILL)
                    child.proc.wait()
