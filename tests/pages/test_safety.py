"""Safety: CSRF on every write (the token htmx sends is accepted), message content escaped."""
import re
from html.parser import HTMLParser

import pytest
from django.template import Context, Template
from django.test import Client
from django.urls import reverse

from dashboard.models import StoredArchiveEntry
from tests.pages import factories
from tests.pages.factories import MARKDOWN_XSS_TEXTS, XSS_TEXTS


def writes(session):
    return [reverse("pages:force", args=[session.pk]), reverse("pages:tuning-preview", args=[session.pk]),
            reverse("pages:tuning-save", args=[session.pk]), reverse("pages:upload"),
            reverse("pages:switch-project"), reverse("pages:create-project"), reverse("pages:logout")]


@pytest.fixture
def strict(user):
    c = Client(enforce_csrf_checks=True)
    c.force_login(user)
    return c


def test_every_write_is_refused_without_the_csrf_token(strict, small):
    for url in writes(small):
        assert strict.post(url, {}, HTTP_HX_REQUEST="true").status_code == 403, url


def test_the_token_from_the_body_hx_headers_is_accepted(strict, small):
    html = strict.get(reverse("pages:session", args=[small.pk])).content.decode()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', html).group(1)
    for url in writes(small)[:-1]:  # not logout: the rest of the test needs the session
        r = strict.post(url, {}, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
        assert r.status_code != 403, url


def test_the_login_form_is_csrf_protected(db):
    c = Client(enforce_csrf_checks=True)
    assert c.post(reverse("pages:login"), {"username": "a", "password": "b"}).status_code == 403


@pytest.fixture
def hostile(project, django_capture_on_commit_callbacks):
    """A session whose messages, tool names, arguments and title carry HTML/JS payloads,
    compacted once so they also reach the summary, prompt, ledger and archive."""
    msgs = factories.agent_messages(8, tag="x", extra_user=list(XSS_TEXTS))
    msgs.insert(5, {"role": "assistant", "content": XSS_TEXTS[1], "tool_calls": [
        {"id": "call_evil", "type": "function", "function": {"name": "<b>evil</b>", "arguments": '{"q": "</script><script>alert(1)</script>"}'}}]})
    msgs.insert(6, {"role": "tool", "tool_call_id": "call_evil", "content": XSS_TEXTS[0]})
    s = factories.import_messages(project, msgs, title="<script>alert('title')</script>")
    run = factories.force(s, capture=django_capture_on_commit_callbacks, overrides={"cut.keep_messages": 4})
    assert run.status == "succeeded", run.error
    return s, run


def assert_inert(html: str):
    assert "<script>window.__xss" not in html
    assert "<img src=x onerror" not in html
    assert "<svg onload" not in html
    assert "<b>evil</b>" not in html
    assert "</script><script>alert(1)" not in html
    assert "<script>alert(&#x27;title&#x27;)" not in html and "<script>alert('title')" not in html


def test_payloads_render_as_text_on_every_page(web, hostile):
    s, run = hostile

    entry = StoredArchiveEntry.objects.filter(session=s).first()
    urls = [reverse("pages:session", args=[s.pk]), reverse("pages:run", args=[run.pk]),
            reverse("pages:before-after", args=[run.pk]), reverse("pages:sessions"),
            reverse("pages:archive", args=[s.pk]) + f"?entry={entry.entry_id}&limit=100",
            reverse("pages:archive", args=[s.pk]) + "?q=script",
            reverse("pages:transcript", args=[s.pk]) + "?start=0"]
    for url in urls:
        html = web.get(url).content.decode()
        assert_inert(html)
    html = web.get(reverse("pages:session", args=[s.pk])).content.decode()
    assert "&lt;script&gt;window.__xss = 1; alert(&#x27;xss-script&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;evil&lt;/b&gt;" in html


def test_the_timeline_json_cannot_close_its_script_tag(web, hostile):
    s, _run = hostile
    html = web.get(reverse("pages:session", args=[s.pk])).content.decode()
    block = re.search(r'<script id="timeline-data" type="application/json">(.*?)</script>', html, re.S).group(1)
    assert "<" not in block


def test_archive_handles_become_links_and_nothing_else_does(db):
    tpl = Template("{% load handles %}{{ text|archive_links:7 }}|{{ text|highlight:q }}")
    text = 'see ar_0123456789abcdef"><img src=x onerror=alert(1)> and <script>ar_fedcba9876543210</script>'
    html = tpl.render(Context({"text": text, "q": "<img"}))
    links, marked = html.split("|", 1)
    assert "<img" not in html and "<script>" not in html
    assert links.count('<a class="handle" href="/sessions/7/archive/?entry=ar_0123456789abcdef#entry-content"') == 1
    assert 'entry=ar_fedcba9876543210#entry-content"' in links
    assert '<mark class="hit">&lt;img</mark> src=x' in marked
    # a handle glued to other letters is not one
    assert "<a" not in Template("{% load handles %}{{ t|archive_links:7 }}").render(Context({"t": "xar_0123456789abcdef"}))


def test_a_hostile_archive_search_stays_text(web, hostile):
    s, _run = hostile
    html = web.get(reverse("pages:archive", args=[s.pk]), {"q": "<img src=x onerror"}).content.decode()
    assert_inert(html)
    assert '<mark class="hit">&lt;img src=x onerror</mark>' in html


class Tags(HTMLParser):
    """Every element a browser would build from the page, with its attributes."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.seen.append((tag, attrs))


def test_markdown_payloads_render_no_script_and_no_dangerous_link(web, project):
    msgs = factories.agent_messages(3, tag="md", extra_user=list(MARKDOWN_XSS_TEXTS))
    msgs.append({"role": "assistant", "content": "\n\n".join(MARKDOWN_XSS_TEXTS)})
    s = factories.import_messages(project, msgs, title="markdown payloads")
    html = web.get(reverse("pages:transcript", args=[s.pk]) + "?start=0").content.decode()
    tags = Tags()
    tags.feed(html)
    links = [dict(a).get("href") or "" for t, a in tags.seen if t == "a"]
    assert not [h for h in links if not h.startswith(("/", "#", "?", "http:", "https:", "mailto:"))], links
    assert not [t for t, a in tags.seen if t in ("script", "img", "svg", "iframe") or any(k.startswith("on") for k, _ in a)]
    # the fenced block is shown as code, its tag as text
    assert "<pre><code>&lt;script&gt;window.__xss=11&lt;/script&gt;" in html
    # an http link stays a link, marked so it leaks nothing and cannot reach back into the page
    link = factories.import_messages(project, [{"role": "user", "content": "see <https://example.com/a> and **this**"}])
    html = web.get(reverse("pages:transcript", args=[link.pk]) + "?start=0").content.decode()
    assert '<a href="https://example.com/a" rel="noopener noreferrer nofollow">https://example.com/a</a>' in html
    assert "<strong>this</strong>" in html


def test_handles_in_rendered_markdown_become_links_but_never_inside_a_tag_or_link(db):
    tpl = Template("{% load handles studio %}{{ text|markdown|archive_links:7 }}")
    text = ("Read **ar_0123456789abcdef** first, then [the page](https://example.com/ar_fedcba9876543210) "
            "and `ar_00112233445566ff`.")
    html = tpl.render(Context({"text": text}))
    # in bold text and in code: a link to the entry
    assert 'href="/sessions/7/archive/?entry=ar_0123456789abcdef#entry-content"' in html
    assert 'entry=ar_00112233445566ff#entry-content' in html
    # inside the Markdown link: its address and text are left alone (no link nested in a link or an attribute)
    assert 'href="https://example.com/ar_fedcba9876543210"' in html
    assert "entry=ar_fedcba9876543210" not in html
