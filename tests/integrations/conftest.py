"""Fixtures of the integration tests: the service's fixtures for the remote-mode tests
(a project with an API key, runs executed inline), and the rule for a framework that is
not installed: the tests skip with the reason, except under CI=true, where they fail."""
from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from tests.service.conftest import _eager_celery, _llm_key, project, start_worker  # noqa: F401

IN_CI = os.environ.get("CI", "").lower() == "true"
T = TypeVar("T")


def require(module: str, extra: str) -> None:
    """Skip the calling test module when ``module`` is missing (fail under CI=true)."""
    if importlib.util.find_spec(module) is not None:
        return
    msg = f"{module} is not installed (pip install .[{extra}])"
    if IN_CI:
        pytest.fail(msg + " (CI=true: integration tests must run)", pytrace=False)
    pytest.skip(msg, allow_module_level=True)


def off_the_event_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread of its own: its result, or its exception raised here.

    Once a browser test has run in this process, pytest-playwright's sync API keeps an event
    loop running in the main thread, and ``asyncio.run`` (what an agent's own script calls)
    refuses to start beside it. An agent's script runs with no loop around it; so do these."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args).result()


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` as a script would run it (see ``off_the_event_loop``)."""
    return off_the_event_loop(asyncio.run, coro)
