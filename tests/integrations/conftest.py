"""Fixtures of the integration tests: the service tests' project and Celery mode (runs
execute inline), for the integrations that talk to a live server."""
from __future__ import annotations

from tests.service.conftest import _eager_celery, _llm_key, project  # noqa: F401
