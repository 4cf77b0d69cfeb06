"""Tuning: typing a new threshold re-simulates the session and redraws the preview."""
import pytest

from dashboard.models import Project
from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser


def test_changing_a_threshold_updates_the_preview(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="t"), title="Tune me")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    result = page.locator('[data-testid="tuning-preview"] [data-testid="preview-result"]')
    result.wait_for()
    before = int(result.get_attribute("data-compactions"))
    assert before >= 1
    page.fill('[data-testid="a-threshold"]', "200000")
    page.wait_for_function("() => document.querySelector('[data-testid=preview-result]')"
                           " && document.querySelector('[data-testid=preview-result]').dataset.compactions === '0'")
    settle(page)
    row = page.locator('[data-row="compactions"] td').first.inner_text()
    assert row.startswith("0")
    page.fill('[data-testid="a-threshold"]', "3000")
    page.wait_for_function(f"() => +document.querySelector('[data-testid=preview-result]').dataset.compactions > {before}")
    settle(page)
    shot(page, "tuning-after-change")
    console.assert_clean()


def test_comparing_a_preset_side_by_side_and_saving(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="c"), title="Compare me")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    page.locator('[data-testid="preview-result"]').wait_for()
    page.check('[data-testid="compare-toggle"]')
    page.locator("details:has(#fields-b) > summary").click()
    page.select_option('[data-testid="b-preset"]', "sagents")
    page.wait_for_function("() => (document.querySelector('[data-testid=preview-result]').dataset.compactions"
                           " || '').split(',').length === 2")
    page.wait_for_selector('#fields-b input[name="b-loaded"][value="sagents"]', state="attached")
    assert "B: sagents" in page.locator('[data-testid="preview-table"] thead').inner_text()
    settle(page)
    shot(page, "tuning-compare", full_page=True)
    page.fill("#save-name", "tuned-in-browser")
    page.click('[data-testid="save-project"]')
    page.wait_for_selector('[data-testid="save-ok"]')

    assert Project.objects.get(pk=project.pk).active_policy.name == "tuned-in-browser"
    console.assert_clean()
