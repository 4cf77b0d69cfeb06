"""Sessions list: columns, search by title or id, filters, cursor pages."""
import re

from django.test import Client
from django.urls import reverse

from compaction import Policy
from dashboard.models import CompactionRun, Session, StoredArchiveEntry, StoredMessage
from dashboard.services.policies import create_policy, set_session_policy
from dashboard.services.sessions import check_trigger
from tests.pages import factories


def rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in html else ""
    return re.findall(r'<a href="/sessions/(\d+)/">', body)


def test_the_list_shows_both_token_numbers_labelled(web, small):
    html = web.get(reverse("pages:sessions")).content.decode()
    for header in ("Messages", "Context now", "Total tokens", "Compactions", "Last activity"):
        assert header in html
    assert "small session" in html
    assert f"#{small.pk}" in html


def test_search_finds_sessions_by_title_by_external_id_and_by_id(web, project):
    a = factories.import_messages(project, factories.agent_messages(1), title="refactor the parser", external_id="ext-alpha")
    b = factories.import_messages(project, factories.agent_messages(1), title="write the docs", external_id="ext-beta")
    url = reverse("pages:sessions")
    assert rows(web.get(url, {"q": "PARSER"}).content.decode()) == [str(a.pk)]
    assert rows(web.get(url, {"q": "ext-beta"}).content.decode()) == [str(b.pk)]
    assert rows(web.get(url, {"q": str(a.pk)}).content.decode()) == [str(a.pk)]
    assert "No session matches" in web.get(url, {"q": "nothing like this"}).content.decode()


def test_the_compacted_filter_keeps_sessions_with_compactions(web, small, grown):
    found = rows(web.get(reverse("pages:sessions"), {"compacted": "1"}).content.decode())
    assert found == [str(grown.pk)]


def test_the_over_threshold_filter_uses_each_sessions_policy(web, project, small):
    # 20 turns is ~9k tokens: over the test policy's 6,000-token trigger (never compacted here)
    big = factories.import_messages(project, factories.agent_messages(20), title="over the line")
    html = web.get(reverse("pages:sessions"), {"over": "1"}).content.decode()
    assert rows(html) == [str(big.pk)]
    assert "over threshold" in html
    # the same session under a session policy with a higher threshold is not over

    roomy = create_policy(project, "roomy", Policy.load({"trigger": {"kind": "tokens", "threshold": 50_000}}))
    set_session_policy(big, roomy)
    assert rows(web.get(reverse("pages:sessions"), {"over": "1"}).content.decode()) == []


def test_cursor_pages_walk_older_and_back_newer(web, project):
    made = [factories.import_messages(project, factories.agent_messages(1), title=f"s{i}") for i in range(30)]
    newest_first = [str(s.pk) for s in reversed(made)]
    first = web.get(reverse("pages:sessions")).content.decode()
    assert rows(first) == newest_first[:25]
    cursor = re.search(r'href="\?cursor=([^"&]+)"', first).group(1)
    second = web.get(reverse("pages:sessions"), {"cursor": cursor}).content.decode()
    assert rows(second) == newest_first[25:]
    prev = re.search(r'href="\?prev=([^"&]+)"', second).group(1)
    back = web.get(reverse("pages:sessions"), {"prev": prev}).content.decode()
    assert rows(back) == newest_first[:25]


def test_a_damaged_cursor_shows_the_first_page_and_says_so(web, small):
    html = web.get(reverse("pages:sessions"), {"cursor": "!!not-a-cursor"}).content.decode()
    assert "invalid cursor" in html and rows(html) == [str(small.pk)]


