"""Replay speed of a continuous tuning pass: what TUNING_REPLAY_TOKENS_PER_SECOND should be.

    .venv/bin/python bench/continuous_tuning.py [--corpus ../shared/corpus] [--sessions 6] [--settings 12]

A pass replays each sampled session once per trigger setting with the tuning preview's
replay (``compaction.preview.preview_policy``, offline summarizer), and sizes its sample by
``history tokens x messages / 2 x settings / TUNING_REPLAY_TOKENS_PER_SECOND`` (the context
tokens the replays go through: every call re-reads the context so far) against
TUNING_TIME_BUDGET.
This replays the ``sessions`` smallest corpus files (by size, then name: always the same
ones) at ``settings`` window fractions from 15% to 95%, with the default preset, and prints
per session and overall the context tokens replayed per wall second (and, for comparison,
the history tokens: that rate falls as sessions grow, the context rate much less).

Output, one line per session, then the total:

    session=<file> messages=<N> history_tokens=<N> replays=<N> seconds=<float> history_tokens_per_s=<float>
        context_tokens_per_s=<float>
    total seconds=<float> history_tokens_per_s=<float> context_tokens_per_s=<float> load=<1-min load average>

Prints figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from compaction.compactor import counter_for  # noqa: E402  (after the path is set)
from compaction.formats import convert_many  # noqa: E402
from compaction.messages import Message, Provenance, original_id  # noqa: E402
from compaction.presets import get_preset  # noqa: E402
from compaction.preview import preview_policy  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared" / "corpus"))
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--settings", type=int, default=12)
    args = parser.parse_args()
    files = sorted((p for p in Path(args.corpus).glob("*.json")), key=lambda p: (p.stat().st_size, p.name))
    fractions = [round(0.15 + i * 0.8 / (args.settings - 1), 3) for i in range(args.settings)]
    total_tokens, total_context, total_seconds = 0, 0.0, 0.0
    for path in files[:args.sessions]:
        session = convert_many(path.read_text(encoding="utf-8"), source=path.name)[0]
        messages = list(session.messages)
        base = get_preset("default").with_overrides({"model": session.model} if session.model else {})
        counter = counter_for(base)
        history = sum(t.total for t in counter.count_many([Message(m, original_id(i), Provenance.ORIGINAL, i)
                                          for i, m in enumerate(messages)]))
        started = time.perf_counter()
        for fraction in fractions:
            policy = base.with_overrides({"trigger": {"kind": "window_fraction", "fraction": fraction}})
            preview_policy(messages, policy, tools=session.tools or None, fallback_model=session.model or None)
        seconds = time.perf_counter() - started
        replayed = history * len(fractions)
        context = history * max(1, len(messages)) / 2 * len(fractions)  # services.continuous_tuning.replay_tokens
        total_tokens += replayed
        total_context += context
        total_seconds += seconds
        print(f"session={path.name} messages={len(messages)} history_tokens={history} replays={len(fractions)} "
              f"seconds={seconds:.2f} history_tokens_per_s={replayed / seconds:.0f} "
              f"context_tokens_per_s={context / seconds:.0f}", flush=True)
    print(f"total seconds={total_seconds:.2f} history_tokens_per_s={total_tokens / total_seconds:.0f} "
          f"context_tokens_per_s={total_context / total_seconds:.0f} load={os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
