"""The sessions list in a real browser: a filter swaps the rows and lands in the URL, a
header click sorts while keeping the filter, and the page reloads to the same list."""
import re

import pytest

from tests.pages import factories

pytestmark = pytest.mark.browser


def visible_rows(page) -> list[str]:
    return page.locator('[data-testid="sessions-table"] tbody tr').evaluate_all("rs => rs.map(r => r.dataset.session)")


def test_filters_and_sort_live_in_the_url(page, signed_in, console, project):
    made = [factories.import_messages(project, factories.agent_messages(2 + k, tag=f"b{k}"), title=f"session {k}",
                                      model=("gpt-4o", "gpt-4o-mini")[k % 2]) for k in range(5)]
    page.goto(signed_in("/sessions/"))
    page.select_option('select[name="model"]', "gpt-4o-mini")
    page.wait_for_url(re.compile(r"/sessions/\?.*model=gpt-4o-mini"))
    minis = [s for s in made if s.model == "gpt-4o-mini"]
    page.wait_for_function(f"() => document.querySelectorAll('[data-testid=sessions-table] tbody tr').length === {len(minis)}")
    page.click('th a[data-sort="messages"]')
    page.wait_for_url(re.compile(r"sort=-messages"))
    assert "model=gpt-4o-mini" in page.url
    expected = [str(s.pk) for s in sorted(minis, key=lambda s: s.message_count, reverse=True)]
    assert visible_rows(page) == expected
    page.reload()
    assert visible_rows(page) == expected and page.input_value('select[name="model"]') == "gpt-4o-mini"
    console.assert_clean()
