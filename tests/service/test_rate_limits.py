"""Rate limits on forced runs and imports: per project (FORCE_RATE_LIMIT, IMPORT_RATE_LIMIT) and
forced runs per session (FORCE_SESSION_RATE_LIMIT)."""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from dashboard.models import CompactionRun
from dashboard.services import rate_limits
from dashboard.services.rate_limits import Limit, parse_limit
from tests.service.conftest import Api
from tests.service.helpers import chat

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def frozen(monkeypatch):
    """The clock stands at 10 s into a minute (and an hour)."""
    moment = datetime(2026, 1, 5, 12, 0, 10, tzinfo=UTC)
    monkeypatch.setattr(rate_limits, "now", lambda: moment)
    return moment


def imp(api):
    return api.post("/api/sessions", {"messages": chat(3), "auto_compact": False})


@pytest.mark.postgres
def test_forces_over_the_limit_get_429_with_retry_after(api, settings, frozen):
    sid = imp(api).json()["session"]["id"]
    settings.FORCE_RATE_LIMIT = "2/min"
    for _ in range(2):
        assert api.post(f"/api/sessions/{sid}/compactions", {}).status_code == 202
    r = api.post(f"/api/sessions/{sid}/compactions", {})
    assert r.status_code == 429
    assert r["Retry-After"] == "50"
    assert "FORCE_RATE_LIMIT" in r.json()["detail"]
    assert CompactionRun.objects.filter(session_id=sid).count() == 2


@pytest.mark.postgres
def test_imports_over_the_limit_get_429_and_write_nothing(api, settings, frozen):
    settings.IMPORT_RATE_LIMIT = "1/hour"
    assert imp(api).status_code == 201
    r = imp(api)
    assert r.status_code == 429 and r["Retry-After"] == str(3600 - 10)
    assert len(api.get("/api/sessions").json()["items"]) == 1


@pytest.mark.postgres
def test_the_limit_is_per_project_and_per_window(api, client, other_project, settings, frozen, monkeypatch,
                                                 django_capture_on_commit_callbacks):
    settings.IMPORT_RATE_LIMIT = "1/min"
    other = Api(client, other_project.test_key, django_capture_on_commit_callbacks)
    assert imp(api).status_code == 201
    assert imp(other).status_code == 201
    assert imp(api).status_code == 429
    monkeypatch.setattr(rate_limits, "now", lambda: frozen.replace(minute=1))
    assert imp(api).status_code == 201


def test_a_replayed_idempotent_answer_does_not_count(api, settings, frozen):
    sid = imp(api).json()["session"]["id"]
    settings.FORCE_RATE_LIMIT = "1/min"
    for _ in range(3):
        assert api.post(f"/api/sessions/{sid}/compactions", {}, HTTP_IDEMPOTENCY_KEY="k1").status_code == 202


def test_no_limit_by_default(api, frozen):
    for _ in range(5):
        assert imp(api).status_code == 201


@pytest.mark.parametrize(("text", "limit"), [("60/min", Limit(60, 60)), ("5 / s", Limit(5, 1)),
                                             ("100/hour", Limit(100, 3600)), ("", None)])
def test_parse_limit(text, limit):
    assert parse_limit(text) == limit


@pytest.mark.parametrize("text", ["60", "0/min", "10/day", "x/min"])
def test_a_malformed_limit_is_refused(text):
    with pytest.raises(ImproperlyConfigured):
        parse_limit(text, "FORCE_RATE_LIMIT")


def test_a_malformed_rate_limit_setting_is_reported_when_the_service_starts(settings):
    """`manage.py check` (run by migrate and runserver) names the bad setting before any
    request reaches it."""
    settings.FORCE_RATE_LIMIT = "lots/min"
    with pytest.raises(SystemCheckError) as raised:
        call_command("check")
    assert "FORCE_RATE_LIMIT" in str(raised.value) and "dashboard.E001" in str(raised.value)
    settings.FORCE_RATE_LIMIT = "5/min"
    call_command("check")


# -- forced runs of one session (FORCE_SESSION_RATE_LIMIT, on by default) -----------------------

def documented_session_force_limit() -> Limit:
    """The default docs/SERVICE.md's settings table gives FORCE_SESSION_RATE_LIMIT."""
    row = next(line for line in (REPO / "docs" / "SERVICE.md").read_text().splitlines()
               if line.startswith("| `FORCE_SESSION_RATE_LIMIT` |"))
    default = re.search(r"\|\s*`([^`]+)`\s*\|", row[len("| `FORCE_SESSION_RATE_LIMIT` |") - 1:])
    assert default is not None, row
    limit = parse_limit(default.group(1))
    assert limit is not None
    return limit


def test_forces_of_one_session_are_limited_by_default(api):
    """Twenty forces in a row with the shipped settings (each run finishes before the next force,
    so none is shared): the documented number make runs, the rest get 429 with Retry-After."""
    limit = documented_session_force_limit()
    assert limit.seconds >= 60  # 20 requests in a row fit in one window
    sid = imp(api).json()["session"]["id"]
    answers = [api.post(f"/api/sessions/{sid}/compactions", {}) for _ in range(20)]
    statuses = [r.status_code for r in answers]
    assert all(s in (200, 202) for s in statuses[:limit.requests]), statuses
    assert statuses[limit.requests:] == [429] * (20 - limit.requests), statuses
    assert CompactionRun.objects.filter(session_id=sid).count() == limit.requests
    refused = answers[-1]
    assert 1 <= int(refused["Retry-After"]) <= limit.seconds
    detail = refused.json()["detail"]
    assert "FORCE_SESSION_RATE_LIMIT" in detail and f"at most {limit.requests} per {limit.seconds} s" in detail
    # another session of the project is not held back
    other = imp(api).json()["session"]["id"]
    assert api.post(f"/api/sessions/{other}/compactions", {}).status_code in (200, 202)


def test_the_session_window_slides(api, settings, monkeypatch):
    settings.FORCE_SESSION_RATE_LIMIT = "2/min"
    sid = imp(api).json()["session"]["id"]
    for _ in range(2):
        assert api.post(f"/api/sessions/{sid}/compactions", {}).status_code in (200, 202)
    assert api.post(f"/api/sessions/{sid}/compactions", {}).status_code == 429
    later = datetime.now(UTC) + timedelta(seconds=61)
    monkeypatch.setattr(rate_limits, "now", lambda: later)
    assert api.post(f"/api/sessions/{sid}/compactions", {}).status_code in (200, 202)


def test_a_pending_forced_run_is_still_shared_past_the_limit(client, project, settings,
                                                            django_capture_on_commit_callbacks):
    """While a forced run is queued, forces get that run back (202, created false) however many
    there are: sharing makes no run, so the limit never refuses it."""
    settings.FORCE_SESSION_RATE_LIMIT = "1/min"
    api = Api(client, project.test_key, None)  # runs are not executed: the first stays queued
    with django_capture_on_commit_callbacks(execute=False):
        sid = imp(api).json()["session"]["id"]
        answers = [api.post(f"/api/sessions/{sid}/compactions", {}) for _ in range(5)]
    assert [r.status_code for r in answers] == [202] * 5
    assert len({r.json()["run_id"] for r in answers}) == 1
    assert [r.json()["created"] for r in answers] == [True] + [False] * 4


def test_unset_means_no_session_limit(api, settings):
    settings.FORCE_SESSION_RATE_LIMIT = ""
    sid = imp(api).json()["session"]["id"]
    for _ in range(8):
        assert api.post(f"/api/sessions/{sid}/compactions", {}).status_code in (200, 202)
    assert CompactionRun.objects.filter(session_id=sid).count() == 8
