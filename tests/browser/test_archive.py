"""Archive browser: an entry opens and pages; search; the replay check says exact."""
import pytest

from dashboard.models import Session, StoredArchiveEntry
from dashboard.services.sessions import append_messages
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


def in_view(page, selector: str) -> bool:
    return page.evaluate("""(s) => { const r = document.querySelector(s).getBoundingClientRect();
        return r.top >= 0 && r.top < window.innerHeight; }""", selector)


def test_a_clicked_entry_is_scrolled_to_focused_and_in_the_url(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="c"), title="Scroll to me")
    page.goto(signed_in(f"/sessions/{s.pk}/archive/"))
    settle(page)
    entry = StoredArchiveEntry.objects.filter(session=s).order_by("-item_count").first()
    page.click(f'a[href*="entry={entry.entry_id}"][data-testid="archive-entry-link"]')
    page.locator('[data-testid="archive-content"]').wait_for()
    page.wait_for_function("() => document.activeElement && document.activeElement.matches('[data-entry-heading]')")
    assert in_view(page, "[data-entry-heading]")
    assert f"entry={entry.entry_id}" in page.url
    page.click("#entry-content button:has-text('Next')")
    page.wait_for_function("() => location.search.includes('offset=10')")  # pushed, not loaded
    page.reload()  # the URL reopens the same page of the same entry
    assert page.locator(".archive-item").first.get_attribute("id").endswith("-10")
    console.assert_clean()


def test_search_hits_are_highlighted_expanded_and_the_query_is_in_the_url(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="h"), title="Find me")
    page.goto(signed_in(f"/sessions/{s.pk}/archive/"))
    settle(page)
    page.fill("#archive-q", "module_4.py")
    page.wait_for_selector("#archive-search-results li")
    page.wait_for_function("() => location.search.includes('q=module_4.py')")
    assert page.locator("#archive-search-results mark.hit").first.inner_text() == "module_4.py"
    # the hit in a tool call's arguments: open it from the results
    hit = page.locator('[data-testid="archive-hit"]', has_text="message #").first
    hit.click()
    page.wait_for_load_state("networkidle")
    item = page.locator(".archive-item.hit-item")
    assert item.count() == 1
    page.wait_for_function("() => document.activeElement && document.activeElement.classList.contains('hit-item')")
    assert in_view(page, ".archive-item.hit-item")
    assert "q=module_4.py" in page.url and "entry=ar_" in page.url
    marks = page.locator(".archive-item mark.hit")
    assert marks.count() >= 1 and marks.first.inner_text() == "module_4.py"
    opened = page.locator(".archive-item details[data-hit]")
    if opened.count():  # a hit inside tool-call arguments opens that call
        assert opened.first.evaluate("d => d.open")
    shot(page, "archive-hit")
    console.assert_clean()


def test_a_tool_call_hit_is_expanded(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="t"), title="Calls")
    page.goto(signed_in(f"/sessions/{s.pk}/archive/?q=%22src/module_2.py%22"))
    settle(page)
    page.locator('[data-testid="archive-hit"]').first.click()
    page.wait_for_load_state("networkidle")
    call = page.locator(".archive-item.hit-item details[data-hit]")
    assert call.count() == 1 and call.evaluate("d => d.open")
    assert call.locator("mark.hit").inner_text() == '"src/module_2.py"'
    console.assert_clean()


def test_archive_handles_in_any_message_link_to_their_entry(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="l"), title="Handles")
    entry = StoredArchiveEntry.objects.filter(session=s).first()
    append_messages(Session.objects.get(pk=s.pk), [
        {"role": "user", "content": f"What did {entry.entry_id} hold? <img src=x onerror=alert(1)>"}])
    s.refresh_from_db()
    page.goto(signed_in(f"/sessions/{s.pk}/?around={s.message_count - 1}"))
    settle(page)
    link = page.locator(f'#msg-{s.message_count - 1} a[data-archive-handle="{entry.entry_id}"]')
    assert link.count() == 1 and page.locator("img[src='x']").count() == 0
    link.click()
    page.locator('[data-testid="archive-content"]').wait_for()
    assert entry.entry_id in page.locator("[data-entry-heading]").inner_text()
    console.assert_clean()
