"""A 10,000-message session page: as many queries as a 100-message one, under 500 KB."""
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.pages import factories

MAX_HTML = 500 * 1024


@pytest.fixture
def long_and_short(project, django_capture_on_commit_callbacks):
    long_ = factories.import_messages(project, factories.agent_messages(2500, words=20, tag="L")[:10_000],
                                      title="ten thousand messages")
    short = factories.import_messages(project, factories.agent_messages(25, words=20, tag="S")[:100],
                                      title="one hundred messages")
    for s in (long_, short):  # one compaction each, so badges, markers and archive marks are drawn
        run = factories.force(s, capture=django_capture_on_commit_callbacks)
        assert run.status == "succeeded", run.error
    long_.refresh_from_db()
    short.refresh_from_db()
    assert long_.message_count == 10_000 and short.message_count == 100
    return long_, short


def count_queries(web, url):
    web.get(url)  # warm the session and caches once, as a returning visitor's page view
    with CaptureQueriesContext(connection) as ctx:
        r = web.get(url)
    assert r.status_code == 200
    return len(ctx.captured_queries), r


def test_the_session_page_runs_the_same_queries_at_10000_messages_as_at_100(web, long_and_short,
                                                                             django_assert_num_queries):
    long_, short = long_and_short
    n_short, _ = count_queries(web, reverse("pages:session", args=[short.pk]))
    n_long, r = count_queries(web, reverse("pages:session", args=[long_.pk]))
    assert n_long == n_short
    with django_assert_num_queries(n_short):
        web.get(reverse("pages:session", args=[long_.pk]))
    assert n_short <= 13  # 13th: the session's gateway row (identity, fork note), none for its length
    # and so do the transcript's pages, deep into the history or not
    url = reverse("pages:transcript", args=[long_.pk])
    n_start, _ = count_queries(web, url + "?start=0")
    n_deep, r = count_queries(web, url + "?around=9000")
    assert n_deep == n_start and 'id="msg-9000"' in r.content.decode()


def test_the_10000_message_page_is_under_500_kb_and_bucketed(web, long_and_short):
    long_, _ = long_and_short
    r = web.get(reverse("pages:session", args=[long_.pk]))
    html = r.content.decode()
    assert len(r.content) < MAX_HTML, len(r.content)
    data = json.loads(re.search(r'<script id="timeline-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert data["bucket"] == 20 and len(data["x"]) == 500  # 10,000 messages in 500 bars
    assert sum(sum(s) for s in data["series"]) == long_.history_total
    assert len(re.findall(r'<article class="msg ', html)) == 50
    table = html.split('data-testid="timeline-table"', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(r'<tr><th scope="row">', table)) == 100
