"""Runs list: the runs of every session of the project, with the sessions list's filters,
sortable columns and keyset pages."""
import re

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard.models import CompactionRun
from tests.pages import factories


def run_rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in html else ""
    return re.findall(r'<tr data-run="(\d+)">', body)


def test_every_run_of_the_project_newest_first_with_its_saving(web, project, grown, small):
    html = web.get(reverse("pages:runs")).content.decode()
    expected = [str(pk) for pk in CompactionRun.objects.filter(project=project).order_by("-id").values_list("id", flat=True)]
    assert run_rows(html) == expected and len(expected) >= 2
    run = CompactionRun.objects.get(pk=expected[0])
    saved = run.tokens_before["total"] - run.tokens_after["total"]
    row = html.split(f'<tr data-run="{run.pk}">', 1)[1].split("</tr>", 1)[0]
    assert "grown session" in row and re.search(r'data-testid="run-saved">([^<]+)<', row).group(1).strip() != "–"
    assert saved > 0


def test_runs_of_another_project_are_not_listed(web, project, grown):
    other = factories.make_project("globex")
    theirs = factories.force(factories.import_messages(other, factories.agent_messages(12), title="theirs"))
    assert str(theirs.pk) not in run_rows(web.get(reverse("pages:runs")).content.decode())


def test_the_failed_filter_keeps_failed_runs(web, project, small, grown, fail_run):
    failed = fail_run(small)
    assert failed.status == "failed", failed.error
    assert run_rows(web.get(reverse("pages:runs"), {"failures": "1"}).content.decode()) == [str(failed.pk)]


def test_filters_by_model_policy_and_date(web, project, grown, django_capture_on_commit_callbacks):
    mini = factories.import_messages(project, factories.agent_messages(14, tag="m"), title="mini", model="gpt-4o-mini")
    mini_run = factories.force(mini, capture=django_capture_on_commit_callbacks)
    url = reverse("pages:runs")
    assert run_rows(web.get(url, {"model": "gpt-4o-mini"}).content.decode()) == [str(mini_run.pk)]
    grown_runs = {str(pk) for pk in CompactionRun.objects.filter(session=grown).values_list("id", flat=True)}
    assert set(run_rows(web.get(url, {"model": "gpt-4o"}).content.decode())) == grown_runs
    assert len(run_rows(web.get(url, {"policy": str(project.active_policy_id)}).content.decode())) == len(grown_runs) + 1
    today = mini_run.created_at.date().isoformat()
    assert len(run_rows(web.get(url, {"since": today, "until": today}).content.decode())) == len(grown_runs) + 1
    assert run_rows(web.get(url, {"until": "2000-01-01"}).content.decode()) == []
    html = web.get(url, {"since": "yesterday"}).content.decode()
    assert "is not a date" in html and len(run_rows(html)) == len(grown_runs) + 1


def test_sorting_on_status_and_paging_walk_every_run_once(web, project, grown, small, fail_run, monkeypatch):
    fail_run(small)
    monkeypatch.setattr("dashboard.selectors.runs_list.RUNS_PAGE", 2)
    expected = sorted(CompactionRun.objects.filter(project=project).values_list("status", "id"))
    seen, cursor = [], None
    while True:
        params = {"sort": "status"}
        if cursor:
            params["cursor"] = cursor
        html = web.get(reverse("pages:runs"), params).content.decode()
        seen += run_rows(html)
        found = re.search(r'href="\?sort=status&amp;cursor=([^"&]+)"', html) or re.search(r'href="\?cursor=([^"&]+)&amp;sort', html)
        if not found:
            break
        cursor = found.group(1)
    assert seen == [str(pk) for _status, pk in expected]


def test_both_lists_cost_the_same_queries_for_3_and_for_30_sessions(web, project, django_capture_on_commit_callbacks):
    def add(n, start):
        for k in range(start, start + n):
            s = factories.import_messages(project, factories.agent_messages(3 + k % 4, tag=f"c{k}"), title=f"c{k}",
                                          model=("gpt-4o", "gpt-4o-mini")[k % 2])
            if k % 3 == 0:
                factories.force(s, capture=django_capture_on_commit_callbacks)

    def count():
        out = []
        for url, params in ((reverse("pages:sessions"), {"sort": "-threshold", "near": "1"}),
                            (reverse("pages:runs"), {"model": "gpt-4o", "sort": "status"})):
            with CaptureQueriesContext(connection) as ctx:
                assert web.get(url, params).status_code == 200
            out.append(len(ctx.captured_queries))
        return out

    add(3, 0)
    at_3 = count()
    add(27, 3)
    assert count() == at_3
