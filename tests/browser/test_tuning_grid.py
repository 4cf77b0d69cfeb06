"""The tuning page's grid: a finished trigger × kept-tail grid over the project's sessions
is drawn as a heatmap of cost with recall contours and the recommended pair, readable on a
desktop and scrolled (not overflowing the page) at a phone's width; a grid started from the
page shows its progress and cancels in one click. The heatmap's screenshot is
docs/screenshots/tuning_grid.png (copy it from test-artifacts/docs/ after a UI change)."""
import pytest

from dashboard.brokers import filesystem_transport_options
from dashboard.celery import use_broker
from dashboard.models import TuningGrid
from dashboard.selectors.tuning import starting_point
from dashboard.services.tuning_grids import request_grid
from tests.browser.conftest import ARTIFACTS, settle
from tests.corpus import load, require_corpus
from tests.pages import factories

pytestmark = pytest.mark.browser

DOCS = ARTIFACTS.parent / "docs"
PHONE = {"width": 390, "height": 844}


REAL = "taubench__gpt-4o-airline__rec052.json"


@pytest.fixture
def gridded(project):
    """A real 62-message airline support transcript (its recall changes with the trigger: the
    agent reads back reservation details a compaction may have cleared) and a synthetic
    session, gridded over the project."""
    require_corpus(REAL)
    s = factories.import_messages(project, load(REAL)["messages"], title="Airline support: change a reservation")
    factories.grow(project, factories.agent_messages(30, tag="grid"), title="Billing refactor")
    # eager Celery: every chunk runs at once, the last one sums the grid
    request_grid(s, starting_point(s).policy, x_param="tokens", y_param="keep_messages", columns=6, rows=4)
    assert TuningGrid.objects.get(session=s).status == "done"
    return s


def open_grid(page, signed_in, session) -> None:
    page.goto(signed_in(f"/sessions/{session.pk}/tuning/"))
    page.wait_for_selector('[data-testid="grid-heatmap"]')
    settle(page)


def test_the_grid_is_a_heatmap_with_contours_and_the_recommended_pair(page, signed_in, console, gridded):
    page.set_viewport_size({"width": 1280, "height": 900})
    open_grid(page, signed_in, gridded)
    assert page.locator('[data-testid="grid-heatmap"] g.cell').count() == 24
    text = page.get_by_test_id("grid-recommendation").inner_text()
    assert text.startswith("Lowest input cost with needed-context recall ≥ 98% and no over-window call: trigger ")
    # a target between the grid's lowest and highest recall draws its contour between them
    recalls = [c["kept"] / c["needed"] for c in TuningGrid.objects.get(session=gridded).cells if c["needed"]]
    assert min(recalls) < max(recalls), recalls
    target = f"{(min(recalls) + max(recalls)) / 2 * 100:.1f}"
    page.get_by_test_id("grid-recall-target").fill(target)
    page.get_by_test_id("grid-recall-target").dispatch_event("change")
    page.wait_for_function(f"() => document.querySelector('[data-testid=grid-recommendation]').innerText.includes('{target}%')")
    assert page.locator('[data-testid="grid-heatmap"] path.contour.target').count() == 1
    page.get_by_test_id("tuning-grid").scroll_into_view_if_needed()
    DOCS.mkdir(parents=True, exist_ok=True)
    page.get_by_test_id("tuning-grid").screenshot(path=str(DOCS / "tuning_grid.png"))
    console.assert_clean()


def test_the_recommended_pair_is_applied_in_one_click_and_undone(page, signed_in, console, gridded):
    """At a recall target of 0 the cheapest cell is recommended (not the session's own pair,
    which compacts less); applying it puts a stored policy named after the pair in use for
    the session, and undo in the same block gives the session back to its project."""
    page.set_viewport_size({"width": 1280, "height": 900})
    open_grid(page, signed_in, gridded)
    page.get_by_test_id("grid-recall-target").fill("0")
    page.get_by_test_id("grid-recall-target").dispatch_event("change")
    page.wait_for_function("() => document.querySelector('[data-testid=grid-recommendation]').innerText.includes('≥ 0%')")
    page.get_by_test_id("grid-apply-session").click()
    applied = page.locator("#grid-apply-result [data-testid=applied]")
    applied.wait_for()
    assert "Now in use for this session" in applied.inner_text() and "kept tail" in applied.inner_text()
    gridded.refresh_from_db()
    assert gridded.policy is not None and gridded.policy.name in applied.inner_text()
    page.locator("#grid-apply-result [data-testid=undo]").click()
    page.locator("#grid-apply-result [data-testid=undone]").wait_for()
    gridded.refresh_from_db()
    assert gridded.policy is None
    console.assert_clean()


def test_the_grid_scrolls_inside_its_box_on_a_phone(page, signed_in, console, gridded):
    page.set_viewport_size(PHONE)
    open_grid(page, signed_in, gridded)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    console.assert_clean()


def test_a_grid_started_on_the_page_can_be_cancelled(page, signed_in, console, project, settings, tmp_path):
    """Started with eager Celery off, no worker and RUN_NO_WORKER_FALLBACK=off: it stays
    queued, with its progress bar and the cancel button (the service tests run real workers;
    with the fallback on, this process would run the grid itself after the no-worker wait).
    Its chunks go to a broker folder of its own: an earlier test of this process may have left
    the app on a broker that is gone (a worker test's), where queueing fails the grid at once."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.RUN_NO_WORKER_FALLBACK = "off"
    use_broker("filesystem://", filesystem_transport_options(tmp_path / "broker", 0.1))
    session = factories.import_messages(project, factories.agent_messages(12, tag="c"), title="Cancel me")
    page.goto(signed_in(f"/sessions/{session.pk}/tuning/"))
    page.get_by_test_id("grid-start").click()
    page.get_by_test_id("grid-progress").wait_for()
    page.get_by_test_id("grid-cancel").click()
    page.get_by_test_id("grid-cancelled").wait_for()
    assert TuningGrid.objects.get(session=session).status == "cancelled"
    console.assert_clean()
