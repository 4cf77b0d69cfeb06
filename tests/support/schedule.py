"""The order in which pytest-xdist hands tests out: the slowest first.

xdist gives each worker the next test as it finishes one, in collection order; a test of
minutes collected late runs alone at the end while the other worker is idle. So the tests
that ``tests/slow_tests.txt`` lists as slow (seconds of a recorded run, with setup and
teardown) are moved to the front, longest first, and the rest keep their collection order
(tests of a module stay together, so module fixtures are not set up again and again). A
``xdist_group`` counts as one unit: its tests stay together and their seconds add up.

pytest-django's order is kept: tests using the database in transactions first, then the
transactional ones (which flush it), then the rest; the slow ones move to the front of their
own band. Only the order changes, never the selection, and only in xdist's worker processes
(every worker must collect the same order; a plain ``pytest`` keeps the files' order). A
test missing from the file counts as fast. ``scripts/slow_tests.py`` rewrites the file from
the ``--durations=0`` output of a run."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

SLOW_TESTS = Path(__file__).resolve().parents[1] / "slow_tests.txt"
# a unit at least this long (seconds) is started before the rest
FRONT_FROM = 5.0


def plain_id(nodeid: str) -> str:
    """The node id without the ``@<group>`` that ``--dist loadgroup`` appends to it."""
    head, sep, last = nodeid.rpartition("::")
    return head + sep + last.split("@", 1)[0]


def recorded(path: Path = SLOW_TESTS) -> dict[str, float]:
    """node id -> seconds; lines are ``<seconds> <node id>``, ``#`` starts a comment."""
    out: dict[str, float] = {}
    if not path.exists():
        return out
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        seconds, nodeid = line.split(None, 1)
        key = plain_id(nodeid.strip())
        out[key] = out.get(key, 0.0) + float(seconds)
    return out


def unit_of(item: pytest.Item) -> str:
    """What xdist's ``--dist loadgroup`` schedules as one: the group, or the test itself."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return item.nodeid


def django_band(item: pytest.Item) -> int:
    """pytest-django's rank of a test (``pytest_collection_modifyitems``): 0 uses the
    database in a transaction, 1 is transactional, 2 uses no database fixture."""
    marker = item.get_closest_marker("django_db")
    transactional = bool(marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")))
    fixtures = getattr(item, "fixturenames", [])
    if transactional or "transactional_db" in fixtures:
        return 1
    return 0 if marker is not None or "db" in fixtures else 2


def slowest_first(items: Sequence[pytest.Item], seconds: dict[str, float],
                  front_from: float = FRONT_FROM) -> list[pytest.Item]:
    """``items`` in their bands (``django_band`` of a unit's first test), in each band the
    units of at least ``front_from`` seconds first (longest first, ties in collection order),
    then every other test in its collection order."""
    per_unit: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    band: dict[str, int] = {}
    for i, item in enumerate(items):
        unit = unit_of(item)
        per_unit[unit] = per_unit.get(unit, 0.0) + seconds.get(plain_id(item.nodeid), 0.0)
        if unit not in first_seen:
            first_seen[unit] = i
            band[unit] = django_band(item)

    def key(item: pytest.Item) -> tuple[int, int, float, int]:
        unit = unit_of(item)
        if per_unit[unit] >= front_from:
            return band[unit], 0, -per_unit[unit], first_seen[unit]
        return band[unit], 1, 0.0, first_seen[unit]

    return sorted(items, key=key)
