"""The session timeline: hovering a compaction marker shows its figures; clicking a bar
scrolls the transcript to that message, loading its page when needed."""
import pytest

from tests.browser.conftest import scroll_to_top, settle, shot, wait_scrolled_into_view
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
    # the scroll is smooth: wait for it to end, or scrolling back below races its last frames
    wait_scrolled_into_view(page, "#msg-130")
    shot(page, "timeline-click-scrolled")
    # and a bar on the loaded page scrolls without another request
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    scroll_to_top(page)
    p_small = point_for(page, 131)
    page.mouse.click(p_small["x"], p_small["y"])
    wait_scrolled_into_view(page, "#msg-131")
    assert not [u for u in requests if "around=" in u], requests
    console.assert_clean()


def test_load_more_appends_the_next_page_of_the_transcript(page, signed_in, console, grown):
    page.goto(signed_in(f"/sessions/{grown.pk}/"))
    settle(page)
    assert page.locator("#transcript-body article.msg").count() == 50
    page.click("#transcript-next a[role=button]")
    page.wait_for_selector("#msg-99")
    assert page.locator("#transcript-body article.msg").count() == 100
    console.assert_clean()


CLEARING_POLICY = {**factories.TEST_POLICY, "name": "clearing",
                   "reduction": {"enabled": True, "clearing": {"trigger_tokens": 4000, "trigger_fraction": None}}}


def test_every_threshold_that_can_fire_is_drawn_and_named_in_the_key(page, signed_in, console, user):
    project = factories.add_member(factories.make_project("clearing", policy=CLEARING_POLICY), user)
    session = factories.import_messages(project, factories.agent_messages(6, tag="k"), title="Thresholds")
    page.goto(signed_in(f"/sessions/{session.pk}/"))
    settle(page)
    key = page.locator('[data-testid="timeline-key"] li')
    texts = key.all_inner_texts()
    assert "summary trigger: 6,000 tokens" in texts
    assert "tool-result clearing: 4,000 tokens" in texts
    assert any(t.startswith("overflow guard (usable window): ") for t in texts), texts
    kinds = page.evaluate("JSON.parse(document.getElementById('timeline-data').textContent).thresholds.map(t => t.kind)")
    assert kinds == ["reduction", "trigger", "window"]  # bottom-up, in the order they fire
    console.assert_clean()


def test_a_three_message_session_with_runs_after_its_end(page, signed_in, console, project):
    """Runs forced after the last message each step the context line down in their own slot;
    the x axis has whole-number ticks only; the legend names the series before any hover."""
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Summarize this: " + " ".join(f"fact{i}" for i in range(900))},
            {"role": "assistant", "content": "Noted. " + " ".join(f"point{i}" for i in range(600))}]
    session = factories.import_messages(project, msgs, title="Three messages")
    # runs that summarize everything, the latest message too, so each steps the line down
    overrides = {"cut.keep_messages": 1, "cut.keep_fraction": 0, "cut.keep_latest_round": False}
    runs = [factories.force(session, overrides=overrides) for _ in range(2)]
    assert runs[0].status == "succeeded", runs[0].error
    page.goto(signed_in(f"/sessions/{session.pk}/"))
    settle(page)
    d = page.evaluate("JSON.parse(document.getElementById('timeline-data').textContent)")
    after = [m for m in d["markers"] if m["after_end"]]
    assert len(after) == len(d["markers"]) >= 1
    xs = [m["x"] for m in after]
    assert all(x > 2.5 for x in xs) and len(set(xs)) == len(xs)  # right of the last bar, one slot each
    assert d["x_max"] > max(xs)
    # the drawn line drops at each of them, to the tokens the run left
    for m in after:
        at = [p[1] for p in d["line"] if p[0] == m["x"]]
        assert at == [m["tokens_before"], m["tokens_after"]]
        assert m["tokens_after"] < m["tokens_before"]
    ticks = page.evaluate("document.querySelector('[data-chart=timeline]')._plot.axes[0]._splits")
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    labels = page.evaluate("""() => [...document.querySelectorAll('[data-chart=timeline] .u-legend .u-series')]
        .map(s => s.innerText.trim())""")
    assert "context sent (per model call)" in labels
    assert not any("–" in t for t in labels), labels
    guard = page.locator('[data-testid="timeline-key"] li[data-kind="window"]').inner_text()
    assert "overflow guard (usable window): 128,000 tokens" in guard and "above the chart's scale" in guard
    shot(page, "timeline-after-end")
    console.assert_clean()
