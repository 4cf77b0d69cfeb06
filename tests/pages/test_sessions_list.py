"""Sessions list: columns, search by title or id, filters, cursor pages."""
import re

from django.urls import reverse

from compaction import Policy
from dashboard.models import Session
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
