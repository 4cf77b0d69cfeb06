"""The tuning page's grid: a finished trigger × kept-tail grid over the project's sessions
is drawn as a heatmap of cost with recall contours and the recommended pair, readable on a
desktop and scrolled (not overflowing the page) at a phone's width; a grid started from the
page shows its progress and cancels in one click. The heatmap's screenshot is
docs/screenshots/tuning_grid.png (copy it from test-artifacts/docs/ after a UI change)."""
import pytest

from dashboard.celery import app as celery_app
from dashboard.models import TuningGrid
from dashboard.selectors.tuning import starting_point
from dashboard.services.tuning_grids import request_grid
from tests.browser.conftest import ARTIFACTS, settle
from tests.pages import factories

pytestmark = pytest.mark.browser

DOCS = ARTIFACTS.parent / "docs"
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def gridded(project):
    s = factories.grow(project, factories.agent_messages(30, tag="grid"), title="Billing refactor")
    factories.import_messages(project, factories.agent_messages(14, tag="other"), title="Docs pass")
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
    assert page.locator('[data-testid="grid-heatmap"] path.contour').count() >= 1
    page.get_by_test_id("tuning-grid").scroll_into_view_if_needed()
    DOCS.mkdir(parents=True, exist_ok=True)
    page.get_by_test_id("tuning-grid").screenshot(path=str(DOCS / "tuning_grid.png"))
    # a stricter target moves the answer in place
    page.get_by_test_id("grid-recall-target").fill("99.9")
    page.get_by_test_id("grid-recall-target").dispatch_event("change")
    page.wait_for_function("() => document.querySelector('[data-testid=grid-recommendation]').innerText.includes('99.9%')")
    console.assert_clean()


def test_the_grid_scrolls_inside_its_box_on_a_phone(page, signed_in, console, gridded):
    page.set_viewport_size(PHONE)
    open_grid(page, signed_in, gridded)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    console.assert_clean()


def test_a_grid_started_on_the_page_can_be_cancelled(page, signed_in, console, project, settings):
    """Started with eager Celery off and no worker: it stays queued, with its progress bar
    and the cancel button (no worker can run here in time; the service tests run real ones)."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    celery_app.conf.task_always_eager = False
    session = factories.import_messages(project, factories.agent_messages(12, tag="c"), title="Cancel me")
    page.goto(signed_in(f"/sessions/{session.pk}/tuning/"))
    page.get_by_test_id("grid-start").click()
    page.get_by_test_id("grid-progress").wait_for()
    page.get_by_test_id("grid-cancel").click()
    page.get_by_test_id("grid-cancelled").wait_for()
    assert TuningGrid.objects.get(session=session).status == "cancelled"
    console.assert_clean()
