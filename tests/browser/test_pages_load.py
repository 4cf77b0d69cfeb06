"""Every page loads in a real browser with no console error, in both themes."""
import pytest

from dashboard.models import CompactionRun, StoredArchiveEntry
from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser


@pytest.fixture
def grown(project):
    return factories.grow(project, factories.agent_messages(40, tag="g"), title="Refactor the billing module")


def test_the_login_page_loads_cleanly(page, live_server, console, transactional_db):
    page.goto(live_server.url + "/sessions/")
    page.wait_for_url("**/login/?next=/sessions/")
    assert page.locator("h1").inner_text() == "Sign in"
    shot(page, "login")
    console.assert_clean()


def test_every_page_loads_with_no_console_errors(page, signed_in, console, grown):
    run = CompactionRun.objects.filter(session=grown, status="succeeded").order_by("-id").first()
    entry = StoredArchiveEntry.objects.filter(run=run).first()
    factories.import_messages(grown.project, factories.agent_messages(3), title="Short chat, never compacted")
    pages = {
        "sessions": "/sessions/",
        "session": f"/sessions/{grown.pk}/",
        "run": f"/runs/{run.pk}/",
        "before-after": f"/runs/{run.pk}/before-after/",
        "archive": f"/sessions/{grown.pk}/archive/?entry={entry.entry_id}",
        "tuning": f"/sessions/{grown.pk}/tuning/",
    }
    for name, path in pages.items():
        page.goto(signed_in(path))
        if name == "tuning":
            page.wait_for_selector('[data-testid="preview-result"]')
        settle(page)
        shot(page, name)
        shot(page, name + "-full", full_page=True)
    console.assert_clean()


def test_the_theme_toggle_switches_to_dark_and_is_remembered(page, signed_in, console, grown):
    page.goto(signed_in(f"/sessions/{grown.pk}/"))
    settle(page)
    assert page.get_attribute("html", "data-theme") == "light"
    page.click("#theme-toggle")
    assert page.get_attribute("html", "data-theme") == "dark"
    assert page.get_attribute("#theme-toggle", "aria-pressed") == "true"
    settle(page)
    shot(page, "session-dark")
    page.reload()
    settle(page)
    assert page.get_attribute("html", "data-theme") == "dark"
    page.goto(signed_in("/sessions/"))
    shot(page, "sessions-dark")
    page.click("#theme-toggle")
    assert page.get_attribute("html", "data-theme") == "light"
    console.assert_clean()


def test_the_project_switcher_changes_the_listed_sessions(page, signed_in, console, project, user):
    factories.import_messages(project, factories.agent_messages(2), title="acme work")
    other = factories.add_member(factories.make_project("globex"), user, "viewer")
    factories.import_messages(other, factories.agent_messages(2), title="globex work")
    page.goto(signed_in("/sessions/"))
    assert page.get_by_text("acme work").is_visible()
    page.select_option("#project-select", label="globex")
    page.wait_for_selector("text=globex work")
    assert page.get_by_text("acme work").count() == 0
    console.assert_clean()
