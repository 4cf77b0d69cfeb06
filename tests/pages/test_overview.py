"""The overview page: savings against no compaction, runs per day, by trigger and status,
retention, sessions near their threshold, the most expensive sessions, gateway traffic;
each widget in a fixed number of queries whatever the number of sessions."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from compaction.windows import price_per_token
from dashboard.models import CompactionRun, GatewaySession, RunStatus
from dashboard.selectors import overview as O
from dashboard.selectors.run_lookahead import run_lookahead, run_position
from tests.pages import factories


def value(html: str, testid: str) -> str:
    return re.search(rf'data-testid="{testid}" data-value="([^"]*)"', html).group(1)


def test_savings_are_the_sum_of_every_succeeded_runs_before_minus_after(web, project, grown, django_capture_on_commit_callbacks):
    local = factories.import_messages(project, factories.agent_messages(20, tag="l"), title="local", model="my-local-model")
    factories.force(local, capture=django_capture_on_commit_callbacks)
    runs = list(CompactionRun.objects.filter(project=project, status=RunStatus.SUCCEEDED).select_related("session"))
    assert len(runs) >= 3
    tokens = sum(r.tokens_before["total"] - r.tokens_after["total"] for r in runs)
    priced = sum(r.tokens_before["total"] - r.tokens_after["total"] for r in runs if r.session.model == "gpt-4o")
    html = web.get(reverse("pages:home")).content.decode()
    assert int(value(html, "tokens-saved")) == tokens > 0
    assert float(value(html, "dollars-saved")) == pytest.approx(priced * price_per_token("gpt-4o")[0], abs=1e-6)
    # a model litellm has no price for is named with its tokens, not priced at zero
    unpriced = re.search(r'data-testid="unpriced">(.*?)</span>', html, re.S).group(1)
    assert "my-local-model" in unpriced and f"{tokens - priced:,}" in unpriced
    assert re.search(r'data-testid="succeeded-runs">(\d+)<', html).group(1) == str(len(runs))


def test_runs_by_trigger_and_status_and_per_day(web, project, grown, django_capture_on_commit_callbacks):
    factories.force(factories.import_messages(project, factories.agent_messages(2), title="tiny"),
                    capture=django_capture_on_commit_callbacks)
    table = O.runs_by_trigger_and_status(project)
    auto = dict(zip(table.statuses, next(c for t, c, _ in table.rows if t == "auto"), strict=True))
    assert auto["succeeded"] == CompactionRun.objects.filter(session=grown, trigger="auto", status="succeeded").count() > 0
    assert table.total == CompactionRun.objects.filter(project=project).count()
    days = O.runs_per_day(project)
    assert len(days) == O.CHART_DAYS
    assert days[-1].succeeded == CompactionRun.objects.filter(project=project, status="succeeded").count()
    chart = O.chart_data(days)
    assert len(chart["x"]) == len(chart["succeeded"]) == len(chart["failed"]) == O.CHART_DAYS
    html = web.get(reverse("pages:home")).content.decode()
    assert 'id="per-day-data"' in html and 'data-testid="by-trigger"' in html


def test_retention_distribution_counts_every_scored_run(web, project, grown):
    dist = O.retention_distribution(project)
    succeeded = CompactionRun.objects.filter(project=project, status="succeeded").count()
    assert dist.scored + dist.not_scored == succeeded
    assert sum(n for _label, n in dist.buckets) == dist.scored


def test_recall_is_kept_on_earlier_runs_once_the_agent_answered_and_the_overview_shows_it(web, project, grown):
    """Each commit measures the session's earlier runs (the agent has answered after them by
    then); the figures kept are the run page's look-ahead, computed here independently."""
    runs = list(CompactionRun.objects.filter(session=grown, status="succeeded").order_by("pk"))
    assert len(runs) >= 2
    measured = [r for r in runs if "recall" in (r.result or {})]
    assert runs[0] in measured  # the session went on past its first run: measured at a later commit
    for run in measured:
        expected = run_lookahead(run, run_position(run))
        assert run.result["recall"] == {k: expected[k] for k in ("at", "needed", "kept", "recall")}
    scores = [r.result["recall"]["recall"] for r in measured if r.result["recall"]["recall"] is not None]
    dist = O.recall_distribution(project)
    assert dist.measured == len(scores) and dist.measured + dist.not_measured == len(runs)
    assert sum(n for _label, n in dist.buckets) == dist.measured
    html = web.get(reverse("pages:home")).content.decode()
    if scores:
        kept = sum(r.result["recall"]["kept"] for r in measured if r.result["recall"]["recall"] is not None)
        needed = sum(r.result["recall"]["needed"] for r in measured if r.result["recall"]["recall"] is not None)
        assert re.search(r'data-testid="recall-pooled">([^<]*)<', html).group(1) == f"{kept / needed * 100:.1f}%"
    # the run page computes the newest run's figure when the agent has answered after it, and keeps it
    last = runs[-1]
    web.get(reverse("pages:run", args=[last.pk]))
    last.refresh_from_db()
    expected = run_lookahead(last, run_position(last))
    assert ("recall" in last.result) == bool(expected and expected.get("at") is not None)


