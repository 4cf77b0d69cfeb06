"""Fixtures of the page tests (Django test client). Runs execute inline (eager Celery) when
their enqueueing transaction commits, as a worker would run them."""
from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

import pytest  # noqa: E402

from dashboard.celery import app
from dashboard.models import CompactionRun, RunStatus
from tests.pages import factories  # noqa: E402
from tests.support.llm_server import ScriptedLLMServer, error  # noqa: E402


@pytest.fixture(autouse=True)
def _eager_celery(settings):
    """Runs execute inline when their transaction commits, unless a test starts a worker."""

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    settings.CELERY_TASK_ALWAYS_EAGER = True
    yield
    app.conf.task_always_eager = True


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user("alice", password="correct horse battery")


@pytest.fixture
def web(client, user):
    """A signed-in browser session."""
    client.force_login(user)
    return client


@pytest.fixture
def project(db, user):
    """The project "acme", owned by the signed-in user alice."""
    return factories.add_member(factories.make_project("acme"), user)


@pytest.fixture
def small(project):
    """A 10-turn session, never compacted."""
    return factories.import_messages(project, factories.agent_messages(10), title="small session")


@pytest.fixture
def grown(project, django_capture_on_commit_callbacks):
    """A session that grew message by message with auto compaction: several runs fired."""
    s = factories.grow(project, factories.agent_messages(30, tag="g"), title="grown session",
                       capture=django_capture_on_commit_callbacks)
    assert s.compaction_count >= 2, "the test policy should have compacted this session"
    return s


@pytest.fixture
def last_run(grown):
    return CompactionRun.objects.filter(session=grown, status=RunStatus.SUCCEEDED).order_by("-id").first()


# -- Dashboard v2 lists: a run that really fails -------------------------------------------

@pytest.fixture
def fail_run(settings, monkeypatch, django_capture_on_commit_callbacks):
    """force(session) whose summarizer answers 503 every time: a real failed run."""

    def _fail(session):
        monkeypatch.setenv("CS_TEST_LLM_KEY", "test-key")
        with ScriptedLLMServer() as server:
            settings.COMPACTION_CONNECTIONS = [{"name": "scripted", "models": ["openai/scripted"],
                                                "api_base": server.api_base, "api_key_env": "CS_TEST_LLM_KEY",
                                                "allow_private_network": True}]
            server.script(*[error(503, "overloaded") for _ in range(6)])
            return factories.force(session, capture=django_capture_on_commit_callbacks, overrides={
                "summarizer.model": "openai/scripted", "summarizer.connection": "scripted",
                "summarizer.retry": {"max_retries": 1, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}})

    return _fail
