"""Rewrite tests/slow_tests.txt (the order pytest-xdist starts tests in; tests/support/schedule.py)
from the ``--durations=0`` output of a pytest run.

    .venv/bin/python -m pytest -n 2 --dist loadgroup --durations=0 tests | tee run.log
    .venv/bin/python scripts/slow_tests.py run.log

Setup, call and teardown of a test add up; only tests of at least --min seconds are kept,
slowest first. Seconds from a loaded machine are fine: only their order matters."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")
HEADER = """\
# Tests that take seconds, with their seconds (setup + call + teardown) in a recorded run:
# under pytest-xdist they start first, longest first (tests/support/schedule.py). Only the
# order of the run depends on this file; a test missing here counts as fast. Rewritten by
# scripts/slow_tests.py from a run's --durations=0 output.
"""


def parse(text: str) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for line in text.splitlines():
        found = LINE.match(line)
        if found:
            # without the "@<group>" that --dist loadgroup appends to a grouped test's id
            head, sep, last = found.group(3).rpartition("::")
            nodeid = head + sep + last.split("@", 1)[0]
            seconds[nodeid] = seconds.get(nodeid, 0.0) + float(found.group(1))
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="pytest output with --durations=0")
    ap.add_argument("--min", type=float, default=2.0, help="keep tests of at least this many seconds")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "slow_tests.txt")
    args = ap.parse_args(argv)
    seconds = parse(args.log.read_text(encoding="utf-8", errors="replace"))
    if not seconds:
        print(f"{args.log}: no --durations lines found", file=sys.stderr)
        return 1
    kept = sorted(((s, n) for n, s in seconds.items() if s >= args.min), key=lambda x: (-x[0], x[1]))
    args.out.write_text(HEADER + "".join(f"{s:8.1f} {n}\n" for s, n in kept), encoding="utf-8")
    print(f"{args.out}: {len(kept)} tests of {len(seconds)} at >= {args.min} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
