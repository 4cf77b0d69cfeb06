"""Archive browser: an entry opens and pages; search; the replay check says exact."""
import pytest

from dashboard.models import StoredArchiveEntry
from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser


def test_archive_content_opens_pages_and_replays_exactly(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="a"), title="Archive me")
    page.goto(signed_in(f"/sessions/{s.pk}/archive/"))
    settle(page)
    assert page.get_by_text("Choose an entry to read its archived messages.").is_visible()
    biggest = StoredArchiveEntry.objects.filter(session=s).order_by("-item_count").first()
    assert biggest.item_count > 10
    page.click(f'a[href*="entry={biggest.entry_id}"][data-testid="archive-entry-link"]')
    content = page.locator('[data-testid="archive-content"]')
    content.wait_for()
    assert biggest.entry_id in content.inner_text()
    assert page.locator(".archive-item").count() == 10
    first = page.locator(".archive-item").first.get_attribute("id")
    page.click("#entry-content button:has-text('Next')")
    page.wait_for_function(f"() => document.querySelector('.archive-item').id !== '{first}'")
    assert page.locator(".archive-item").first.get_attribute("id").endswith("-10")
    shot(page, "archive-entry-open")

    page.fill("#archive-q", "module_3.py")
    page.wait_for_selector("#archive-search-results li")
    assert "module_3.py" in page.locator("#archive-search-results").inner_text()

    page.click('[data-testid="replay-button"]')
    ok = page.locator('[data-testid="replay-ok"]')
    ok.wait_for()
    assert f"{s.message_count} messages rebuilt" in ok.inner_text()
    console.assert_clean()
