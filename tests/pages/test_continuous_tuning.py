"""Continuous tuning as the overview shows it: a pass over the project's recent sessions
(sampled to the time budget, most recent first), its sentence on the overview with the link
to its evidence, the one-click apply, and opt-in auto-apply with its three guardrails (recall
floor, maximum step, rollback when live recall falls below the floor).

The pass runs in this process (tune_project, what the worker's task calls; the worker path
itself is tests/service/test_continuous_tuning.py)."""
from __future__ import annotations

import html as htmllib
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from compaction import Policy
from dashboard.models import AutoApply, ContinuousTuning, Session, SweepStatus, TuningSweep
from dashboard.services import run_recall
from dashboard.services.common import now
from dashboard.services.continuous_tuning import (
    guarded_steps,
    replay_tokens,
    sample_sessions,
    tune_project,
)
from dashboard.services.tuning_autoapply import roll_back_if_below_floor, take_step
from tests.pages import factories


@pytest.fixture
def recent(project):
    """Three sessions of different sizes, imported in this order (the last is the most recent)."""
    return [factories.import_messages(project, factories.agent_messages(turns, tag=f"s{turns}"), title=f"{turns} turns")
            for turns in (14, 9, 11)]


def test_the_sample_is_the_most_recent_sessions_that_fit_the_budget_in_a_fixed_order(project, recent, settings):
    old = factories.import_messages(project, factories.agent_messages(6, tag="old"), title="old")
    Session.objects.filter(pk=old.pk).update(last_message_at=now() - timedelta(days=30))  # a month-old session
    newest, middle = recent[2], recent[1]
    # a budget that the two newest fit (13 settings tried) and the third does not
    settings.TUNING_TIME_BUDGET = (replay_tokens(newest) + replay_tokens(middle) + 1) * 13 / 1_000_000
    settings.TUNING_REPLAY_TOKENS_PER_SECOND = 1_000_000
    settings.TUNING_WINDOW_DAYS = 7
    one = tune_project(project.pk)
    two = tune_project(project.pk)
    assert one.status == SweepStatus.DONE, one.error
    assert one.session_ids == two.session_ids == [newest.pk, middle.pk]
    assert one.recent_sessions == 3  # the month-old session is outside the window
    assert one.sweep.scope == "recent" and one.sweep.points == two.sweep.points
    assert one.recommended == two.recommended and one.sentence == two.sentence
    assert one.estimated_seconds <= one.budget_seconds
    # a budget smaller than one session still replays the most recent one
    tiny = sample_sessions(list(Session.objects.filter(pk__in=[newest.pk, middle.pk]).order_by("-pk")), 13, 1e-6, 1.0)
    assert [s.pk for s in tiny.sessions] == [newest.pk]


def test_the_overview_says_what_the_last_pass_found_and_links_to_its_evidence(web, project, recent):
    tuning = tune_project(project.pk)
    assert tuning.status == SweepStatus.DONE and tuning.recommended is not None, tuning.sentence
    assert tuning.recommended != tuning.current, "the test sessions need a cheaper setting than 6,000 tokens"
    html = web.get(reverse("pages:home")).content.decode()
    sentence = re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", "", re.search(
        r'data-testid="tuning-sentence"[^>]*>(.*?)</p>', html, re.S).group(1))))
    setting = f"{int(tuning.recommended):,} tokens"
    share = f"{abs(tuning.tokens_saving) * 100:.0f}%"
    word = "fewer" if tuning.tokens_saving >= 0 else "more"
    recall = f"{tuning.recall * 100:.1f}%"
    assert sentence == (f"Policy “page-tests · trigger {setting}” would send {share} {word} tokens at recall {recall} "
                        f"on last week's 3 sessions."), sentence
    link = reverse("pages:tuning-evidence", args=[tuning.pk])
    assert f'href="{link}"' in html
    page = web.get(link)
    assert page.status_code == 200
    text = page.content.decode()
    for session in recent:
        assert reverse("pages:session", args=[session.pk]) in text
    points = re.search(r'data-testid="evidence-points">.*?<tbody>(.*?)</tbody>', text, re.S).group(1)
    assert points.count("<tr") == len(tuning.sweep.values)  # one row per setting tried
    assert "recommended</small>" in text


def test_nothing_changes_without_a_click_and_the_click_applies_it_with_undo(web, project, recent):
    before = project.active_policy_id
    tuning = tune_project(project.pk)
    project.refresh_from_db()
    assert project.active_policy_id == before and tuning.auto == AutoApply.NONE
    answer = web.post(reverse("pages:tuning-apply", args=[tuning.sweep.session_id]),
                      {"sweep": tuning.sweep_id, "value": tuning.recommended, "target": "project"}).content.decode()
    project.refresh_from_db()
    policy = Policy.load(project.active_policy.data)
    assert policy.trigger.threshold == int(tuning.recommended) and 'data-testid="undo"' in answer
    web.post(reverse("pages:tuning-undo", args=[tuning.sweep.session_id]), {"target": "project", "previous": before})
    project.refresh_from_db()
    assert project.active_policy_id == before


def _sweep(project, session, current: float, points: list[tuple[float, int, int, int]]) -> TuningSweep:
    """A finished sweep with the given (setting, tokens sent, needed, kept) points: the stored
    figures auto-apply reads, without a replay that would take seconds to reach them."""
    return TuningSweep.objects.create(
        project=project, session=session, scope="recent", parameter="window_fraction", current=current,
        values=[v for v, *_ in points], policy=Policy.load(factories.TEST_POLICY).to_json(), status=SweepStatus.DONE,
        points=[{"value": v, "tokens_sent": sent, "needed": needed, "kept": kept, "cost_usd": None,
                 "cost_without_cache_usd": None, "errors": []} for v, sent, needed, kept in points])


