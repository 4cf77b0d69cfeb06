"""The session timeline: hovering a compaction marker shows its figures; clicking a bar
scrolls the transcript to that message, loading its page when needed."""
import pytest

from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser


@pytest.fixture
def grown(project):
    return factories.grow(project, factories.agent_messages(40, tag="g"), title="Refactor the billing module")


def point_for(page, x_value: float) -> dict:
    """Page coordinates of message position ``x_value`` at mid-height of the plot."""
    return page.evaluate("""(x) => {
        const u = document.querySelector('[data-chart=timeline]')._plot;
        const r = u.over.getBoundingClientRect();
        return {x: r.left + u.valToPos(x, 'x'), y: r.top + r.height * 0.9};
    }""", x_value)


def test_hovering_a_compaction_marker_shows_tokens_and_messages(page, signed_in, console, grown):
    page.goto(signed_in(f"/sessions/{grown.pk}/"))
    settle(page)
    marker = page.evaluate("JSON.parse(document.getElementById('timeline-data').textContent).markers[0]")
    p = point_for(page, marker["x"])
    page.mouse.move(p["x"], p["y"])
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert f"compaction before message #{marker['position']}" in text
    assert f"tokens {marker['tokens_before']:,} → {marker['tokens_after']:,}" in text
    assert f"{marker['evicted']} messages evicted" in text
    shot(page, "timeline-marker-hover")
    console.assert_clean()


def test_clicking_a_bar_scrolls_to_its_message_even_on_a_later_page(page, signed_in, console, grown):
    page.goto(signed_in(f"/sessions/{grown.pk}/"))
    settle(page)
    assert page.locator("#msg-130").count() == 0  # the first transcript page holds 0-49
    p = point_for(page, 130)
    page.mouse.click(p["x"], p["y"])
    target = page.locator("#msg-130")
    target.wait_for(state="visible")
    page.wait_for_function("() => { const r = document.getElementById('msg-130').getBoundingClientRect();"
                           " return r.top >= 0 && r.top < window.innerHeight; }")
    shot(page, "timeline-click-scrolled")
    p_small = None
    # and a bar on the loaded page scrolls without another request
    page.evaluate("window.scrollTo(0, 0)")
    p_small = point_for(page, 131)
    page.mouse.click(p_small["x"], p_small["y"])
    page.wait_for_function("() => { const r = document.getElementById('msg-131').getBoundingClientRect();"
                           " return r.top >= 0 && r.top < window.innerHeight; }")
    console.assert_clean()


def test_load_more_appends_the_next_page_of_the_transcript(page, signed_in, console, grown):
    page.goto(signed_in(f"/sessions/{grown.pk}/"))
    settle(page)
    assert page.locator("#transcript-body article.msg").count() == 50
    page.click("#transcript-next a[role=button]")
    page.wait_for_selector("#msg-99")
    assert page.locator("#transcript-body article.msg").count() == 100
    console.assert_clean()
