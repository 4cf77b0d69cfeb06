"""Live what-if on the tuning page: typing a threshold redraws the preview's context line and
compaction markers without a click, and a preview that a later edit superseded is aborted
by the page (its answer never lands). How long the redraw takes is measured by
bench/whatif_redraw.py, not here."""
import json

import pytest

from tests.browser.conftest import settle
from tests.pages import factories

pytestmark = pytest.mark.browser

CHART = "[data-testid=preview-result] [data-chart=simulation][data-chart-ready=true]"


def chart_data(page) -> dict:
    return json.loads(page.locator("#simulation-data").text_content())


def open_preview(page, signed_in, session) -> None:
    page.goto(signed_in(f"/sessions/{session.pk}/tuning/"))
    page.wait_for_selector(CHART)
    settle(page)


def mark_old(page) -> None:
    page.evaluate("document.querySelector('[data-testid=preview-result]').dataset.old = '1'")


def wait_redrawn(page) -> None:
    page.wait_for_selector("[data-testid=preview-result]:not([data-old]) [data-chart=simulation][data-chart-ready=true]")


@pytest.fixture
def long_session(project):
    return factories.import_messages(project, factories.agent_messages(60, tag="wi"), title="What-if")


def trigger_line(data: dict) -> float:
    return next(line["value"] for line in data["lines"] if line["kind"] == "trigger")


def test_typing_a_threshold_redraws_the_context_line_and_the_markers(page, signed_in, console, long_session):
    open_preview(page, signed_in, long_session)
    before = chart_data(page)
    assert trigger_line(before) == 6000 and before["markers"]
    mark_old(page)
    page.fill('[data-testid="a-threshold"]', "3000")  # no click: the edit alone re-simulates
    wait_redrawn(page)
    after = chart_data(page)
    assert trigger_line(after) == 3000
    assert len(after["markers"]) > len(before["markers"])
    policy = next(s for s in after["series"] if s["kind"] == "policy")["values"]
    assert max(v for v in policy if v is not None) < max(
        v for v in next(s for s in before["series"] if s["kind"] == "policy")["values"] if v is not None)
    # the edited field is marked as differing from the session's policy, and its group says so
    assert page.locator('[data-testid="a-threshold"]').evaluate("e => e.classList.contains('changed')")
    assert page.get_by_test_id("a-group-trigger-changed").inner_text() == "1 changed"
    page.fill('[data-testid="a-threshold"]', "6000")
    assert page.get_by_test_id("a-group-trigger-changed").is_hidden()
    settle(page)
    console.assert_clean()


def test_a_preview_a_later_edit_supersedes_is_aborted_and_never_lands(page, signed_in, console, long_session):
    open_preview(page, signed_in, long_session)
    aborted: list[str] = []
    page.on("requestfailed", lambda r: aborted.append(r.post_data or "") if "/tuning/preview/" in r.url else None)
    mark_old(page)
    with page.expect_request(lambda r: "/tuning/preview/" in r.url) as first:
        page.fill('[data-testid="a-threshold"]', "2500")
    # typed again while the first replay runs; submit skips the debounce, so the first one
    # is certainly still in flight
    page.fill('[data-testid="a-threshold"]', "9000")
    with page.expect_response(lambda r: "/tuning/preview/" in r.url and r.status == 200) as second:
        page.evaluate("document.getElementById('tuning-form').requestSubmit()")
    wait_redrawn(page)
    assert "a-trigger_value=2500" in (first.value.post_data or "")
    assert "a-trigger_value=9000" in (second.value.request.post_data or "")
    seq = [dict(p.split("=", 1) for p in (r.post_data or "").split("&"))["whatif_seq"]
           for r in (first.value, second.value.request)]
    assert int(seq[1]) > int(seq[0])
    page.wait_for_timeout(300)  # had the first answer come late, it would have landed by now
    assert trigger_line(chart_data(page)) == 9000
    assert any("a-trigger_value=2500" in body for body in aborted), aborted
    console.assert_clean()
