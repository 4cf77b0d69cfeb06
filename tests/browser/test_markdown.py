"""User and assistant text renders as Markdown in a real browser, hostile Markdown stays
inert (no script runs, no dangerous link can be followed), and a picture sent in a message
shows as a thumbnail that opens full size."""
import base64
import struct
import zlib

import pytest

from tests.browser.conftest import settle, shot
from tests.pages import factories
from tests.pages.factories import MARKDOWN_XSS_TEXTS, XSS_TEXTS

pytestmark = pytest.mark.browser

README = """## Plan

1. read **src/app.py**
2. run `pytest -q`

| file | status |
|------|--------|
| app.py | ok |

```python
def f():
    return 1
```
"""


def png(width: int, height: int, rgb=(200, 60, 40)) -> str:
    """A solid-colour PNG as a data URL (built here, so the test needs no image file)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    body = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(body).decode()


@pytest.fixture
def marked(project):
    msgs = factories.agent_messages(2, tag="m", extra_user=list(MARKDOWN_XSS_TEXTS) + list(XSS_TEXTS))
    msgs.append({"role": "user", "content": [{"type": "text", "text": "What does this **screenshot** show?"},
                                             {"type": "image_url", "image_url": {"url": png(320, 200)}}]})
    msgs.append({"role": "assistant", "content": README})
    return factories.import_messages(project, msgs, title="markdown")


def test_markdown_renders_and_payloads_stay_inert(page, signed_in, console, marked):
    page.goto(signed_in(f"/sessions/{marked.pk}/?start=0"))
    settle(page)
    body = page.locator("#transcript-body")
    assert body.locator(".markdown h2", has_text="Plan").count() == 1
    assert body.locator(".markdown ol li strong", has_text="src/app.py").count() == 1
    assert body.locator(".markdown code", has_text="pytest -q").count() == 1
    assert body.locator(".markdown table td", has_text="app.py").count() == 1
    assert body.locator(".markdown pre code", has_text="return 1").count() == 1
    # payloads: readable as text, nothing scriptable built, no link with a dangerous target
    assert "window.__xss=11" in body.inner_text() and XSS_TEXTS[0] in body.inner_text()
    hrefs = page.eval_on_selector_all("#transcript-body a[href]", "as => as.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if not h.startswith(("/", "#", "?", "http:", "https:", "mailto:"))], hrefs
    assert page.locator("#transcript-body script, #transcript-body svg, #transcript-body iframe").count() == 0
    for link in body.locator(".markdown a").all():  # following what is a link runs nothing
        link.evaluate("a => a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}))")
    page.wait_for_timeout(200)
    assert page.evaluate("window.__xss") is None
    shot(page, "markdown", full_page=True)
    console.assert_clean()


def test_a_picture_is_a_thumbnail_that_opens_full_size(page, signed_in, console, marked):
    page.goto(signed_in(f"/sessions/{marked.pk}/?start=0"))
    settle(page)
    thumb = page.locator("#transcript-body img.thumb")
    assert thumb.count() == 1
    box = thumb.bounding_box()
    assert box["width"] <= 160 and box["height"] <= 120
    page.click("#transcript-body [data-image-open]")
    viewer = page.locator("dialog#image-viewer")
    viewer.wait_for(state="visible")
    big = viewer.locator("img").bounding_box()
    assert big["width"] > box["width"]
    page.keyboard.press("Escape")
    viewer.wait_for(state="hidden")
    page.click("#transcript-body [data-image-open]")
    viewer.locator("button", has_text="Close").click()
    viewer.wait_for(state="hidden")
    console.assert_clean()
