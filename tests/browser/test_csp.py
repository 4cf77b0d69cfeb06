"""The Content-Security-Policy holds in a real browser: no page, htmx swap, chart or the API
docs trips it. Chromium reports each violation as a ``securitypolicyviolation`` event and a
console error; both are collected, and any one fails the test."""
from __future__ import annotations

import pytest

from dashboard.models import CompactionRun, StoredArchiveEntry
from tests.browser.conftest import settle
from tests.pages import factories

pytestmark = pytest.mark.browser

# Added before any page script runs (Playwright injects it outside the page's CSP).
LISTEN = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " +
                              e.sourceFile + ":" + e.lineNumber);
});
"""


class Violations:
    def __init__(self, page):
        self.page = page
        self.console: list[str] = []
        page.add_init_script(LISTEN)
        page.on("console", lambda m: self.console.append(m.text) if "Content Security Policy" in m.text else None)

    def seen(self) -> list[str]:
        try:
            events = self.page.evaluate("window.__cspViolations || []")
        except Exception:  # noqa: BLE001 - a page mid-navigation; the console list still holds its reports
            events = []
        return list(events) + self.console


@pytest.fixture
def violations(page):
    return Violations(page)


@pytest.fixture
def grown(project):
    return factories.grow(project, factories.agent_messages(40, tag="g"), title="Refactor the billing module")


def test_no_page_or_interaction_violates_the_policy(page, violations, signed_in, grown):
    run = CompactionRun.objects.filter(session=grown, status="succeeded").order_by("-id").first()
    entry = StoredArchiveEntry.objects.filter(run=run).first()
    seen: dict[str, list[str]] = {}

    def visit(name: str, path: str) -> None:
        page.goto(signed_in(path))
        settle(page)
        seen[name] = violations.seen()

    visit("sessions", "/sessions/")
    page.fill("#session-search", "billing")  # htmx search swap
    page.wait_for_load_state("networkidle")
    seen["sessions-search"] = violations.seen()

    visit("session", f"/sessions/{grown.pk}/")
    page.fill("#jump-to", "5")
    page.click("form[data-jump] button[type=submit]")  # htmx transcript swap
    page.wait_for_load_state("networkidle")
    seen["session-jump"] = violations.seen()

    visit("message", f"/sessions/{grown.pk}/messages/3/")
    visit("run", f"/runs/{run.pk}/")
    visit("before-after", f"/runs/{run.pk}/before-after/")
    visit("archive", f"/sessions/{grown.pk}/archive/?entry={entry.entry_id}")
    page.goto(signed_in(f"/sessions/{grown.pk}/tuning/"))
    page.wait_for_selector('[data-testid="preview-result"]')  # htmx preview with its chart
    settle(page)
    seen["tuning"] = violations.seen()
    visit("api-docs", "/api/docs")
    page.wait_for_selector(".swagger-ui .info")
    seen["api-docs"] = violations.seen()

    assert {name: v for name, v in seen.items() if v} == {}


def test_the_check_sees_a_violation_when_there_is_one(page, violations, signed_in, grown):
    """The detector itself: an inline handler slipped into a page is refused and reported."""
    page.goto(signed_in("/sessions/"))
    settle(page)
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<img src=\"/static/none.png\" onerror=\"window.x=1\">')")
    page.wait_for_function("window.__cspViolations.length > 0")
    assert any("script-src" in v for v in violations.seen())
    assert page.evaluate("window.x") is None
