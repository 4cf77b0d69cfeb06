"""In a real browser: a viewer sees no force button and cannot force; an owner creates an
API key on the keys page, copies it, and an empty project shows its first steps. The keys
page screenshot is written to test-artifacts/docs/api_keys.png (copy it to docs/screenshots/)."""
from __future__ import annotations

import pytest

from dashboard.models import ApiKey, CompactionRun
from dashboard.services.keys import create_api_key
from tests.browser.conftest import ARTIFACTS, PASSWORD, settle
from tests.browser.test_accessibility import serious
from tests.pages import factories

pytestmark = pytest.mark.browser
DOCS = ARTIFACTS.parent / "docs"


def sign_in(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")  # sign-in lands on the overview


def test_a_viewer_sees_no_force_button_and_cannot_force(page, live_server, console, project, django_user_model):
    session = factories.import_messages(project, factories.agent_messages(6), title="watched session")
    victor = django_user_model.objects.create_user("victor", password=PASSWORD)
    factories.add_member(project, victor, "viewer")
    sign_in(page, live_server, "victor")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    settle(page)
    assert page.locator('[data-testid="force-button"]').count() == 0
    assert page.locator('[data-testid="viewer-note"]').is_visible()
    # a forged request from the viewer's own signed-in page is refused too
    status = page.evaluate("""async (url) => {
        const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken'];
        const r = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token}, body: new FormData()});
        return r.status; }""", f"/sessions/{session.pk}/force/")
    assert status == 403
    assert not CompactionRun.objects.filter(session=session).exists()
    console.errors[:] = [e for e in console.errors if "403" not in e]  # the refused fetch, on purpose
    console.assert_clean()


def test_an_owner_creates_and_copies_a_key_from_the_empty_project(page, signed_in, console, project, context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(signed_in("/sessions/"))
    assert page.locator('[data-testid="empty-project"]').is_visible()
    assert "/api/sessions" in page.locator('[data-testid="curl-snippet"]').inner_text()
    page.click('[data-testid="empty-create-key"]')
    page.wait_for_selector('[data-testid="new-key"]')
    secret = page.input_value('[data-testid="new-key-value"]')
    row = ApiKey.objects.get(project=project)
    assert secret.startswith(row.prefix)
    page.click("button[data-copy]")
    page.wait_for_function("() => document.querySelector('button[data-copy]').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / "api_keys.png"), full_page=True)
    found = {}
    for theme in ("light", "dark"):
        for path in (f"/projects/{project.pk}/keys/", "/sessions/", "/docs/readme/"):
            page.goto(signed_in(path))
            page.evaluate(f"localStorage.setItem('cs-theme', '{theme}')")
            page.reload()
            page.wait_for_load_state("networkidle")
            problems = serious(page)
            if problems:
                found[f"{theme} {path}"] = problems
    page.evaluate("localStorage.removeItem('cs-theme')")
    assert found == {}, found
    console.assert_clean()


def test_the_keys_docs_and_empty_pages_do_not_scroll_sideways_on_a_phone(page, signed_in, console, project):
    create_api_key(project, "phone")
    page.set_viewport_size({"width": 390, "height": 844})
    wide = {}
    for path in (f"/projects/{project.pk}/keys/", "/sessions/", "/docs/", "/docs/readme/", "/docs/service/"):
        page.goto(signed_in(path))
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > 390:
            wide[path] = width
    assert wide == {}, wide
    console.assert_clean()
