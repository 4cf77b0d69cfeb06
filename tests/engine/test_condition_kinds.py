"""Trigger kinds are classes: each says what it measures, its limit and its words, and every
check (explained, compiled, chart lines) is written once over them, so a new kind is one class."""
import dataclasses
import math
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from compaction import conditions as C
from compaction.policy import Policy
from compaction.triggers import TriggerState, compile_condition, evaluate, token_thresholds

WINDOW = 10_000


def base_state(**kw) -> TriggerState:
    base = dict(context_tokens=0, messages=0, tokens_since_summary=0, messages_since_summary=0,
                last_message_at=100.0, window=WINDOW, reserved_output_tokens=0, now=100.0)
    return TriggerState(**(base | kw))


def sample(cls) -> C.LeafCondition:
    """An instance of a leaf kind with a valid setting (0.5 for shares, 7 for counts)."""
    name, cast = cls.setting()
    return cls(**{name: cast(0.5) if cast is float else 7})


def state_measuring(cond: C.LeafCondition, value: int) -> TriggerState:
    """A state on which ``cond`` measures ``value``."""
    if isinstance(cond, C.AgeCondition):
        return base_state(**{cond.state_field: 100.0, "now": 100.0 + value})
    return base_state(**{cond.state_field: value})


def fast(cond, s: TriggerState) -> bool:
    check = compile_condition(cond, s.window, s.reserved_output_tokens)
    return check(s.context_tokens, s.messages, s.tokens_since_summary, s.messages_since_summary,
                 s.last_message_at, s.now)


LEAVES = pytest.mark.parametrize("cls", C.LEAF_CONDITIONS, ids=C.kind_of)


def test_every_condition_class_of_the_engine_is_in_the_union():
    def concrete(cls):
        for sub in cls.__subclasses__():
            yield from concrete(sub)
            if sub.__module__ == C.__name__ and "kind" in sub.__annotations__:
                yield sub

    declared = {*concrete(C.LeafCondition), *concrete(C.GroupCondition)}
    assert declared == set(C.CONDITION_CLASSES)
    assert C.CONDITION_KINDS == {C.kind_of(c) for c in declared}
    assert len(C.CONDITION_KINDS) == len(C.CONDITION_CLASSES)


@LEAVES
def test_every_leaf_kind_declares_what_it_reads_its_limit_and_its_words(cls):
    assert cls.state_field in C.STATE_FIELDS
    assert cls.label and cls.label.endswith("above")
    name, cast = cls.setting()
    assert name in cls.model_fields and cast in (int, float)
    cond = sample(cls)
    assert isinstance(cond.limit(WINDOW), (int, float))
    assert isinstance(cond.describe(), str) and cond.describe()
    assert isinstance(cond.measure(base_state()), (int, float))
    # the policy's JSON format: {"kind": ..., "<setting>": number}
    assert Policy.load({"trigger": cond.model_dump()}).trigger == cond
    assert list(cond.model_dump()) == ["kind", name]


@LEAVES
def test_every_leaf_kind_fires_just_above_its_limit_in_both_checks(cls):
    cond = sample(cls)
    edge = math.floor(cond.limit(base_state().usable_window))
    for value, fires in ((edge, False), (edge + 1, True)):
        s = state_measuring(cond, value)
        result = evaluate(cond, s)
        assert result.fired is fires and result.value == value and result.kind == C.kind_of(cls)
        assert fast(cond, s) is fires


@LEAVES
def test_groups_combine_every_leaf_kind_in_both_checks(cls):
    leaf = sample(cls)
    edge = math.floor(leaf.limit(WINDOW))
    never = C.TokensCondition(threshold=10**9)
    for value in (edge, edge + 1):
        s = state_measuring(leaf, value)
        fired = evaluate(leaf, s).fired
        for group, expected in ((C.AnyCondition(conditions=[never, leaf]), fired),
                                (C.AllCondition(conditions=[never, leaf]), False),
                                (C.AllCondition(conditions=[leaf, leaf]), fired)):
            assert evaluate(group, s).fired is expected
            assert fast(group, s) is expected


def test_an_age_condition_never_fires_without_its_timestamp():
    cond = C.IdleCondition(seconds=1)
    s = base_state(last_message_at=None, now=10**6)
    assert cond.measure(s) is None
    assert not evaluate(cond, s).fired and not fast(cond, s)


def test_groups_say_their_members_in_words():
    cond = C.AnyCondition(conditions=[C.TokensCondition(threshold=8000),
                                      C.AllCondition(conditions=[C.MessagesCondition(threshold=40),
                                                                 C.IdleCondition(seconds=90)])])
    assert cond.describe() == "(context > 8,000 tokens or (more than 40 messages and idle for 90 s))"


# -- a kind that is not in the engine: one class, and every check handles it -------------------

class NearlyFullCondition(C.TotalCondition):
    kind: Literal["nearly_full"] = "nearly_full"
    margin: int = Field(gt=0, description="Fire when fewer than this many tokens of the usable window are left.")

    state_field: ClassVar[C.TotalField] = "context_tokens"
    label: ClassVar[str] = "tokens short of the usable window above"

    def limit(self, usable: int) -> float:
        return usable - self.margin

    def describe(self) -> str:
        return f"fewer than {self.margin:,} tokens left"


def test_a_new_kind_is_one_class():
    cond = NearlyFullCondition(margin=1000)
    assert NearlyFullCondition.setting() == ("margin", int)
    assert token_thresholds(cond, WINDOW) == [("nearly_full", 9000)]
    for total, fires in ((9000, False), (9001, True)):
        s = base_state(context_tokens=total)
        assert evaluate(cond, s).fired is fires and fast(cond, s) is fires
        group = C.AnyCondition.model_construct(kind="any", conditions=[C.MessagesCondition(threshold=99), cond])
        assert evaluate(group, s).fired is fires and fast(group, s) is fires
    assert evaluate(cond, base_state(context_tokens=9001)).reason == "nearly_full 9001 > 9000"


def test_token_thresholds_list_every_kind_that_reads_the_context_tokens():
    tree = C.AllCondition(conditions=[sample(cls) for cls in C.LEAF_CONDITIONS])
    listed = [kind for kind, _ in token_thresholds(tree, WINDOW)]
    assert listed == [C.kind_of(c) for c in C.LEAF_CONDITIONS if c.state_field == "context_tokens"]
    assert dict(token_thresholds(tree, WINDOW, reserved=2000)) == {"tokens": 7, "window_fraction": 4000}


def test_the_state_fields_are_the_trigger_state_fields_in_order():
    names = [f.name for f in dataclasses.fields(TriggerState)]
    assert list(C.STATE_FIELDS) == names[:len(C.STATE_FIELDS)]
