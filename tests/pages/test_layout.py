"""Layout: every page needs a login; the project switcher; vendored assets only."""
import re

import pytest
from django.urls import reverse

from tests.pages import factories


def page_urls(session, run, entry_id):
    return [
        reverse("pages:home"), reverse("pages:sessions"), reverse("pages:runs"),
        reverse("pages:session", args=[session.pk]),
        reverse("pages:transcript", args=[session.pk]), reverse("pages:message", args=[session.pk, 0]),
        reverse("pages:run", args=[run.pk]), reverse("pages:run-progress", args=[run.pk]),
        reverse("pages:before-after", args=[run.pk]), reverse("pages:archive", args=[session.pk]),
        reverse("pages:archive-entry", args=[session.pk, entry_id]),
        reverse("pages:archive-replay", args=[session.pk]), reverse("pages:tuning", args=[session.pk]),
        reverse("pages:session-overview", args=[session.pk]),
    ]


def test_every_page_sends_an_anonymous_visitor_to_the_login_page(client, grown, last_run):
    entry = last_run.archive_refs[0]
    for url in page_urls(grown, last_run, entry):
        r = client.get(url)
        assert r.status_code == 302, url
        assert r["Location"].startswith(reverse("pages:login") + "?next="), url


def test_every_write_needs_a_login_too(client, grown):
    for name in ("pages:force", "pages:tuning-preview", "pages:tuning-save"):
        r = client.post(reverse(name, args=[grown.pk]))
        assert r.status_code == 302 and r["Location"].startswith(reverse("pages:login"))
    for name in ("pages:upload", "pages:switch-project", "pages:create-project", "pages:sessions-delete"):
        r = client.post(reverse(name))
        assert r.status_code == 302 and r["Location"].startswith(reverse("pages:login"))


def test_signing_in_leads_to_the_overview(client, user):
    r = client.post(reverse("pages:login"), {"username": "alice", "password": "correct horse battery"})
    assert r.status_code == 302 and r["Location"] == reverse("pages:home") == "/"
    assert b"<h1>Overview</h1>" in client.get(reverse("pages:home")).content


def test_a_wrong_password_is_refused_on_the_login_page(client, user):
    r = client.post(reverse("pages:login"), {"username": "alice", "password": "nope"})
    assert r.status_code == 200 and b"didn't match" in r.content


def test_logging_out_is_a_post(web):
    assert web.get(reverse("pages:logout")).status_code == 405
    r = web.post(reverse("pages:logout"))
    assert r.status_code == 302
    assert web.get(reverse("pages:sessions")).status_code == 302


def test_the_project_switcher_lists_projects_and_switches(web, user, project, small):
    other = factories.add_member(factories.make_project("globex"), user, "viewer")
    factories.import_messages(other, factories.agent_messages(2), title="globex work")
    html = web.get(reverse("pages:sessions")).content.decode()
    assert 'data-testid="project-switcher"' in html
    assert ">acme</option>" in html and ">globex</option>" in html
    assert "small session" in html and "globex work" not in html
    r = web.post(reverse("pages:switch-project"), {"project": other.pk})
    assert r.status_code == 302
    html = web.get(reverse("pages:sessions")).content.decode()
    assert "globex work" in html and "small session" not in html


def test_viewing_a_session_makes_its_project_current(web, user, project, small):
    other = factories.add_member(factories.make_project("globex"), user, "viewer")
    web.post(reverse("pages:switch-project"), {"project": other.pk})
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert re.search(rf'<option value="{project.pk}" selected>acme</option>', html)


def test_pages_load_only_vendored_assets(web, grown):
    html = web.get(reverse("pages:session", args=[grown.pk])).content.decode()
    for url in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert not url.startswith(("http://", "https://", "//")), url
    assert "/static/vendor/pico/pico.min.css" in html
    assert "/static/vendor/uplot/uPlot.iife.min.js" in html
    assert "/static/django_htmx/htmx.min.js" in html


@pytest.mark.parametrize("path", ["vendor/pico/pico.min.css", "vendor/pico/LICENSE.md", "vendor/uplot/uPlot.iife.min.js",
                                  "vendor/uplot/LICENSE", "app/app.js", "app/app.css", "django_htmx/htmx.min.js"])
def test_vendored_files_are_served(client, path):
    r = client.get("/static/" + path)
    assert r.status_code == 200


def test_the_body_carries_the_csrf_token_for_htmx(web, small):
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    m = re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'>", html)
    assert m and len(m.group(1)) >= 32


def test_a_missing_session_or_run_is_a_404(web, db):
    assert web.get(reverse("pages:session", args=[999999])).status_code == 404
    assert web.get(reverse("pages:run", args=[999999])).status_code == 404
