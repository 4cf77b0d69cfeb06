"""The dashboard's view of triggers follows the engine's condition classes: the database filter
agrees with the engine's evaluation for every kind, the words are the condition's own, the
tuning form offers every kind that a replay can judge, and tool-output clearing is judged by
the engine's check on the stored totals."""
from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from compaction import conditions as C
from compaction.policy import Policy
from compaction.reduction.pipeline import clearing_due as engine_clearing_due
from compaction.triggers import evaluate
from dashboard.models import Session
from dashboard.selectors.triggers import (
    SESSION_COLUMNS,
    TRIGGER_INFO,
    TRIGGER_KINDS,
    condition_q,
    trigger_text,
)
from dashboard.services.keys import get_or_create_project
from dashboard.services.sessions import trigger_state
from dashboard.services.triggers import clearing_due

WINDOW = 10_000
LEAVES = pytest.mark.parametrize("cls", C.LEAF_CONDITIONS, ids=C.kind_of)


def sample(cls) -> C.LeafCondition:
    name, cast = cls.setting()
    return cls(**{name: cast(0.5) if cast is float else 70})


def test_every_running_number_has_its_session_column():
    assert set(SESSION_COLUMNS) == set(C.STATE_FIELDS)
    columns = {f.name for f in Session._meta.get_fields()}
    assert set(SESSION_COLUMNS.values()) <= columns


@LEAVES
def test_the_database_filter_agrees_with_the_engine_for_every_kind(db, cls):
    project, _ = get_or_create_project("filters")
    cond = sample(cls)
    policy = Policy.load({"context_window": WINDOW, "reserved_output_tokens": 1000, "trigger": cond.model_dump()})
    edge = math.floor(cond.limit(trigger_state(Session(), policy).usable_window))
    rows = []
    for value in (0, edge - 1, edge, edge + 1, edge + 50):
        row = Session(project=project)
        if isinstance(cond, C.AgeCondition):
            # seconds since the last message, with a margin so the clock moving on changes nothing
            seconds = value + 30 if value > edge else max(0, value - 30)
            row.last_message_at = timezone.now() - timedelta(seconds=seconds)
        else:
            setattr(row, SESSION_COLUMNS[cond.state_field], max(0, value))
        row.save()
        rows.append(row)
    rows.append(Session.objects.create(project=project))      # no message yet
    expected = {r.pk for r in rows if evaluate(policy.trigger, trigger_state(r, policy)).fired}
    found = set(Session.objects.filter(pk__in=[r.pk for r in rows])
                .filter(condition_q(policy.trigger, WINDOW, 1000)).values_list("pk", flat=True))
    assert found == expected
    assert 1 <= len(expected) < len(rows)

    either = C.AnyCondition(conditions=[cond, C.TokensCondition(threshold=10**9)])
    both = C.AllCondition(conditions=[cond, C.MessagesCondition(threshold=10**9)])
    assert set(Session.objects.filter(condition_q(either, WINDOW, 1000)).values_list("pk", flat=True)) == expected
    assert not Session.objects.filter(condition_q(both, WINDOW, 1000)).exists()


@LEAVES
def test_the_words_are_the_conditions_own(cls):
    cond = sample(cls)
    assert trigger_text(cond) == cond.describe()


def test_the_tuning_form_offers_every_kind_a_replay_can_judge():
    offered = {kind: (label, key, cast) for kind, label, key, cast in TRIGGER_KINDS}
    replayable = [c for c in C.LEAF_CONDITIONS if c.replayable]
    assert list(offered) == [C.kind_of(c) for c in replayable]
    for cls in replayable:
        label, key, cast = offered[C.kind_of(cls)]
        assert (label, key, cast) == (cls.label, *cls.setting())
        assert TRIGGER_INFO[C.kind_of(cls)] == (key, cast)
        # what the form sends back is a valid trigger
        assert Policy.load({"trigger": {"kind": C.kind_of(cls), key: cast("1")}}).trigger.kind == C.kind_of(cls)
    assert "idle_seconds" not in TRIGGER_INFO


@pytest.mark.parametrize("total", [0, 4999, 5000, 5001, 7000, 20_000])
@pytest.mark.parametrize("clearing", [{"trigger_fraction": 0.5}, {"trigger_tokens": 6000},
                                      {"trigger_tokens": 6000, "trigger_fraction": 0.9}, {"enabled": False}])
def test_clearing_is_judged_by_the_engines_check_on_stored_totals(total, clearing):
    policy = Policy.load({"context_window": 11_000, "reserved_output_tokens": 1000,
                          "reduction": {"enabled": True, "clearing": clearing}})
    state = trigger_state(Session(context_total=total), policy)
    assert clearing_due(policy, state) == engine_clearing_due(policy.reduction, total, 10_000)
    # the every-call passes run inside every run: on their own they schedule nothing
    passes = policy.with_overrides({"reduction.passes.enabled": True})
    assert clearing_due(passes, state) == clearing_due(policy, state)
    assert engine_clearing_due(passes.reduction, total, 10_000)
