"""The Idempotency-Key header on forced compactions and imports: a retried request gets the
first answer and creates nothing; the same key on another request is refused."""
from __future__ import annotations

from datetime import timedelta

import pytest

from dashboard.models import CompactionRun, IdempotencyKey, Session
from tests.service.conftest import Api
from tests.service.helpers import chat

# PostgreSQL pass: unique-key conflicts inside a transaction (PostgreSQL aborts the transaction on an error)
pytestmark = pytest.mark.postgres

KEY = "retry-7f3a"


def new_session(api) -> int:
    r = api.post("/api/sessions", {"messages": chat(6), "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def force(api, sid: int, body: dict | None = None, key: str | None = KEY):
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api.post(f"/api/sessions/{sid}/compactions", body or {"reason": "nightly"}, **extra)


def test_a_retried_force_with_the_same_key_returns_the_first_answer_and_creates_nothing(api):
    sid = new_session(api)
    first = force(api, sid)
    assert first.status_code == 202
    # the first run has finished (runs execute inline here): without a key, a force makes another
    retry = force(api, sid)
    assert (retry.status_code, retry.json()) == (first.status_code, first.json())
    assert CompactionRun.objects.filter(session_id=sid).count() == 1
    assert force(api, sid, key=None).json()["run_id"] != first.json()["run_id"]


def test_the_same_key_with_another_request_is_refused_naming_the_header(api):
    sid = new_session(api)
    assert force(api, sid).status_code == 202
    other = force(api, sid, {"reason": "something else"})
    assert other.status_code == 422
    assert other.json()["field"] == "Idempotency-Key"
    assert "Idempotency-Key" in other.json()["detail"]
    other_session = new_session(api)
    assert force(api, other_session).status_code == 422
    assert CompactionRun.objects.count() == 1


def test_a_key_body_that_differs_only_in_spelling_is_the_same_request(api):
    sid = new_session(api)
    first = force(api, sid, {"reason": "x", "overrides": None})
    again = api.post(f"/api/sessions/{sid}/compactions", '{ "overrides": null,  "reason": "x" }',
                     HTTP_IDEMPOTENCY_KEY=KEY)
    assert again.json() == first.json()


def test_keys_belong_to_one_project(api, client, other_project, django_capture_on_commit_callbacks):
    other = Api(client, other_project.test_key, django_capture_on_commit_callbacks)
    mine, theirs = new_session(api), new_session(other)
    a = force(api, mine, {"reason": "same"})
    b = force(other, theirs, {"reason": "same"})
    assert a.status_code == b.status_code == 202
    assert a.json()["run_id"] != b.json()["run_id"]


def test_a_key_expires_after_a_day_and_old_keys_are_pruned(api):
    sid = new_session(api)
    first = force(api, sid).json()
    IdempotencyKey.objects.update(created_at=IdempotencyKey.objects.get().created_at - timedelta(hours=25))
    again = force(api, sid)
    assert again.status_code == 202 and again.json()["run_id"] != first["run_id"]
    assert IdempotencyKey.objects.count() == 1


def test_a_refused_request_is_not_remembered(api):
    sid = new_session(api)
    bad = force(api, sid, {"overrides": {"cut.keep_messages": "many"}})
    assert bad.status_code == 422
    fixed = force(api, sid, {"overrides": {"cut.keep_messages": "many"}, "reason": "x"}, key="k2")
    assert fixed.status_code == 422
    assert force(api, sid, {"overrides": {"cut.keep_messages": 3}}).status_code == 202


def test_an_empty_or_overlong_key_is_refused(api):
    sid = new_session(api)
    for key in ("", " ", "k" * 256):
        r = force(api, sid, key=key)
        assert r.status_code == 422 and r.json()["field"] == "Idempotency-Key", key
    assert CompactionRun.objects.count() == 0


def test_a_retried_import_with_the_same_key_returns_the_same_session_and_imports_nothing(api):
    body = {"messages": chat(6), "auto_compact": False, "title": "retried upload"}
    first = api.post("/api/sessions", body, HTTP_IDEMPOTENCY_KEY=KEY)
    assert first.status_code == 201, first.content
    retry = api.post("/api/sessions", body, HTTP_IDEMPOTENCY_KEY=KEY)
    assert (retry.status_code, retry.json()) == (first.status_code, first.json())
    assert Session.objects.filter(title="retried upload").count() == 1
    other = api.post("/api/sessions", body | {"title": "another upload"}, HTTP_IDEMPOTENCY_KEY=KEY)
    assert other.status_code == 422 and other.json()["field"] == "Idempotency-Key"
    assert api.post("/api/sessions", body).status_code == 201  # no key: a second import
    assert Session.objects.filter(title="retried upload").count() == 2
