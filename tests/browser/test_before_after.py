"""Before/after of a run that evicted about 300 messages: the evicted span is one row that
expands, "changed only" hides untouched rows, and j / k step through the changes."""
import pytest

from tests.browser.conftest import settle, shot
from tests.browser.test_accessibility import serious
from tests.pages import factories

pytestmark = pytest.mark.browser


@pytest.fixture
def big_run(project):
    session = factories.import_messages(project, factories.agent_messages(76, words=20, tag="b"), title="Long refactor")
    run = factories.force(session, overrides={"cut.keep_messages": 8, "cut.keep_fraction": 0})
    assert run.status == "succeeded", run.error
    return run


def test_a_300_message_eviction_is_one_short_row_that_expands(page, signed_in, console, big_run):
    evicted = [r for r in big_run.ledger if r["fate"] in ("summarized", "folded", "preserved")]
    assert len(evicted) >= 290
    page.goto(signed_in(f"/runs/{big_run.pk}/before-after/"))
    settle(page)
    rows = page.locator("[data-ba] > .ba-row")
    assert rows.count() == len(big_run.ledger) - len(evicted) + 1
    span = page.locator('[data-testid="ba-span"]')
    assert span.count() == 1
    assert f"{len(evicted)} messages" in span.locator(".cell.span > details > summary").inner_text()
    assert span.locator('[data-testid="ba-summary"]').count() == 1  # beside what it replaced
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 3000, height
    shot(page, "before-after-300", full_page=True)
    span.locator(".cell.span > details > summary").click()
    first = evicted[0]["message_id"]
    page.locator(f"#ba-{first}").wait_for(state="visible")
    for theme in ("light", "dark"):  # the expanded span too: no serious or critical axe finding
        page.evaluate(f"localStorage.setItem('cs-theme', '{theme}')")
        page.reload()
        settle(page)
        page.locator('[data-testid="ba-span"] .cell.span > details > summary').click()
        page.locator(f"#ba-{first}").wait_for(state="visible")
        assert serious(page) == [], theme
    page.evaluate("localStorage.removeItem('cs-theme')")
    console.assert_clean()


def test_changed_only_and_the_change_keys(page, signed_in, console, big_run):
    page.goto(signed_in(f"/runs/{big_run.pk}/before-after/"))
    settle(page)
    all_rows = page.locator("[data-ba] > .ba-row:visible").count()
    page.check('[data-testid="changed-only"]')
    changed = page.locator("[data-ba] > .ba-row:visible").count()
    expected = page.locator("[data-ba] > .ba-row[data-changed='1']").count()
    assert changed == expected < all_rows
    page.locator("body").press("j")
    current = page.locator(".ba-row.ba-current")
    assert current.count() == 1
    first_id = current.evaluate("r => r.querySelector('.cell').getBoundingClientRect().top")
    page.locator("body").press("j")
    second_id = page.locator(".ba-row.ba-current").evaluate("r => r.querySelector('.cell').getBoundingClientRect().top")
    assert page.evaluate("document.activeElement.closest('.ba-row').classList.contains('ba-current')")
    page.locator("body").press("k")
    assert "change 1 of" in page.locator("[data-ba-position]").inner_text()
    assert first_id is not None and second_id is not None
    page.uncheck('[data-testid="changed-only"]')
    assert page.locator("[data-ba] > .ba-row:visible").count() == all_rows
    console.assert_clean()
