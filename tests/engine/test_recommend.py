"""The recommended setting of a threshold sweep: the rule, its tie-breaks and its sentence."""
import pytest

from compaction.figures import ReplayFigures
from compaction.recommend import SweepPoint, recommend


def point(value, cost, kept, needed=1000, overflow=0, tokens=None):
    return SweepPoint(value, ReplayFigures(tokens_sent=tokens if tokens is not None else int(cost * 1e6),
                                           cost_usd=cost, needed=needed, kept=kept, overflow_calls=overflow))


SWEEP = [point(0.2, 0.50, 900), point(0.42, 0.70, 997), point(0.6, 0.85, 998), point(0.8, 1.00, 998),
         point(0.95, 0.40, 999, overflow=3)]


def test_the_cheapest_setting_that_keeps_the_target_recall_and_never_overflows_is_chosen():
    rec = recommend(SWEEP, kind="window_fraction", current=0.8)
    # 0.2 is cheaper but misses 98 %; 0.95 is cheapest but sends calls over the window
    assert rec.choice.value == 0.42 and rec.current.value == 0.8
    assert rec.saving == pytest.approx(0.30)
    assert rec.sentence == ("Lowest input cost with needed-context recall ≥ 98% and no over-window call: "
                            "trigger 42%, 30% cheaper than now, recall 99.7% against 99.8%")


def test_the_target_is_a_parameter():
    assert recommend(SWEEP, kind="window_fraction", current=0.8, target=0.9).choice.value == 0.2
    assert recommend(SWEEP, kind="window_fraction", current=0.8, target=0.998).choice.value == 0.6


def test_ties_go_to_higher_recall_then_to_the_higher_trigger():
    tied = [point(4000, 0.5, 990), point(6000, 0.5, 995), point(8000, 0.5, 995)]
    assert recommend(tied, kind="tokens", current=None).choice.value == 8000


def test_without_a_price_for_every_setting_tokens_sent_decide():
    points = [point(0.3, 0.2, 999, tokens=500), SweepPoint(0.5, ReplayFigures(tokens_sent=400, cost_usd=None,
                                                                             needed=10, kept=10))]
    rec = recommend(points, kind="window_fraction", current=0.3)
    assert rec.measure == "tokens" and rec.choice.value == 0.5
    assert rec.sentence.startswith("Lowest tokens sent with") and "20% fewer tokens than now" in rec.sentence


def test_the_current_setting_can_be_the_answer_and_no_answer_is_said_as_such():
    rec = recommend(SWEEP, kind="window_fraction", current=0.42)
    assert rec.is_current and "trigger 42%, the current setting, recall 99.7%" in rec.sentence
    none = recommend(SWEEP[:1], kind="tokens", current=None)
    assert none.choice is None and none.sentence.startswith("No setting meets the rule")


def test_a_setting_that_needed_nothing_meets_any_target_and_a_bad_target_is_refused():
    quiet = [point(2000, 0.3, 0, needed=0), point(4000, 0.2, 0, needed=0)]
    rec = recommend(quiet, kind="tokens", current=2000)
    assert rec.choice.value == 4000 and "trigger 4,000 tokens, 33% cheaper than now, recall – against –" in rec.sentence
    with pytest.raises(ValueError, match="recall target must be between 0 and 1"):
        recommend(quiet, kind="tokens", current=None, target=98)
