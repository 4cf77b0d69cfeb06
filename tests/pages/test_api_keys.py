"""The API keys page (create with a name, shown once, revoke, last used), the empty state of
a project (a key, a curl snippet, sample sessions), and Django admin's "Add API key"."""
from __future__ import annotations

import json
import re

from django.test import override_settings
from django.urls import reverse

from dashboard.models import ApiKey
from dashboard.services.keys import authenticate, clear_cache, create_api_key
from dashboard.services.samples import sample_files


def _secret(html: str) -> str:
    match = re.search(r'<input id="new-key-value" readonly value="(cs_[^"]+)"', html)
    assert match, "the new key is shown"
    return match.group(1)


def test_a_created_key_is_shown_once_and_works(web, project):
    r = web.post(reverse("pages:api-key-create", args=[project.pk]), {"name": "staging agent"})
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    secret = _secret(r.content.decode())
    row = ApiKey.objects.get(project=project)
    assert row.name == "staging agent" and secret.startswith(row.prefix)
    page = web.get(reverse("pages:api-keys", args=[project.pk])).content.decode()
    assert "staging agent" in page and secret not in page and row.prefix in page
    assert "never" in page  # not used yet
    assert authenticate(secret).pk == project.pk


def test_last_used_shows_once_the_key_was_used(web, project, client):
    _row, secret = create_api_key(project, "agent")
    clear_cache()
    assert client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    page = web.get(reverse("pages:api-keys", args=[project.pk])).content.decode()
    assert "ago</time>" in page and "never" not in page


def test_a_revoked_key_stops_working(web, project, client):
    row, secret = create_api_key(project, "old")
    r = web.post(reverse("pages:api-key-revoke", args=[project.pk, row.pk]))
    assert r.status_code == 302
    clear_cache()
    assert client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401
    assert "revoked" in web.get(reverse("pages:api-keys", args=[project.pk])).content.decode()


def test_an_empty_project_offers_a_key_a_curl_snippet_and_sample_sessions(web, project):
    html = web.get(reverse("pages:sessions")).content.decode()
    assert 'data-testid="empty-project"' in html
    assert 'data-testid="empty-create-key"' in html and 'data-testid="load-samples"' in html
    assert 'curl -H "Authorization: Bearer $KEY"' in html and "http://testserver/api/sessions" in html


def test_loading_sample_sessions_is_idempotent(web, project, tmp_path):
    for i, size in enumerate((3, 1, 2)):
        data = {"id": f"sample-{i}", "license": "MIT", "messages": [{"role": "user", "content": "x" * size}]}
        (tmp_path / f"s{i}.json").write_text(json.dumps(data))
    with override_settings(CORPUS_DIR=tmp_path, SAMPLE_SESSIONS=2):
        assert [p.name for p in sample_files()] == ["s1.json", "s2.json"]  # the smallest, every time
        url = reverse("pages:load-samples", args=[project.pk])
        assert web.post(url).status_code == 302
        assert sorted(project.sessions.values_list("external_id", flat=True)) == ["sample-1", "sample-2"]
        assert web.post(url).status_code == 302
        assert project.sessions.count() == 2
    assert project.sessions.get(external_id="sample-1").metadata == {"id": "sample-1", "license": "MIT"}
    html = web.get(reverse("pages:sessions")).content.decode()
    assert 'data-testid="empty-project"' not in html


def test_admin_add_api_key_shows_the_secret_once(admin_client, project):
    r = admin_client.post(reverse("admin:dashboard_apikey_add"), {"project": project.pk, "name": "from admin"},
                          follow=True)
    assert r.status_code == 200
    row = ApiKey.objects.get(name="from admin")
    shown = [str(m) for m in r.context["messages"]]
    secret = re.search(r"(cs_\S+)", shown[0]).group(1)
    assert authenticate(secret).pk == project.pk and row.key_hash and row.prefix == secret[:10]
    form = admin_client.get(reverse("admin:dashboard_apikey_add")).content.decode()
    assert 'name="key_hash"' not in form and 'name="prefix"' not in form
