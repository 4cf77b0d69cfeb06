"""Token counting throughput: our MessageCounter against raw tiktoken on the corpus.

    .venv/bin/python bench/count_throughput.py [--corpus DIR] [--rounds N] [--encoding o200k_base]

Each round counts every corpus message with a fresh ``MessageCounter`` (empty cache, so
every message is hashed and tokenized) and, on the same texts, calls tiktoken's
``encode_ordinary_batch`` directly. MB is the UTF-8 size of the texts that get tokenized
(message text, tool-call names and arguments); image payloads are not text and are not
counted in MB. The best round of each side (wall clock) is reported, after a comment line
with the same figures in CPU seconds of all threads (steadier on a busy machine):

    ours_mb_s=<float> raw_mb_s=<float> ratio=<ours/raw>

Goal: ratio >= 0.9 (counting through the cache costs at most ~10% over raw tiktoken). Prints figures only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compaction.messages import Message, Provenance, original_id  # noqa: E402
from compaction.tokens import MessageCounter, _pieces, make_counter  # noqa: E402


def load_corpus(corpus: Path) -> list[dict]:
    messages: list[dict] = []
    for path in sorted(corpus.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        messages.extend(data["messages"] if isinstance(data, dict) else data)
    return messages


def texts_of(messages: list[dict]) -> list[str]:
    """Exactly the texts MessageCounter hands to the tokenizer."""
    out: list[str] = []
    for raw in messages:
        pieces, _ = _pieces(raw)
        out.extend(t for _, t in pieces)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--encoding", default="o200k_base")
    args = ap.parse_args(argv)

    raws = load_corpus(args.corpus)
    if not raws:
        sys.exit(f"no corpus sessions in {args.corpus}")
    texts = texts_of(raws)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    counter = make_counter("tiktoken", encoding=args.encoding)
    enc = counter._enc

    # warm up both paths (BPE ranks loaded, thread pool started)
    enc.encode_ordinary_batch(texts[:64])
    MessageCounter(counter).count_many([Message(r, original_id(i), Provenance.ORIGINAL, i)
                                        for i, r in enumerate(raws[:64])])

    ours_best = raw_best = ours_cpu = raw_cpu = float("inf")
    ours_tokens = raw_tokens = 0
    for _ in range(args.rounds):
        # Fresh Message objects too: their content hash is cached on the object.
        msgs = [Message(r, original_id(i), Provenance.ORIGINAL, i) for i, r in enumerate(raws)]
        mc = MessageCounter(counter)
        c0, t0 = time.process_time(), time.perf_counter()
        counted = mc.count_many(msgs)
        ours_best = min(ours_best, time.perf_counter() - t0)
        ours_cpu = min(ours_cpu, time.process_time() - c0)
        ours_tokens = sum(c.total for c in counted)

        c0, t0 = time.process_time(), time.perf_counter()
        ids = enc.encode_ordinary_batch(texts)
        raw_best = min(raw_best, time.perf_counter() - t0)
        raw_cpu = min(raw_cpu, time.process_time() - c0)
        raw_tokens = sum(len(x) for x in ids)

    ours, raw = mb / ours_best, mb / raw_best
    print(f"# corpus={args.corpus} messages={len(raws)} texts={len(texts)} text_mb={mb:.2f} "
          f"encoding={args.encoding} rounds={args.rounds}")
    print(f"# ours_tokens={ours_tokens} (framing, images, tool overheads included) raw_tokens={raw_tokens}")
    # CPU seconds (all threads) are steadier than wall time on a busy machine.
    print(f"# cpu: ours_mb_s={mb / ours_cpu:.2f} raw_mb_s={mb / raw_cpu:.2f} ratio={raw_cpu / ours_cpu:.3f}")
    print(f"ours_mb_s={ours:.2f} raw_mb_s={raw:.2f} ratio={ours / raw:.3f}")


if __name__ == "__main__":
    main()
