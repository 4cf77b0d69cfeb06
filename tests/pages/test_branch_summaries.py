"""The dashboard side of branch summaries and runs: branch summaries on the session page, the summary request
mode and inline execution on the run page, hooks and language in the tuning form."""
from __future__ import annotations

import html as htmllib
import re

from django.urls import reverse

from compaction.formats import ImportedSession
from compaction.hooks import hook_names, register_hook, unregister_hook
from dashboard.models import Session, StoredPolicy
from dashboard.services.sessions import import_session
from tests.pages import factories
from tests.pages.tuning_form import posted_form

SEARCH, CART = "shop/search", "shop/cart"


def keyed_session(project, capture):
    msgs = factories.agent_messages(8, tag="b")
    keys = [None] + [SEARCH if (i // 4) % 2 == 0 else CART for i in range(len(msgs) - 1)]
    session = import_session(project, ImportedSession(messages=msgs, title="keyed", model="gpt-4o"),
                             auto_compact=False, filter_keys=keys).session
    run = factories.force(session, capture=capture)
    assert run.status == "succeeded", run.error
    return Session.objects.get(pk=session.pk), run


def section(page: str) -> str:
    m = re.search(r'<article data-testid="branch-summaries".*?</article>', page, re.S)
    assert m, "no branch summaries section"
    return m.group(0)


def text(fragment: str) -> str:
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_the_session_page_lists_each_key_with_its_summary_and_which_one_is_served(
        web, project, django_capture_on_commit_callbacks):
    session, run = keyed_session(project, django_capture_on_commit_callbacks)
    page = section(web.get(reverse("pages:session", args=[session.pk])).content.decode())
    rows = re.findall(r"<tr[^>]*>\s*<th scope=\"row\"><code>(.*?)</code>", page)
    assert rows == ["(whole session)", CART, SEARCH]
    served = text(re.search(r'data-testid="branch-served">(.*?)</p>', page, re.S).group(1))
    assert served == "For (whole session) the agent is served the summary of (whole session) (exact match)."
    assert f'href="{reverse("pages:run", args=[run.pk])}"' in page
    assert "Allowlist: every key" in text(page) and "cascade to the whole session: on" in text(page)


def test_asking_for_a_key_shows_the_exact_summary_or_the_fallback(web, project, django_capture_on_commit_callbacks):
    session, _run = keyed_session(project, django_capture_on_commit_callbacks)
    url = reverse("pages:session", args=[session.pk])
    page = section(web.get(url, {"summary_key": SEARCH}).content.decode())
    assert text(re.search(r'data-testid="branch-served">(.*?)</p>', page, re.S).group(1)) == (
        f"For {SEARCH} the agent is served the summary of {SEARCH} (exact match).")
    assert re.search(r'<tr aria-current="true" data-served="1">\s*<th scope="row"><code>shop/search</code>', page)
    page = section(web.get(url, {"summary_key": "shop/toolbox"}).content.decode())
    assert "fallback: no summary for this key, so the whole-session summary" in text(page)
    page = section(web.get(url, {"summary_key": "shop//x"}).content.decode())
    assert 'role="alert"' in page and "empty path segment" in text(page)


def test_the_overview_refresh_keeps_the_section(web, project, django_capture_on_commit_callbacks):
    session, _run = keyed_session(project, django_capture_on_commit_callbacks)
    html = web.get(reverse("pages:session-overview", args=[session.pk])).content.decode()
    assert 'data-testid="branch-summaries"' in html


def test_sessions_without_filter_keys_show_no_branch_section(web, small):
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert 'data-testid="branch-summaries"' not in html


def test_the_run_page_says_how_the_summary_was_requested_and_where_the_run_executed(
        web, project, django_capture_on_commit_callbacks):
    session, run = keyed_session(project, django_capture_on_commit_callbacks)
    page = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    mode = text(re.search(r'data-testid="request-mode">(.*?)</div>', page, re.S).group(1))
    assert mode == "Summary request standalone cache-safe requests are off in this policy (summarizer.cache_safe)"
    where = text(re.search(r'data-testid="execution">(.*?)</div>', page, re.S).group(1))
    assert where.startswith("Executed by a worker")
    type(run).objects.filter(pk=run.pk).update(inline=True, inline_reason="broker unavailable: OperationalError")
    page = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    where = text(re.search(r'data-testid="execution">(.*?)</div>', page, re.S).group(1))
    assert where == "Executed inline could not be enqueued: broker unavailable: OperationalError"


def _form(session, **changes) -> dict:
    return posted_form(session, **changes)


def test_the_tuning_form_offers_the_registered_hooks_by_name_and_the_languages(web, small):
    html = web.get(reverse("pages:tuning", args=[small.pk])).content.decode()
    for kind, testid in (("pre_summary", "a-pre_summary"), ("post_summary", "a-post_summary"),
                         ("input_builder", "a-input_builder"), ("tool_call_formatter", "a-tool_call_formatter"),
                         ("tool_result_formatter", "a-tool_result_formatter")):
        select = re.search(rf'<select[^>]*data-testid="{testid}".*?</select>', html, re.S).group(0)
        offered = [v for v in re.findall(r'<option value="([^"]*)"', select) if v]
        assert offered == hook_names(kind), kind
    assert re.search(r'<select[^>]*data-testid="a-pre_summary"[^>]*multiple', html) or \
        re.search(r'<select[^>]*multiple[^>]*data-testid="a-pre_summary"', html)
    lang = re.search(r'<select[^>]*data-testid="a-language".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="([^"]*)"', lang) == ["", "en", "zh"]


def test_saving_hooks_and_a_language_from_the_tuning_form_stores_them_in_the_policy(web, small):
    data = _form(small, language="zh", pre_summary=["redact_secrets", "strip_ansi"], post_summary=["redact_secrets"],
                 tool_result_formatter="first_line", hooks_abort="1")
    data.update({"name": "zh with hooks", "target": "session"})
    r = web.post(reverse("pages:tuning-save", args=[small.pk]), data, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and 'data-testid="save-ok"' in r.content.decode(), r.content.decode()
    stored = StoredPolicy.objects.get(name="zh with hooks").data
    assert stored["language"] == "zh" and stored["finalize"]["language"] == "zh"
    assert stored["hooks"]["pre_summary"] == ["redact_secrets", "strip_ansi"]
    assert stored["hooks"]["post_summary"] == ["redact_secrets"]
    assert stored["hooks"]["tool_result_formatter"] == "first_line" and stored["hooks"]["abort_on_error"] is True
    html = web.get(reverse("pages:tuning", args=[small.pk])).content.decode()
    pre = re.search(r'<select[^>]*data-testid="a-pre_summary".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="([^"]*)" selected', pre) == ["redact_secrets", "strip_ansi"]


def test_an_unregistered_hook_name_posted_to_the_tuning_form_is_refused_naming_the_field(web, small):
    r = web.post(reverse("pages:tuning-preview", args=[small.pk]), _form(small, pre_summary=["no_such_hook"]),
                 HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and 'data-testid="tuning-errors"' in html
    assert "hooks.pre_summary" in html and "no_such_hook" in html
    data = _form(small, input_builder="no_such_hook")
    data.update({"name": "bad", "target": "project"})
    r = web.post(reverse("pages:tuning-save", args=[small.pk]), data, HTTP_HX_REQUEST="true")
    assert "hooks.input_builder" in r.content.decode() and not StoredPolicy.objects.filter(name="bad").exists()


def test_the_hook_choices_follow_the_registry(web, small):
    register_hook("post_summary", "page_test_hook", lambda t: t, description="added by a page test", replace=True)
    try:
        html = web.get(reverse("pages:tuning", args=[small.pk])).content.decode()
        assert "page_test_hook: added by a page test" in html
    finally:
        unregister_hook("post_summary", "page_test_hook")
    html = web.get(reverse("pages:tuning", args=[small.pk])).content.decode()
    assert "page_test_hook" not in html
