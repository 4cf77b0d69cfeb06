"""The order pytest-xdist starts tests in (tests/support/schedule.py): the recorded slow
tests first, longest first, within pytest-django's bands, groups kept whole, the rest in
collection order; and tests/slow_tests.txt names tests that exist."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import schedule

REPO = Path(__file__).resolve().parents[1]


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: list[str] = field(default_factory=list)
    group: str | None = None

    def get_closest_marker(self, name):
        if name == "xdist_group" and self.group:
            return pytest.mark.xdist_group(self.group).mark
        return None


def test_slow_units_go_first_in_their_band_and_the_rest_keep_their_order():
    items = [FakeItem("a::db_fast", ["db"]), FakeItem("a::db_slow", ["db"]),
             FakeItem("b::tx_fast", ["transactional_db"]), FakeItem("b::tx_slow", ["transactional_db"]),
             FakeItem("c::g1", ["transactional_db"], group="drills"), FakeItem("c::plain_1"),
             FakeItem("c::g2", ["transactional_db"], group="drills"), FakeItem("c::plain_slow"),
             FakeItem("c::plain_2")]
    seconds = {"a::db_slow": 30.0, "b::tx_slow": 20.0, "c::g1": 15.0, "c::g2": 15.0, "c::plain_slow": 40.0,
               "c::plain_2": 1.0}
    ordered = [i.nodeid for i in schedule.slowest_first(items, seconds, front_from=5.0)]
    assert ordered == ["a::db_slow", "a::db_fast",                       # band 0: using the database
                       "c::g1", "c::g2", "b::tx_slow", "b::tx_fast",     # band 1: the group's 30 s > 20 s
                       "c::plain_slow", "c::plain_1", "c::plain_2"]      # band 2: no database
    assert schedule.plain_id("t.py::test_x[a]@drills") == "t.py::test_x[a]"


def test_every_test_the_file_names_exists():
    """A renamed or removed test would silently lose its place at the front."""
    listed = schedule.recorded()
    assert len(listed) > 20
    for nodeid in listed:
        path, _, name = nodeid.partition("::")
        function = name.split("[", 1)[0]
        assert (REPO / path).exists() and f"def {function}(" in (REPO / path).read_text(encoding="utf-8") \
            or f'__name__ = f"{function.rstrip("0123456789")}' in (REPO / path).read_text(encoding="utf-8"), \
            f"tests/slow_tests.txt names {nodeid}, which no longer exists (scripts/slow_tests.py rewrites it)"
