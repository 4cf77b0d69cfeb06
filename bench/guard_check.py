"""Overflow, thrash and integrity of every preset over a directory of recorded sessions.

    PYTHONPATH=. python bench/guard_check.py /work/shared/corpus [--windows 8000,32000] [--presets a,b]

Replays each session through each preset at each window (offline summarizer, no
counterfactual run) and prints one row per preset and window: sessions, model calls,
compactions, over-window calls (and how many of them are single oversized messages the
guard cannot shrink), thrash, sessions with broken tool pairs and sessions whose archive
does not replay byte-exact.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from compaction.messages import load_session_file
from compaction.presets import get_preset, preset_names
from compaction.simulate import run_simulation


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--windows", default="8000,32000")
    ap.add_argument("--presets", default=",".join(preset_names()))
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    args = ap.parse_args(argv)
    sessions = []
    for path in sorted(Path(args.corpus).glob("*.json")):
        sid, messages, tools = load_session_file(json.loads(path.read_text(encoding="utf-8")), source=str(path))
        sessions.append((sid or path.stem, messages, tools))
    header = (f"{'preset':<26} {'window':>6} {'calls':>6} {'compact':>7} {'over':>5} {'oversized':>9} "
              f"{'thrash':>6} {'pairs_bad':>9} {'not_exact':>9} {'secs':>6}")
    if not args.json:
        print(header)
    for name in args.presets.split(","):
        for window in (int(w) for w in args.windows.split(",")):
            policy = get_preset(name).with_overrides({"context_window": window})
            row = {"preset": name, "window": window, "calls": 0, "compactions": 0, "over": 0, "oversized": 0,
                   "thrash": 0, "pairs_bad": 0, "not_exact": 0}
            started = time.perf_counter()
            for sid, messages, tools in sessions:
                rep = run_simulation(messages, policy, tools=tools, session_id=sid).to_dict()
                row["calls"] += rep["model_calls"]
                row["compactions"] += len(rep["compactions"])
                row["over"] += rep["overflow_calls"]
                row["oversized"] += rep.get("oversized_calls", 0)
                row["thrash"] += rep.get("thrash", 0)
                row["pairs_bad"] += 0 if rep["integrity"]["tool_pairs_ok"] else 1
                row["not_exact"] += 0 if rep["integrity"]["replay_exact"] else 1
            row["secs"] = round(time.perf_counter() - started, 1)
            if args.json:
                print(json.dumps(row))
            else:
                print(f"{name:<26} {window:>6} {row['calls']:>6} {row['compactions']:>7} {row['over']:>5} "
                      f"{row['oversized']:>9} {row['thrash']:>6} {row['pairs_bad']:>9} {row['not_exact']:>9} "
                      f"{row['secs']:>6}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