def test_htmx_asks_only_for_the_rows(web, small):
    r = web.get(reverse("pages:sessions"), {"q": "small"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="session-rows")
    html = r.content.decode()
    assert "<html" not in html and "small session" in html


def test_without_a_project_the_page_offers_to_create_one(web, db):
    html = web.get(reverse("pages:sessions")).content.decode()
    assert "No project yet" in html
    web.post(reverse("pages:create-project"), {"name": "first"})
    html = web.get(reverse("pages:sessions")).content.decode()
    assert "Upload sessions" in html and ">first</option>" in html


def test_the_over_threshold_filter_agrees_with_the_trigger_check(web, project):
    """The filter is a query over stored totals; it must say what check_trigger says."""

    policies = [
        {"trigger": {"kind": "window_fraction", "fraction": 0.05}, "reserved_output_tokens": 4096},
        {"trigger": {"kind": "messages", "threshold": 30}},
        {"trigger": {"kind": "any", "conditions": [{"kind": "tokens", "threshold": 20_000},
                                                    {"kind": "messages_since_summary", "threshold": 60}]}},
        {"trigger": {"kind": "all", "conditions": [{"kind": "tokens", "threshold": 3000},
                                                    {"kind": "messages", "threshold": 50}]}},
        {"trigger": {"kind": "window_fraction_since_summary", "fraction": 0.04}, "context_window": 100_000},
    ]
    made = []
    for k, data in enumerate(policies):
        row = create_policy(project, f"p{k}", Policy.load(data))
        for turns in (3, 8, 16):
            s = factories.import_messages(project, factories.agent_messages(turns, tag=f"{k}-{turns}"),
                                          title=f"p{k} {turns} turns")
            set_session_policy(s, row)
            made.append(s)
    expected = sorted(str(s.pk) for s in Session.objects.filter(pk__in=[m.pk for m in made]) if check_trigger(s).fired)
    assert 0 < len(expected) < len(made)
    found = rows(web.get(reverse("pages:sessions"), {"over": "1"}).content.decode())
    assert sorted(found) == expected


# -- Dashboard v2: sort, filters, import metadata, tokens saved, bulk delete -------------------

def test_tokens_saved_is_what_the_runs_removed_from_the_live_context(web, grown):
    runs = CompactionRun.objects.filter(session=grown, status="succeeded")
    freed = sum(r.tokens_before["total"] - r.tokens_after["total"] for r in runs)
    assert grown.history_total - grown.context_total == freed > 0
    html = web.get(reverse("pages:sessions")).content.decode()
    assert re.search(r'title="([\d,]+) fewer tokens per model call', html).group(1) == f"{freed:,}"


def test_columns_sort_both_ways_and_pages_keep_the_order(web, project, monkeypatch):
    sizes = [3, 1, 4, 1, 5, 9, 2, 6]
    made = [factories.import_messages(project, factories.agent_messages(n, tag=f"s{k}"), title=f"s{k}")
            for k, n in enumerate(sizes)]
    monkeypatch.setattr("dashboard.selectors.sessions_list.SESSIONS_PAGE", 3)
    url = reverse("pages:sessions")
    made = list(Session.objects.filter(pk__in=[s.pk for s in made]))
    keys = {"messages": lambda s: s.message_count, "title": lambda s: s.title.lower(),
            "activity": lambda s: s.last_message_at or s.created_at, "threshold": lambda s: s.context_total,
            "saved": lambda s: s.history_total - s.context_total}
    for sort in ("messages", "-messages", "title", "-activity", "-threshold", "saved"):
        key = keys[sort.lstrip("-")]
        expected = sorted(made, key=lambda s, key=key: (key(s), s.pk), reverse=sort.startswith("-"))
        seen, params = [], {"sort": sort}
        while True:
            html = web.get(url, params).content.decode()
            seen += rows(html)
            found = re.search(r'href="\?sort=[^"&]+&amp;cursor=([^"&]+)"', html)
            if not found:
                break
            params = {"sort": sort, "cursor": found.group(1)}
        assert seen == [str(s.pk) for s in expected], sort
    # the header link of the current column flips its direction; the arrow says which
    html = web.get(url, {"sort": "messages"}).content.decode()
    assert 'href="?sort=-messages" data-sort="messages"' in html and 'aria-sort="ascending"' in html


def test_an_unknown_sort_is_named_and_the_default_used(web, small):
    html = web.get(reverse("pages:sessions"), {"sort": "password"}).content.decode()
    assert "is not a column of this list" in html and rows(html) == [str(small.pk)]


def test_filters_by_model_policy_date_failures_and_near_threshold(web, project, small, fail_run):
    url = reverse("pages:sessions")
    mini = factories.import_messages(project, factories.agent_messages(2, tag="m"), title="mini", model="gpt-4o-mini")
    near = factories.import_messages(project, factories.agent_messages(20, tag="n"), title="near")  # over 6,000 tokens
    assert rows(web.get(url, {"model": "gpt-4o-mini"}).content.decode()) == [str(mini.pk)]
    roomy = create_policy(project, "roomy", Policy.load({"trigger": {"kind": "tokens", "threshold": 50_000}}))
    set_session_policy(mini, roomy)
    assert rows(web.get(url, {"policy": str(roomy.pk)}).content.decode()) == [str(mini.pk)]
    # the project's active policy also covers sessions without their own
    assert rows(web.get(url, {"policy": str(project.active_policy_id)}).content.decode()) == [str(near.pk), str(small.pk)]
    assert rows(web.get(url, {"near": "1"}).content.decode()) == [str(near.pk)]
    today = small.created_at.date().isoformat()
    assert len(rows(web.get(url, {"since": today, "until": today}).content.decode())) == 3
    assert rows(web.get(url, {"since": "2999-01-01"}).content.decode()) == []
    failed = fail_run(small)
    assert failed.status == "failed", failed.error
    assert rows(web.get(url, {"failures": "1"}).content.decode()) == [str(small.pk)]
    # every filter is in the URL the filter form sends, and stays on the header links
    html = web.get(url, {"model": "gpt-4o", "near": "1"}).content.decode()
    assert 'href="?model=gpt-4o&amp;near=1&amp;sort=title"' in html


def test_import_metadata_shows_the_external_id_uncut_and_tags_as_chips(web, project):
    long_id = "minipr__deepseek_bench1__django__django-11099__" + "x" * 80
    s = factories.import_messages(project, factories.agent_messages(2), title="Fix the admin", external_id=long_id)
    Session.objects.filter(pk=s.pk).update(metadata={
        "id": long_id, "source": "SWE-agent/mini-swe-agent:output/x.traj.json", "license": "MIT",
        "tags": ["django", "<b>bold</b>"], "meta": {"format": "mini", "benchmark": "SWE-bench Lite", "stats": {"messages": 5}},
        "metadata": {"customer": "acme"}})
    html = web.get(reverse("pages:sessions")).content.decode()
    assert f'data-testid="external-id">{long_id}<' in html
    chips = re.findall(r'<li class="chip">([^<]*)</li>', html)
    assert chips == ["django", "&lt;b&gt;bold&lt;/b&gt;", "format: mini", "benchmark: SWE-bench Lite", "customer: acme"]
    assert "source: SWE-agent/mini-swe-agent:output/x.traj.json" in html


def _ticked(web, ids, **extra):
    return web.post(reverse("pages:sessions-delete"), {"session": [str(i) for i in ids], **extra})


def test_delete_asks_first_then_removes_sessions_with_their_runs_and_archive(web, project, grown, small):
    keep = factories.import_messages(project, factories.agent_messages(2), title="keep me")
    runs = CompactionRun.objects.filter(session=grown).count()
    entries = StoredArchiveEntry.objects.filter(session=grown).count()
    assert runs and entries
    confirm = _ticked(web, [grown.pk, small.pk]).content.decode()
    assert re.search(rf"2 sessions, {runs} runs\s+and {entries} archive entries will be deleted", confirm)
    assert Session.objects.filter(pk=grown.pk).exists()  # nothing happens before the confirm
    r = _ticked(web, [grown.pk, small.pk], confirm="1", next="/sessions/?sort=title")
    assert r.status_code == 302 and r["Location"] == "/sessions/?sort=title"
    assert list(Session.objects.values_list("pk", flat=True)) == [keep.pk]
    assert not CompactionRun.objects.filter(session_id=grown.pk).exists()
    assert not StoredArchiveEntry.objects.filter(session_id=grown.pk).exists()
    assert not StoredMessage.objects.filter(session_id__in=[grown.pk, small.pk]).exists()
    assert "Deleted 2 sessions." in web.get(r["Location"]).content.decode()


def test_delete_is_all_or_nothing_and_says_why(web, project, small, django_capture_on_commit_callbacks):
    other = factories.make_project("globex")
    theirs = factories.import_messages(other, factories.agent_messages(2), title="theirs")
    r = _ticked(web, [small.pk, theirs.pk], confirm="1")
    assert r.status_code == 404 and f"no session #{theirs.pk} in project acme" in r.content.decode()
    assert Session.objects.count() == 2
    assert _ticked(web, ["1; drop"], confirm="1").status_code == 422
    assert "no session selected" in _ticked(web, [], confirm="1").content.decode()
    with django_capture_on_commit_callbacks(execute=False):  # a queued run that has not started
        web.post(reverse("pages:force", args=[small.pk]), {}, HTTP_HX_REQUEST="true")
    r = _ticked(web, [small.pk], confirm="1")
    assert r.status_code == 409 and "has a compaction queued or running" in r.content.decode()
    assert Session.objects.filter(pk=small.pk).exists()


def test_delete_needs_the_csrf_token(client, user, small):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(reverse("pages:sessions-delete"), {"session": [str(small.pk)], "confirm": "1"}).status_code == 403
    assert Session.objects.filter(pk=small.pk).exists()


def test_the_runs_link_carries_the_shared_filters_but_not_the_page_or_sort(web, small):
    html = web.get(reverse("pages:sessions"), {"model": "gpt-4o", "sort": "title", "over": "1"}).content.decode()
    assert 'href="/runs/?model=gpt-4o" data-testid="runs-of-these"' in html.replace("\n      data-testid", " data-testid")
