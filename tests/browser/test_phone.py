"""At a phone's width (390 px) no page scrolls sideways: wide tables and charts scroll inside
their own box, long ids and unbroken words wrap."""
import json

import pytest

from dashboard.models import CompactionRun, Session, StoredArchiveEntry
from dashboard.selectors.tuning import starting_point
from dashboard.services.call_bodies import CallBody, SentBody
from dashboard.services.gateway_calls import record_call
from dashboard.services.tuning_sweeps import request_sweep
from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
LONG_ID = "session-" + "0123456789abcdef" * 6


@pytest.fixture
def grown(project):
    words = factories.agent_messages(30, tag="phone")
    words.insert(1, {"role": "user", "content": "path/" * 40 + "file.py " + "x" * 120 + "\n\n| a | b | c | d | e | f |\n"
                     "|---|---|---|---|---|---|\n| " + " | ".join(["a-rather-long-cell-value"] * 6) + " |"})
    s = factories.grow(project, words, title="Refactor the billing module so that every invoice line is " + "y" * 80)
    Session.objects.filter(pk=s.pk).update(external_id=LONG_ID)
    request_sweep(s, starting_point(s).policy, kind="tokens", scope="session")  # eager: its chart and table show
    return s


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def wider_than_the_screen(page) -> list[str]:
    """The elements that stick out to the right, to say what to fix."""
    return page.evaluate("""() => {
        const out = (e) => e.getBoundingClientRect().right > window.innerWidth + 1;
        const clipped = (e) => { for (let p = e.parentElement; p; p = p.parentElement) {
            const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; }
            return false; };
        return [...document.querySelectorAll('body *')].filter(e => out(e) && !clipped(e) && !(e.parentElement && out(e.parentElement)
            && !clipped(e.parentElement)))
          .slice(0, 8).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right));
    }""")


def test_no_page_scrolls_sideways_at_390_px(page, signed_in, console, grown):
    run = CompactionRun.objects.filter(session=grown, status="succeeded").order_by("-id").first()
    entry = StoredArchiveEntry.objects.filter(run=run).first()
    long_line = json.dumps([{"role": "user", "content": "path/" * 60 + "x" * 200}], separators=(",", ":"))
    call = record_call(grown, endpoint="chat/completions", model="gpt-4o-" + "z" * 60, status_code=200, run=run,
                       estimated_prompt_tokens=1234, usage={"prompt_tokens": 1200, "completion_tokens": 30},
                       upstream_ms=900, overhead_ms=12,
                       body=CallBody(format="chat", fields={"model": "gpt-4o", "user": LONG_ID}, messages=2, added=1, upto=2,
                                     sent=SentBody('{"model": "gpt-4o", "messages": ', long_line, "}"),
                                     reply={"message": {"role": "assistant", "content": "y" * 300}}))
    pages = {
        "sessions": "/sessions/",
        "session": f"/sessions/{grown.pk}/",
        "run": f"/runs/{run.pk}/",
        "before-after": f"/runs/{run.pk}/before-after/",
        "archive": f"/sessions/{grown.pk}/archive/?entry={entry.entry_id}",
        "tuning": f"/sessions/{grown.pk}/tuning/",
        "call": f"/calls/{call.pk}/",
    }
    page.set_viewport_size(PHONE)
    wide = {}
    for name, path in pages.items():
        page.goto(signed_in(path))
        if name == "tuning":
            page.wait_for_selector('[data-testid="preview-result"]')
            page.wait_for_selector('[data-sweep-chart][data-chart-ready="true"]')
        settle(page)
        if page_width(page) > PHONE["width"]:
            wide[name] = (page_width(page), wider_than_the_screen(page))
        shot(page, f"phone-{name}", full_page=True)
    assert wide == {}, json.dumps(wide, indent=1)
    console.assert_clean()


def test_the_login_page_fits_a_phone(page, live_server, console, transactional_db):
    page.set_viewport_size(PHONE)
    page.goto(live_server.url + "/login/")
    page.wait_for_load_state("networkidle")
    assert page_width(page) <= PHONE["width"]
    shot(page, "phone-login", full_page=True)
    console.assert_clean()
