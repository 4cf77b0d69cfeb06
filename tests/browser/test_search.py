"""Search across sessions: the nav's search page finds a word in two sessions (one of them
in the archive of a compacted session), and a hit opens the message in its timeline."""
import pytest

from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser


def test_search_across_sessions_opens_the_message_in_its_timeline(page, signed_in, console, project):
    factories.grow(project, factories.agent_messages(30, tag="a"), title="Refactor the parser")
    other = factories.import_messages(project, [
        {"role": "user", "content": "Why does module_3.py fail on Windows paths?"},
        {"role": "assistant", "content": "module_3.py joins paths with '/'; use pathlib instead."}],
        title="Windows bug report")
    page.goto(signed_in("/"))
    page.click("nav >> text=Search")
    page.fill("#search-q", "module_3.py")
    page.click("[data-testid=search-form] button[type=submit]")
    hits = page.locator("[data-testid=search-hits] > li")
    hits.first.wait_for()
    sessions = {hits.nth(i).get_attribute("data-session") for i in range(hits.count())}
    kinds = {hits.nth(i).get_attribute("data-kind") for i in range(hits.count())}
    assert str(other.pk) in sessions and len(sessions) == 2, sessions
    assert kinds == {"message", "archive"}, kinds
    assert "Windows bug report" in page.locator("[data-testid=search-hits]").inner_text()
    shot(page, "search-across-sessions", full_page=True)

    link = page.locator(f'[data-testid=search-hits] > li[data-session="{other.pk}"] a').first
    href = link.get_attribute("href")
    link.click()
    anchor = href.split("#", 1)[1]
    page.locator(f"#{anchor}").wait_for()
    settle(page)
    assert "module_3.py" in page.locator(f"#{anchor}").inner_text()
    console.assert_clean()
