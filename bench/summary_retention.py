"""Identifier retention and compression of the summaries a replay writes, over a corpus.

Every session of the corpus is replayed through a preset (offline extractive summarizer
unless ``--model`` names another) as an agent loop would live it; each compaction that
wrote a summary contributes its retention score (:func:`compaction.retention.retention`,
referenced identifiers of the evicted span still present in the new context) and its
compression (span tokens / summary tokens). ``--dump DIR`` writes every summary text to
``DIR/<session>.md`` to read them side by side.

    .venv/bin/python bench/summary_retention.py [--corpus ../shared/corpus] [--preset default]
        [--context-window 32000] [--dump DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from compaction.messages import load_session_file
from compaction.outcome import Outcome
from compaction.presets import get_preset
from compaction.session import CompactionSession


def replay_summaries(messages: list[dict[str, Any]], policy: Any, session_id: str) -> list[Outcome]:
    """The outcomes of the compactions that wrote a summary, in the order they fired."""
    session = CompactionSession(policy, session_id=session_id)
    found: list[Outcome] = []
    for raw in messages:
        if raw.get("role") == "assistant":
            out = session.before_model_call()
            if isinstance(out, Outcome) and out.summarized:
                found.append(out)
        session.append(raw)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="../shared/corpus")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--context-window", type=int, default=32000)
    ap.add_argument("--model", help="summarizer model (default: the preset's, offline extractive when unset)")
    ap.add_argument("--dump", help="write the summaries of each session to DIR/<session>.md")
    args = ap.parse_args()
    overrides: dict[str, Any] = {"context_window": args.context_window}
    if args.model:
        overrides["summarizer.model"] = args.model
    policy = get_preset(args.preset).with_overrides(overrides)
    dump = Path(args.dump) if args.dump else None
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
    scores: list[float] = []
    ratios: list[float] = []
    at_5x: list[float] = []
    print(f"# corpus={args.corpus} preset={args.preset} window={args.context_window}")
    for path in sorted(Path(args.corpus).glob("*.json")):
        sid, messages, _tools = load_session_file(json.loads(path.read_text(encoding="utf-8")), source=str(path))
        outcomes = replay_summaries(messages, policy, sid or path.stem)
        mine = [((o.retention or {}).get("referenced") or {}).get("score") for o in outcomes]
        for o, score in zip(outcomes, mine, strict=True):
            if score is None or o.compression is None:
                continue
            scores.append(score)
            ratios.append(o.compression)
            if o.compression >= 5:
                at_5x.append(score)
        if outcomes:
            shown = " ".join(f"{s:.2f}@{o.compression}x" for s, o in zip(mine, outcomes, strict=True) if s is not None)
            print(f"{path.stem[:60]:60} summaries={len(outcomes)} {shown}")
        if dump and outcomes:
            text = "\n\n---\n\n".join(o.summary or "" for o in outcomes)
            (dump / f"{path.stem}.md").write_text(text, encoding="utf-8")
    if not scores:
        print("no summaries written")
        return 1
    print(f"summaries={len(scores)} mean_retention={statistics.mean(scores):.3f} "
          f"median_compression={statistics.median(ratios):.1f}x min_compression={min(ratios):.1f}x "
          f"mean_retention_at_5x={statistics.mean(at_5x) if at_5x else float('nan'):.3f} (n={len(at_5x)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
