"""The overview in a real browser: its figures equal sums over the runs computed here
from the rows, its chart is drawn, and nothing errors in the console. Takes the overview
screenshot of docs/screenshots/ (copied from test-artifacts/docs/overview.png)."""
import pytest

from compaction.windows import price_per_token
from dashboard.models import CompactionRun
from tests.browser.conftest import ARTIFACTS, settle
from tests.pages import factories
from tests.pages.conftest import fail_run  # noqa: F401  (fixture: a run whose summarizer always fails)

pytestmark = pytest.mark.browser

DOCS = ARTIFACTS.parent / "docs"


@pytest.fixture
def busy_project(project, fail_run):  # noqa: F811
    factories.grow(project, factories.agent_messages(30, tag="o"), title="refactor the billing module")
    for k, model in enumerate(("gpt-4o-mini", "gpt-4o", "my-local-model")):
        s = factories.import_messages(project, factories.agent_messages(14 + 4 * k, tag=f"o{k}"),
                                      title=f"support ticket {k + 1}", model=model)
        factories.force(s)
    near = factories.import_messages(project, factories.agent_messages(12, tag="near"), title="almost due")
    fail_run(near)
    return project


def test_overview_figures_equal_sums_over_the_runs_and_the_chart_draws(page, signed_in, console, busy_project):
    runs = list(CompactionRun.objects.filter(project=busy_project).select_related("session"))
    succeeded = [r for r in runs if r.status == "succeeded"]
    freed = {r.pk: r.tokens_before["total"] - r.tokens_after["total"] for r in succeeded}
    dollars = 0.0
    for r in succeeded:
        price = price_per_token(r.session.model)
        if price is not None:
            dollars += freed[r.pk] * price[0]
    assert any(r.status == "failed" for r in runs) and len(succeeded) >= 4

    page.goto(signed_in("/"))
    settle(page)
    page.wait_for_selector("[data-overview-chart][data-chart-ready=true] canvas")
    assert int(page.get_attribute('[data-testid="tokens-saved"]', "data-value")) == sum(freed.values())
    assert float(page.get_attribute('[data-testid="dollars-saved"]', "data-value")) == pytest.approx(dollars, abs=1e-6)
    assert page.inner_text('[data-testid="succeeded-runs"]').strip() == str(len(succeeded))
    assert page.inner_text('[data-testid="all-runs"]').strip() == str(len(runs))
    assert "my-local-model" in page.inner_text('[data-testid="unpriced"]')
    # runs by trigger and status: the footer row counts every run once per status
    footer = page.locator('[data-testid="by-trigger"] tfoot td').all_inner_texts()
    statuses = ["queued", "running", "succeeded", "failed", "skipped"]
    assert [int(x) for x in footer] == [sum(r.status == s for r in runs) for s in statuses] + [len(runs)]
    # the chart's legend names both series with their latest values before any hover
    legend = page.inner_text("[data-overview-chart] .u-legend")
    assert "compactions" in legend and "failed" in legend
    # the theme switch redraws the chart in the other theme's colours without errors
    page.click("#theme-toggle")
    page.wait_for_selector("[data-overview-chart][data-chart-ready=true] canvas")
    page.click("#theme-toggle")
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / "overview.png"), full_page=True)
    console.assert_clean()


def test_the_runs_list_filters_failed_runs_in_the_browser(page, signed_in, console, busy_project):
    page.goto(signed_in("/runs/"))
    settle(page)
    total = page.locator('[data-testid="runs-table"] tbody tr').count()
    assert total == CompactionRun.objects.filter(project=busy_project).count()
    page.check('input[name="failures"]')
    page.wait_for_url("**/runs/?**failures=1**")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=runs-table] tbody tr').length === 1")
    assert "failed" in page.inner_text('[data-testid="runs-table"] tbody')
    console.assert_clean()


def test_deleting_sessions_from_the_list_asks_first(page, signed_in, console, project):
    keep = factories.import_messages(project, factories.agent_messages(2), title="keep")
    gone = factories.import_messages(project, factories.agent_messages(2), title="delete me")
    page.goto(signed_in("/sessions/"))
    page.check(f'input[name="session"][value="{gone.pk}"]')
    page.click('[data-testid="delete-selected"]')
    assert "1 session, 0 runs" in page.inner_text('[data-testid="delete-summary"]')
    page.click('[data-testid="confirm-delete"]')
    page.wait_for_url("**/sessions/")
    assert "Deleted 1 session." in page.inner_text('[data-testid="flash"]')
    rows = page.locator('[data-testid="sessions-table"] tbody tr').evaluate_all("rs => rs.map(r => r.dataset.session)")
    assert rows == [str(keep.pk)]
    console.assert_clean()
