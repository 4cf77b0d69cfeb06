"""Triggers: every kind, composed with any/all, each evaluation says what fired and why."""
import random

import pytest

from compaction import CompactionSession
from compaction.conditions import LEAF_CONDITIONS, kind_of
from compaction.errors import PolicyError
from compaction.policy import Policy
from compaction.triggers import TriggerState, compile_condition, evaluate


def state(**kw):
    base = dict(context_tokens=1000, messages=10, tokens_since_summary=500, messages_since_summary=5,
                last_message_at=100.0, window=10_000, reserved_output_tokens=0, now=160.0)
    base.update(kw)
    return TriggerState(**base)


def cond(data):
    return Policy.load({"trigger": data}).trigger


@pytest.mark.parametrize("data, fires_at, quiet_at", [
    ({"kind": "tokens", "threshold": 900}, {}, {"context_tokens": 900}),
    ({"kind": "window_fraction", "fraction": 0.09}, {}, {"context_tokens": 899}),
    ({"kind": "messages", "threshold": 9}, {}, {"messages": 9}),
    ({"kind": "tokens_since_summary", "threshold": 400}, {}, {"tokens_since_summary": 400}),
    ({"kind": "window_fraction_since_summary", "fraction": 0.04}, {}, {"tokens_since_summary": 400}),
    ({"kind": "messages_since_summary", "threshold": 4}, {}, {"messages_since_summary": 4}),
    ({"kind": "idle_seconds", "seconds": 30}, {}, {"now": 120.0}),
])
def test_each_condition_fires_above_its_threshold_only(data, fires_at, quiet_at):
    c = cond(data)
    assert evaluate(c, state(**fires_at)).fired
    assert not evaluate(c, state(**quiet_at)).fired


def test_reserved_output_tokens_shrink_the_usable_window():
    c = cond({"kind": "window_fraction", "fraction": 0.5})
    assert not evaluate(c, state(context_tokens=4000)).fired
    assert evaluate(c, state(context_tokens=4000, reserved_output_tokens=4096)).fired


def test_nested_any_all_and_the_reason_names_what_fired_with_values():
    c = cond({"kind": "any", "conditions": [
        {"kind": "all", "conditions": [{"kind": "tokens", "threshold": 5000}, {"kind": "messages", "threshold": 5}]},
        {"kind": "messages_since_summary", "threshold": 3},
    ]})
    r = evaluate(c, state())
    assert r.fired
    assert r.reason == "messages_since_summary 5 > 3"
    assert r.to_dict()["children"][0]["fired"] is False
    quiet = evaluate(c, state(messages_since_summary=1))
    assert not quiet.fired and quiet.reason.startswith("not triggered:")
    assert "tokens 1000 > 5000 not met" in quiet.reason


def test_idle_never_fires_without_a_last_message_time():
    assert not evaluate(cond({"kind": "idle_seconds", "seconds": 1}), state(last_message_at=None)).fired


def test_invalid_trigger_is_rejected_naming_the_field():
    with pytest.raises(PolicyError) as err:
        Policy.load({"trigger": {"kind": "tokens", "threshold": -5}})
    assert "trigger" in err.value.field and "threshold" in err.value.field
    with pytest.raises(PolicyError, match="trigger"):
        Policy.load({"trigger": {"kind": "sometimes"}})


def _random_leaves(rng):
    return [
        lambda: {"kind": "tokens", "threshold": rng.randint(1, 5000)},
        lambda: {"kind": "window_fraction", "fraction": round(rng.uniform(0.01, 1.0), 3)},
        lambda: {"kind": "messages", "threshold": rng.randint(1, 50)},
        lambda: {"kind": "tokens_since_summary", "threshold": rng.randint(1, 5000)},
        lambda: {"kind": "window_fraction_since_summary", "fraction": round(rng.uniform(0.01, 1.0), 3)},
        lambda: {"kind": "messages_since_summary", "threshold": rng.randint(1, 50)},
        lambda: {"kind": "idle_seconds", "seconds": rng.randint(1, 100)},
    ]


def _random_condition(rng, depth=0):
    leaves = _random_leaves(rng)
    if depth < 3 and rng.random() < 0.4:
        return {"kind": rng.choice(["any", "all"]),
                "conditions": [_random_condition(rng, depth + 1) for _ in range(rng.randint(1, 4))]}
    return rng.choice(leaves)()


def test_the_random_trees_use_every_leaf_kind():
    kinds = {make()["kind"] for make in _random_leaves(random.Random(0))}
    assert kinds == {kind_of(c) for c in LEAF_CONDITIONS}


def test_the_compiled_fast_check_agrees_with_the_explained_evaluation():
    rng = random.Random(7)
    for _ in range(400):
        c = cond(_random_condition(rng))
        window, reserved = rng.choice([8000, 32000, 200_000]), rng.choice([0, 4096])
        fast = compile_condition(c, window, reserved)
        for _ in range(10):
            s = state(context_tokens=rng.randint(0, 9000), messages=rng.randint(0, 80),
                      tokens_since_summary=rng.randint(0, 9000), messages_since_summary=rng.randint(0, 80),
                      last_message_at=rng.choice([None, 100.0]), now=rng.choice([105.0, 250.0]),
                      window=window, reserved_output_tokens=reserved)
            expected = evaluate(c, s).fired
            got = fast(s.context_tokens, s.messages, s.tokens_since_summary, s.messages_since_summary,
                       s.last_message_at, s.now)
            assert got == expected


def test_should_compact_is_truthy_when_fired_and_explains_itself():
    s = CompactionSession(Policy.load({"trigger": {"kind": "messages", "threshold": 2}, "counter": "approx"}))
    s.append({"role": "user", "content": "a"})
    assert not s.should_compact()
    s.append({"role": "assistant", "content": "b"})
    s.append({"role": "user", "content": "c"})
    check = s.should_compact()
    assert check and check.reason == "messages 3 > 2"
    assert check.to_dict()["value"] == 3
