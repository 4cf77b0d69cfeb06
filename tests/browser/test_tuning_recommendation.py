"""The tuning page starts with the answer: the current setting, the sweep's recommended
setting in words and its chart come before the policy form, on a desktop and at a phone's
width; one click applies the recommendation and one click undoes it."""
import pytest

from dashboard.models import Session
from dashboard.selectors.tuning import starting_point
from dashboard.services.tuning_sweeps import request_sweep
from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def swept(project):
    s = factories.grow(project, factories.agent_messages(30, tag="rec"), title="Billing refactor")
    request_sweep(s, starting_point(s).policy, kind="tokens", scope="session")  # eager: finished at once
    return s


def top(page, selector: str) -> float:
    return page.locator(selector).first.bounding_box()["y"]


def open_tuning(page, signed_in, session) -> None:
    page.goto(signed_in(f"/sessions/{session.pk}/tuning/"))
    page.wait_for_selector('[data-testid="preview-result"]')
    page.wait_for_selector('[data-sweep-chart][data-chart-ready="true"]')
    settle(page)


def test_the_answer_comes_first_and_one_click_applies_it_with_undo(page, signed_in, console, swept):
    open_tuning(page, signed_in, swept)
    text = page.get_by_test_id("recommendation-text").inner_text()
    assert text.startswith("Lowest input cost with needed-context recall ≥ 98% and no over-window call: trigger ")
    assert top(page, '[data-testid="current-setting"]') < top(page, '[data-testid="recommendation"]') \
        < top(page, '[data-testid="sweep-chart"]') < top(page, '[data-testid="tuning-form"]')
    shot(page, "tuning-recommendation-desktop")
    # a stricter target is answered in place
    page.get_by_test_id("recall-target").fill("99.9")
    page.get_by_test_id("recall-target").dispatch_event("change")
    page.wait_for_function("() => document.querySelector('[data-testid=recommendation-text]').innerText.includes('99.9%')")
    page.get_by_test_id("recall-target").fill("98")
    page.get_by_test_id("recall-target").dispatch_event("change")
    page.wait_for_function("() => document.querySelector('[data-testid=recommendation-text]').innerText.includes('≥ 98%')")
    # the recommendation is not this session's setting, so it can be applied in one click
    before = Session.objects.get(pk=swept.pk).policy_id
    page.get_by_test_id("recommend-apply-session").click()
    page.get_by_test_id("undo").wait_for()
    assert Session.objects.get(pk=swept.pk).policy_id != before
    page.get_by_test_id("undo").click()
    page.get_by_test_id("undone").wait_for()
    assert Session.objects.get(pk=swept.pk).policy_id == before
    console.assert_clean()


def test_the_answer_fits_a_phone(page, signed_in, console, swept):
    page.set_viewport_size(PHONE)
    open_tuning(page, signed_in, swept)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert page.get_by_test_id("recommendation-text").is_visible()
    page.get_by_test_id("recommendation").scroll_into_view_if_needed()
    shot(page, "tuning-recommendation-phone")
    shot(page, "tuning-recommendation-phone-full", full_page=True)
    console.assert_clean()