def _pass(project, sweep) -> ContinuousTuning:
    return ContinuousTuning.objects.create(project=project, sweep=sweep, status=SweepStatus.DONE, window_days=7,
                                           budget_seconds=60, recall_target=0.98, finished_at=now())


def test_auto_apply_takes_the_cheapest_step_within_the_maximum_that_meets_the_floor(project, recent, settings):
    settings.TUNING_RECALL_FLOOR, settings.TUNING_MAX_STEP = 0.98, 0.15
    sweep = _sweep(project, recent[0], 0.8, [
        (0.4, 500, 100, 100),   # cheapest of all, meets the floor, but 50% away: beyond the maximum step
        (0.68, 700, 100, 97),   # within the step and cheaper, but recall 97% is below the floor
        (0.72, 800, 100, 99),   # within the step, meets the floor: the one to take
        (0.8, 900, 100, 100),   # the current setting
        (0.92, 1000, 100, 100),
    ])
    tuning = _pass(project, sweep)
    take_step(tuning, sweep)
    project.refresh_from_db()
    assert tuning.auto == AutoApply.APPLIED and tuning.applied_value == 0.72
    assert Policy.load(project.active_policy.data).trigger.fraction == 0.72
    assert tuning.applied_policy_id == project.active_policy_id and tuning.previous_policy is not None


def test_auto_apply_holds_when_no_step_meets_the_floor(project, recent, settings):
    settings.TUNING_RECALL_FLOOR, settings.TUNING_MAX_STEP = 0.98, 0.15
    before = project.active_policy_id
    sweep = _sweep(project, recent[0], 0.8, [(0.4, 500, 100, 100), (0.72, 800, 100, 90), (0.8, 900, 100, 100)])
    tuning = _pass(project, sweep)
    take_step(tuning, sweep)
    project.refresh_from_db()
    assert tuning.auto == AutoApply.HELD and project.active_policy_id == before
    assert "reaches the floor" in tuning.auto_note


def test_a_step_whose_live_recall_falls_below_the_floor_is_rolled_back(project, recent, settings,
                                                                      django_capture_on_commit_callbacks):
    settings.TUNING_RECALL_FLOOR, settings.TUNING_MAX_STEP = 0.98, 0.15
    before = project.active_policy_id
    sweep = _sweep(project, recent[0], 0.8, [(0.72, 800, 100, 99), (0.8, 900, 100, 100)])
    step = _pass(project, sweep)
    take_step(step, sweep)
    project.refresh_from_db()
    assert step.auto == AutoApply.APPLIED and project.active_policy_id != before
    # live traffic under the applied policy: a run whose next answer needed 10 identifiers, 9 kept
    run = factories.force(recent[1], capture=django_capture_on_commit_callbacks)
    assert run.policy_id == project.active_policy_id
    # above the floor first: nothing rolls back
    run_recall.keep(run, {"at": 1, "needed": 100, "kept": 99, "recall": 0.99})
    check = _pass(project, None)
    assert roll_back_if_below_floor(project, check) is False and check.live_recall == 0.99
    run.result = {k: v for k, v in run.result.items() if k != "recall"}
    run_recall.keep(run, {"at": 1, "needed": 10, "kept": 9, "recall": 0.9})
    check = _pass(project, None)
    assert roll_back_if_below_floor(project, check) is True
    project.refresh_from_db()
    assert project.active_policy_id == before and check.auto == AutoApply.ROLLED_BACK and check.live_recall == 0.9
    # once rolled back, the step is no longer in use: the next pass leaves the policy alone
    assert roll_back_if_below_floor(project, _pass(project, None)) is False


def test_a_pass_with_auto_apply_on_takes_a_guarded_step_from_its_own_replays(project, recent, settings):
    settings.TUNING_AUTO_APPLY, settings.TUNING_RECALL_FLOOR, settings.TUNING_MAX_STEP = True, 0.5, 0.15
    tuning = tune_project(project.pk)
    assert sorted(set(guarded_steps("tokens", 6000.0, 0.15)) - set(tuning.sweep.values)) == []
    assert tuning.auto in (AutoApply.APPLIED, AutoApply.HELD), tuning.auto_note
    if tuning.auto == AutoApply.APPLIED:
        assert abs(tuning.applied_value - 6000) <= 0.15 * 6000


def test_a_pass_with_no_recent_session_says_so_on_the_overview(web, project, settings):
    old = factories.import_messages(project, factories.agent_messages(3, tag="old"), title="old")
    Session.objects.filter(pk=old.pk).update(last_message_at=now() - timedelta(days=10))  # older than the window
    settings.TUNING_WINDOW_DAYS = 3
    tuning = tune_project(project.pk)
    assert tuning.status == SweepStatus.DONE and tuning.session_ids == [] and tuning.sweep is None
    html = web.get(reverse("pages:home")).content.decode()
    assert "No session was active in the last 3 days." in html and 'data-testid="tuning-apply"' not in html


def test_the_evidence_is_for_the_projects_members_only(client, project, django_user_model, settings):
    settings.TUNING_WINDOW_DAYS = 3
    tuning = tune_project(project.pk)  # no session yet: a quick pass, still a page
    link = reverse("pages:tuning-evidence", args=[tuning.pk])
    stranger = django_user_model.objects.create_user("mallory", password="x")
    client.force_login(stranger)
    assert client.get(link).status_code == 404
    factories.add_member(project, stranger, "viewer")
    assert client.get(link).status_code == 200
