"""Sessions stored before lone surrogates were refused on arrival (written straight into the
database here, as an older version did) still compact, read and render. The stored rows are
left as they are; what the engine, the archive and the pages see has U+FFFD in place of
each lone surrogate, and the run that made that replacement says so in its events."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboard.models import (
    ArchiveItem,
    CompactionRun,
    RunStatus,
    Session,
    SessionContext,
    StoredMessage,
)
from dashboard.services.keys import create_api_key
from tests.pages import factories

# PostgreSQL pass: text PostgreSQL refuses or stores differently (lone surrogates)
pytestmark = pytest.mark.postgres

LONE = "\ud800"


def _poison(raw: dict) -> dict:
    raw = dict(raw)
    if isinstance(raw.get("content"), str):
        raw["content"] = raw["content"][:20] + LONE + raw["content"][20:]
    if raw.get("tool_calls"):
        call = dict(raw["tool_calls"][0])
        call["function"] = dict(call["function"], arguments=json.dumps({"path": "src/" + LONE + ".py"}))
        raw["tool_calls"] = [call]
    return raw


@pytest.fixture
def poisoned(project):
    """A 12-turn session whose user, tool and assistant texts and tool call arguments hold a
    lone surrogate, in its stored messages and its live context, written past validation."""
    session = factories.import_messages(project, factories.agent_messages(12), title="poisoned")
    for row in StoredMessage.objects.filter(session=session, position__gt=0):
        StoredMessage.objects.filter(pk=row.pk).update(raw=_poison(row.raw))
    ctx = SessionContext.objects.get(session=session)
    items = json.loads(ctx.items)
    for item in items[1:]:
        item["message"] = _poison(item["message"])
    SessionContext.objects.filter(pk=ctx.pk).update(
        items=json.dumps(items), rendered=json.dumps([i["message"] for i in items]))
    return Session.objects.get(pk=session.pk)


@pytest.fixture
def key(project):
    return create_api_key(project, "tests")[1]


def _stored_raw(session) -> list:
    return [m.raw for m in StoredMessage.objects.filter(session=session).order_by("position")]


def test_a_forced_run_on_a_stored_surrogate_session_succeeds_and_says_what_it_replaced(
        poisoned, django_capture_on_commit_callbacks):
    before = _stored_raw(poisoned)
    run = factories.force(poisoned, capture=django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.error)
    assert _stored_raw(poisoned) == before  # the stored messages are untouched
    notes = [e.data for e in run.events.all() if "surrogate" in json.dumps(e.data)]
    assert notes, [(e.kind, e.data) for e in run.events.all()]
    assert "U+FFFD" in json.dumps(notes[0])
    archived = json.dumps([i.raw for i in ArchiveItem.objects.filter(entry__session=poisoned)], ensure_ascii=False)
    assert LONE not in archived and "\ufffd" in archived


def test_the_pages_of_a_stored_surrogate_session_render(web, poisoned, django_capture_on_commit_callbacks):
    factories.force(poisoned, capture=django_capture_on_commit_callbacks)
    pk = poisoned.pk
    for name, args in (("pages:session", [pk]), ("pages:transcript", [pk]), ("pages:message", [pk, 1]),
                       ("pages:archive", [pk]), ("pages:tuning", [pk])):
        r = web.get(reverse(name, args=args))
        assert r.status_code == 200, (name, r.status_code)
        assert "\ufffd" in r.content.decode() or name in ("pages:archive", "pages:tuning"), name
    run = CompactionRun.objects.filter(session=poisoned).latest("id")
    assert web.get(reverse("pages:run", args=[run.pk])).status_code == 200
    assert web.get(reverse("pages:before-after", args=[run.pk])).status_code == 200


def test_the_api_reads_and_simulates_a_stored_surrogate_session(client, poisoned, key,
                                                                 django_capture_on_commit_callbacks):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    pk = poisoned.pk
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/api/sessions/{pk}/compactions", "{}", content_type="application/json", **auth)
    assert r.status_code in (200, 202), r.content
    run = client.get(f"/api/runs/{r.json()['run_id']}", **auth).json()
    assert run["status"] == "succeeded", run["error"]
    for path in (f"/api/sessions/{pk}", f"/api/sessions/{pk}/messages", f"/api/sessions/{pk}/context",
                 f"/api/sessions/{pk}/archive", f"/api/sessions/{pk}/runs"):
        r = client.get(path, **auth)
        assert r.status_code == 200, (path, r.content[:300])
        r.json()
    r = client.post(f"/api/sessions/{pk}/simulate", "{}", content_type="application/json", **auth)
    assert r.status_code == 200, r.content[:300]
