"""Fixtures of the integration tests: the service's fixtures for the remote-mode tests
(a project with an API key, runs executed inline), and the rule for a framework that is
not installed: the tests skip with the reason, except under CI=true, where they fail."""
from __future__ import annotations

import importlib.util
import os

import pytest

from tests.service.conftest import _eager_celery, _llm_key, project, start_worker  # noqa: F401

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(module: str, extra: str) -> None:
    """Skip the calling test module when ``module`` is missing (fail under CI=true)."""
    if importlib.util.find_spec(module) is not None:
        return
    msg = f"{module} is not installed (pip install .[{extra}])"
    if IN_CI:
        pytest.fail(msg + " (CI=true: integration tests must run)", pytrace=False)
    pytest.skip(msg, allow_module_level=True)