def test_closest_to_threshold_ranks_by_share_of_each_sessions_trigger(web, project, small):
    # 20 turns is over the test policy's 6,000-token trigger; 10 turns ("small") is under it
    big = factories.import_messages(project, factories.agent_messages(20, tag="b"), title="over the line")
    rows = O.closest_to_threshold(project)
    assert [r.session.pk for r in rows] == [big.pk, small.pk]
    assert rows[0].ratio > 1 > rows[1].ratio > 0
    assert rows[0].ratio == pytest.approx(big.context_total / 6000)


def test_most_expensive_orders_priced_sessions_and_names_unpriced_models(project):
    cheap = factories.import_messages(project, factories.agent_messages(2), title="cheap", model="gpt-4o-mini")
    dear = factories.import_messages(project, factories.agent_messages(4), title="dear", model="gpt-4o")
    factories.import_messages(project, factories.agent_messages(30), title="unknown", model="my-local-model")
    found = O.most_expensive(project)
    assert [r.session.pk for r in found.rows] == [dear.pk, cheap.pk]
    assert found.rows[0].dollars == pytest.approx(dear.context_total * price_per_token("gpt-4o")[0])
    assert found.unpriced_models == ["my-local-model"]


def test_gateway_traffic_shows_only_when_the_gateway_saw_sessions(web, project, small):
    assert O.gateway_traffic(project) is None
    assert 'data-testid="gateway"' not in web.get(reverse("pages:home")).content.decode()
    GatewaySession.objects.create(session=small, project=project, identity="agent-1", stored_count=7, chain="x" * 64)
    traffic = O.gateway_traffic(project)
    assert (traffic.sessions, traffic.messages, traffic.forks) == (1, 7, 0)
    assert 'data-testid="gateway"' in web.get(reverse("pages:home")).content.decode()


WIDGETS = {
    "savings": (O.savings, 1), "runs_per_day": (O.runs_per_day, 1), "by_trigger": (O.runs_by_trigger_and_status, 1),
    "retention": (O.retention_distribution, 1), "recall": (O.recall_distribution, 1), "closest": (O.closest_to_threshold, 3),
    "expensive": (O.most_expensive, 2), "gateway": (O.gateway_traffic, 1),
}


def _queries(project) -> dict[str, int]:
    out = {}
    for name, (widget, _budget) in WIDGETS.items():
        with CaptureQueriesContext(connection) as ctx:
            widget(project)
        out[name] = len(ctx.captured_queries)
    return out


def _add_sessions(project, n, start, capture):
    for k in range(start, start + n):
        model = ("gpt-4o", "gpt-4o-mini", "my-local-model")[k % 3]
        s = factories.import_messages(project, factories.agent_messages(3 + k % 5, tag=f"q{k}"), title=f"q{k}", model=model)
        if k % 4 == 0:
            factories.force(s, capture=capture)
        if k % 5 == 0:
            GatewaySession.objects.create(session=s, project=project, identity=f"g{k}", stored_count=k, chain="0" * 64)


def test_each_widget_has_a_query_budget_that_does_not_grow_with_sessions(project, django_capture_on_commit_callbacks):
    _add_sessions(project, 3, 0, django_capture_on_commit_callbacks)
    at_3 = _queries(project)
    _add_sessions(project, 27, 3, django_capture_on_commit_callbacks)
    at_30 = _queries(project)
    assert at_3 == at_30
    assert all(at_30[name] <= budget for name, (_w, budget) in WIDGETS.items()), at_30


def test_the_whole_page_is_a_fixed_number_of_queries(web, project, django_capture_on_commit_callbacks):
    _add_sessions(project, 3, 0, django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as small_ctx:
        assert web.get(reverse("pages:home")).status_code == 200
    _add_sessions(project, 27, 3, django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as big_ctx:
        assert web.get(reverse("pages:home")).status_code == 200
    assert len(small_ctx.captured_queries) == len(big_ctx.captured_queries)


def test_without_a_project_the_overview_points_to_creating_one(web, db):
    html = web.get(reverse("pages:home")).content.decode()
    assert "No project yet" in html and reverse("pages:sessions") in html
