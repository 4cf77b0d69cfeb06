"""Browser tests: pytest-playwright driving Debian's chromium against pytest-django's
live_server. ``playwright install`` cannot download browsers here, so the system chromium
is launched; without it these tests are skipped with the reason (under CI=true they fail).

Screenshots go to test-artifacts/browser/ (gitignored).
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
# Playwright's sync API keeps an event loop in the test thread; Django refuses ORM calls
# from a thread with a running loop unless told that this thread is really synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

import pytest  # noqa: E402

from tests.pages import factories  # noqa: E402
from tests.service.conftest import start_worker  # noqa: E402,F401  (a real Celery worker process)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
PASSWORD = "correct horse battery"


@pytest.fixture(scope="session", autouse=True)
def _chromium_present():
    if not os.path.exists(CHROMIUM):
        msg = f"{CHROMIUM} is missing (apt-get install chromium); browser tests need it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + " (CI=true: browser tests must run)")
        pytest.skip(msg)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}, "locale": "en-US"}


@pytest.fixture
def context(context):
    """Playwright's 30 s default is short on a loaded machine (two xdist workers, each with a
    Chromium and a live server, and other work): waits get 90 s. A passing wait returns as
    soon as its condition holds, so this costs nothing when the machine is quiet."""
    context.set_default_timeout(90_000)
    context.set_default_navigation_timeout(90_000)
    return context


# Runs execute inline when their transaction commits, unless a test starts a worker.
from tests.pages.conftest import _eager_celery  # noqa: E402,F401  (autouse fixture)


@pytest.fixture
def project(transactional_db, user):
    """The project "acme", owned by the signed-in user alice."""
    return factories.add_member(factories.make_project("acme"), user)


@pytest.fixture
def user(transactional_db, django_user_model):
    return django_user_model.objects.create_user("alice", password=PASSWORD)


class Console:
    """Console errors, page errors, failed requests and dialogs seen by a page."""

    def __init__(self, page):
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url} {r.failure}"))

        def on_dialog(dialog):
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)

    def assert_clean(self):
        errors = superseded_requests_removed(self.errors)
        assert errors == [], errors
        assert self.dialogs == [], self.dialogs


def superseded_requests_removed(errors: list[str]) -> list[str]:
    """``errors`` without what htmx reports for a request it aborted itself to send a newer
    one (``hx-sync="this:replace"``, the tuning form): per abort, htmx logs
    ``htmx:afterRequest`` and ``htmx:sendAbort`` with console.error and Chromium reports the
    request as failed with ERR_ABORTED. Only as many of those as there were aborts go; any
    other failed request or error stays. On a quiet machine the earlier request has finished
    before the next keystroke, so this only shows when the machine is busy."""
    aborts = sum(1 for e in errors if e == "console.error: htmx:sendAbort")
    budget = {"console.error: htmx:sendAbort": aborts, "console.error: htmx:afterRequest": aborts,
              "net::ERR_ABORTED": aborts}
    kept = []
    for e in errors:
        key = "net::ERR_ABORTED" if e.startswith("request failed: ") and e.endswith(" net::ERR_ABORTED") else e
        if budget.get(key, 0) > 0:
            budget[key] -= 1
        else:
            kept.append(e)
    return kept


@pytest.fixture
def console(page):
    return Console(page)


@pytest.fixture
def signed_in(page, live_server, user, console):
    """The page, signed in through the login form; returns a url() helper."""
    page.goto(live_server.url + "/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")

    def url(path: str) -> str:
        return live_server.url + path

    return url


def shot(page, name: str, full_page: bool = False) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def settle(page):
    """Wait for the network to go quiet and the charts on the page to be drawn."""
    page.wait_for_load_state("networkidle")
    page.wait_for_function("() => [...document.querySelectorAll('[data-chart]')].every(e => e.dataset.chartReady)")


def wait_scrolled_into_view(page, selector: str, settled_ms: int = 300) -> None:
    """Wait until the element is in the viewport and the page has stopped scrolling.

    The transcript scrolls smoothly, so the element enters the viewport well before the
    scroll ends; a test that acts in between (scrolls back, reads coordinates, clicks) races
    the rest of the animation, which on a busy machine can run for seconds. The position must
    hold for ``settled_ms`` and for at least ten polled frames."""
    page.wait_for_function("""([s, ms]) => {
        const e = document.querySelector(s);
        if (!e) return false;
        const y = window.scrollY, now = performance.now();
        const w = window.__csScrollWatch;
        if (!w || w.selector !== s || w.y !== y) {
            window.__csScrollWatch = {selector: s, y: y, since: now, frames: 0};
            return false;
        }
        w.frames += 1;
        const r = e.getBoundingClientRect();
        return w.frames >= 10 && now - w.since >= ms && r.top >= 0 && r.top < window.innerHeight;
    }""", arg=[selector, settled_ms])
    page.evaluate("delete window.__csScrollWatch")


def scroll_to_top(page) -> None:
    """Scroll to the top at once and wait until the page has rested there for ten frames
    (scrolling again if something still moved it)."""
    page.wait_for_function("""() => {
        if (window.scrollY !== 0) {
            window.scrollTo({top: 0, left: 0, behavior: 'instant'});
            window.__csTopFrames = 0;
            return false;
        }
        window.__csTopFrames = (window.__csTopFrames || 0) + 1;
        return window.__csTopFrames >= 10;
    }""")
    page.evaluate("delete window.__csTopFrames")
