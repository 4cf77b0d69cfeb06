"""HTML and JavaScript inside messages render as text in a real browser: no dialog, no
script runs, the payload is readable on the page."""
import pytest

from dashboard.models import StoredArchiveEntry
from tests.browser.conftest import settle, shot
from tests.pages import factories
from tests.pages.factories import MARKDOWN_XSS_TEXTS, XSS_TEXTS

pytestmark = pytest.mark.browser


@pytest.fixture
def hostile(project):
    msgs = factories.agent_messages(8, tag="x", extra_user=list(MARKDOWN_XSS_TEXTS) + list(XSS_TEXTS))
    msgs.insert(5, {"role": "assistant", "content": XSS_TEXTS[1], "tool_calls": [
        {"id": "call_evil", "type": "function",
         "function": {"name": "<img src=x onerror=alert('name')>", "arguments": '{"q": "</script><script>alert(1)</script>"}'}}]})
    msgs.insert(6, {"role": "tool", "tool_call_id": "call_evil", "content": XSS_TEXTS[0]})
    s = factories.import_messages(project, msgs, title="<script>alert('title')</script>")
    run = factories.force(s, overrides={"cut.keep_messages": 4})
    assert run.status == "succeeded", run.error
    return s, run


def test_payloads_in_messages_stay_inert(page, signed_in, console, hostile):
    s, run = hostile
    entry = StoredArchiveEntry.objects.filter(session=s).first()
    for path in (f"/sessions/{s.pk}/", f"/sessions/{s.pk}/?start={s.message_count - 10}", f"/runs/{run.pk}/",
                 f"/runs/{run.pk}/before-after/", f"/sessions/{s.pk}/archive/?entry={entry.entry_id}&limit=100",
                 f"/sessions/{s.pk}/archive/?q=script", "/sessions/"):
        page.goto(signed_in(path))
        settle(page)
        for details in page.locator("details").all():  # open every collapsed block too
            if details.is_visible():
                details.evaluate("d => d.open = true")
        page.wait_for_timeout(100)
        assert page.evaluate("window.__xss") is None, path
        assert page.locator("img[src='x']").count() == 0, path
        assert page.locator("svg[onload]").count() == 0, path
        hrefs = page.eval_on_selector_all("main a[href]", "as => as.map(a => a.getAttribute('href'))")
        assert not [h for h in hrefs if h.lower().lstrip().startswith(("javascript:", "data:", "vbscript:"))], path
    page.goto(signed_in(f"/sessions/{s.pk}/?start={s.message_count - 10}"))
    settle(page)
    body = page.locator("#transcript-body").inner_text()
    assert XSS_TEXTS[2] in body and XSS_TEXTS[0] in body
    assert "<script>alert('title')</script>" in page.locator("h1").inner_text()
    shot(page, "xss-inert")
    console.assert_clean()  # also: no dialog opened
