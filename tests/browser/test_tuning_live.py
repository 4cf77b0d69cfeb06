"""Tuning: typing a new threshold re-simulates the session and redraws the preview; Compare
opens Policy B and marks what differs from A; typed values survive a preset's fields; a
threshold sweep runs on a real worker and draws its curve."""
import shutil

import pytest

from dashboard.models import Project, TuningSweep
from tests.browser.conftest import REPO, settle, shot
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
    assert page.locator("#policy-b").evaluate("d => d.open")  # Compare opens Policy B
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


def test_compare_opens_policy_b_and_marks_the_settings_that_differ(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(20, tag="d"), title="Differ")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    page.locator('[data-testid="preview-result"]').wait_for()
    assert not page.locator("#policy-b").evaluate("d => d.open")
    page.check('[data-testid="compare-toggle"]')
    assert page.locator("#policy-b").evaluate("d => d.open")
    page.select_option('[data-testid="b-preset"]', "current")  # B starts as A: nothing differs
    page.wait_for_selector('#fields-b input[name="b-loaded"][value="current"]', state="attached")
    settle(page)
    assert page.locator("#fields-b .differs").count() == 0
    page.fill('[data-testid="b-threshold"]', "4321")
    assert page.locator('[data-testid="b-threshold"]').evaluate("e => e.classList.contains('differs')")
    assert page.locator('#fields-b label[for="b-trigger_value"]').evaluate("e => e.classList.contains('differs')")
    assert page.locator("#fields-b input.differs, #fields-b select.differs").count() == 1
    page.fill('[data-testid="b-threshold"]', page.locator('[data-testid="a-threshold"]').input_value())
    assert page.locator("#fields-b .differs").count() == 0
    settle(page)
    console.assert_clean()


def test_the_now_text_follows_an_edit(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(20, tag="n"), title="Now")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    page.locator('[data-testid="preview-result"]').wait_for()
    assert "6,000" in page.locator("#a-trigger-help").inner_text()
    page.fill('[data-testid="a-threshold"]', "9000")
    page.wait_for_function("() => document.querySelector('#a-trigger-help').textContent.includes('9,000')")
    settle(page)
    console.assert_clean()


def test_a_value_typed_before_the_presets_fields_arrive_is_kept(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(20, tag="p"), title="Preset race")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    page.locator('[data-testid="preview-result"]').wait_for()
    page.select_option('[data-testid="a-preset"]', "sagents")
    # typed at once, so it travels in the request that loads the preset's fields (the kept
    # tail is in the summary group, collapsed while nothing in it differs)
    page.locator('[data-testid="a-group-summary"] > summary').click()
    page.fill('[data-testid="a-keep_messages"]', "7")
    page.wait_for_selector('#fields-a input[name="a-loaded"][value="sagents"]', state="attached")
    settle(page)
    assert page.locator('[data-testid="a-keep_messages"]').input_value() == "7"
    assert page.locator('[data-testid="a-preset"]').input_value() == "sagents"
    console.assert_clean()


def test_a_threshold_sweep_runs_on_a_worker_and_draws_its_curve(page, signed_in, console, project, start_worker):
    start_worker("filesystem")
    s = factories.grow(project, factories.agent_messages(30, tag="w"), title="Sweep me")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    page.locator('[data-testid="preview-result"]').wait_for()
    page.select_option('[data-testid="sweep-kind"]', "tokens")
    page.click('[data-testid="sweep-start"]')
    page.wait_for_selector('[data-testid="sweep-status"]')
    page.wait_for_selector('[data-sweep-chart][data-chart-ready="true"]', timeout=180_000)
    sweep = TuningSweep.objects.get(session=s)
    assert sweep.status == "done" and sweep.done == sweep.total
    rows = page.locator('[data-testid="sweep-table"] tbody tr')
    assert rows.count() == len(sweep.values) >= 10
    assert "(current)" in page.locator('[data-testid="sweep-table"] tr[aria-current="true"]').inner_text()
    assert page.locator("[data-sweep-chart] canvas").count() == 1
    settle(page)
    page.locator('[data-testid="sweep"]').scroll_into_view_if_needed()
    path = shot(page, "tuning-sweep", full_page=True)
    docs = REPO / "test-artifacts" / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, docs / "tuning.png")
    console.assert_clean()
