"""API onboarding: a corpus file posts as is and keeps its metadata, a force needs no body,
and every answer about a session or a run links to its dashboard page."""
from __future__ import annotations

import json

from django.core.management import call_command

from dashboard.models import Session
from dashboard.services.bulk_import import import_many
from dashboard.services.sessions import convert_file_payload
from dashboard.services.uploads import import_uploads
from tests.corpus import corpus_files, require_corpus
from tests.service.helpers import chat

CORPUS_LIKE = {
    "id": "corpus-like-1",
    "source": "example/repo:session.json",
    "license": "MIT",
    "meta": {"agent": "test agent", "model": ["gpt-4o-mini"], "stats": {"messages": 16}},
    "messages": chat(4),
}
EXPECTED_METADATA = {k: CORPUS_LIKE[k] for k in ("id", "source", "license", "meta")}


def test_a_corpus_file_posts_as_is_and_keeps_its_metadata(api):
    r = api.post("/api/sessions", CORPUS_LIKE)
    assert r.status_code == 201, r.content
    out = r.json()["session"]
    assert out["external_id"] == "corpus-like-1"
    assert out["model"] == "gpt-4o-mini"  # the corpus keeps the model in meta
    assert out["metadata"] == EXPECTED_METADATA
    assert Session.objects.get(pk=out["id"]).metadata == EXPECTED_METADATA


def test_a_real_corpus_file_posts_as_is(api):
    require_corpus()
    files = corpus_files()
    path = min(files, key=lambda p: p.stat().st_size)
    data = json.loads(path.read_bytes())
    r = api.post("/api/sessions", data | {"auto_compact": False})
    assert r.status_code == 201, r.content
    assert r.json()["session"]["metadata"]["license"] == data["license"]
    assert r.json()["session"]["metadata"]["meta"] == data["meta"]


def test_openai_metadata_is_kept_beside_the_messages(api):
    r = api.post("/api/sessions", {"messages": chat(2), "metadata": {"user": "u-17", "team": "search"}})
    assert r.status_code == 201, r.content
    assert r.json()["session"]["metadata"] == {"metadata": {"user": "u-17", "team": "search"}}


def test_an_unknown_top_level_key_is_still_refused_by_name(api):
    r = api.post("/api/sessions", {"messages": chat(2), "licence": "MIT"})
    assert r.status_code in (400, 422)
    assert "licence" in r.content.decode()


def test_the_upload_the_command_and_the_bulk_import_keep_the_same_metadata(db, project, tmp_path):
    payload = json.dumps(CORPUS_LIKE).encode()
    result = import_uploads(project, [("corpus.json", payload)])
    assert not result.errors and result.created[0].metadata == EXPECTED_METADATA

    path = tmp_path / "cmd.json"
    path.write_text(json.dumps(CORPUS_LIKE | {"id": "corpus-like-2"}))
    call_command("import_sessions", str(path), "--project", project.name, "--no-progress", stdout=open("/dev/null", "w"))
    assert Session.objects.get(external_id="corpus-like-2").metadata == EXPECTED_METADATA | {"id": "corpus-like-2"}

    bulk = convert_file_payload(json.dumps(CORPUS_LIKE | {"id": "corpus-like-3"}).encode(), source="bulk.json")
    ids = import_many(project, bulk).session_ids
    assert Session.objects.get(pk=ids[0]).metadata == EXPECTED_METADATA | {"id": "corpus-like-3"}


def test_a_force_needs_no_body(api, small_session, client, project, django_capture_on_commit_callbacks):
    sid = small_session["id"]
    # as `curl -X POST URL` sends it: no body, no Content-Type
    with django_capture_on_commit_callbacks(execute=True):
        r = client.generic("POST", f"/api/sessions/{sid}/compactions", b"",
                           HTTP_AUTHORIZATION=f"Bearer {project.test_key}")
    assert r.status_code in (200, 202), r.content
    first = api.get(f"/api/runs/{r.json()['run_id']}").json()
    assert (first["status"], first["force"]) == ("succeeded", True), first["error"]
    assert first["tokens_after"]["total"] < first["tokens_before"]["total"]
    again = api.post(f"/api/sessions/{sid}/compactions", "{}")
    assert again.status_code in (200, 202), again.content
    second = api.get(f"/api/runs/{again.json()['run_id']}").json()
    assert second["id"] != first["id"] and second["status"] in ("succeeded", "skipped"), second


def test_answers_about_sessions_and_runs_link_to_their_dashboard_pages(api, small_session):
    sid = small_session["id"]
    assert small_session["dashboard_url"] == f"http://testserver/sessions/{sid}/"
    assert api.get(f"/api/sessions/{sid}").json()["dashboard_url"] == f"http://testserver/sessions/{sid}/"
    assert api.get("/api/sessions").json()["items"][0]["dashboard_url"] == f"http://testserver/sessions/{sid}/"
    appended = api.post(f"/api/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "more"}]}).json()
    assert appended["dashboard_url"] == f"http://testserver/sessions/{sid}/"
    ref = api.post(f"/api/sessions/{sid}/compactions", {"reason": "test"}).json()
    assert ref["dashboard_url"] == f"http://testserver/runs/{ref['run_id']}/"
    run = api.get(f"/api/runs/{ref['run_id']}").json()
    assert run["dashboard_url"] == f"http://testserver/runs/{ref['run_id']}/"
    assert api.get(f"/api/sessions/{sid}/runs").json()["items"][0]["dashboard_url"] == run["dashboard_url"]


def test_an_import_with_no_body_names_the_missing_field(client, project):
    r = client.generic("POST", "/api/sessions", b"", HTTP_AUTHORIZATION=f"Bearer {project.test_key}")
    assert r.status_code == 422, r.content
    assert r.json()["detail"][0]["loc"][0] == "body" and r.json()["detail"][0]["msg"] == "Field required"
