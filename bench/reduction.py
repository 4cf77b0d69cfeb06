"""Benchmark of tool-output reduction. Prints figures; asserts nothing.

What it measures, with a cold token cache each time (a fresh counter):
1. time against session size: the largest corpus sessions, concatenated 1, 2, 4 and 8
   times (call ids renamed so nothing is cached), run as a session would run them:
   ``on_append`` for every tool result, then one ``before_call`` (clearing and passes);
   the ms-per-MB column should stay flat if time is linear in size;
2. peak memory (tracemalloc, Python allocations made by the reduction itself, the input
   excluded) against the session's JSON size; the target is at most 3x;
3. a synthetic session with one 10 MB tool output: truncation on arrival, clearing of the
   same output with truncation off, and recovery of slices of it.

    .venv/bin/python bench/reduction.py            # everything
    .venv/bin/python bench/reduction.py --quick    # scales 1 and 2 only, 3 sessions
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compaction import archive_tools  # noqa: E402
from compaction.archive import MemoryArchive  # noqa: E402
from compaction.messages import Message, load_session_file, wrap_originals  # noqa: E402
from compaction.reduction import measure  # noqa: E402
from compaction.reduction.config import ReductionPolicy  # noqa: E402
from compaction.reduction.pipeline import before_call, on_append  # noqa: E402
from compaction.tokens import MessageCounter, TiktokenCounter  # noqa: E402

CORPUS = Path(os.environ.get("CORPUS_DIR", ROOT.parent / "shared" / "corpus"))
SESSION = "bench"

CLEARING = ReductionPolicy.model_validate({
    "enabled": True,
    "truncation": {"max_chars": 2000, "image_max_chars": 100_000},
    "clearing": {"trigger_tokens": 1000, "trigger_fraction": None, "keep": 3, "clear_tool_inputs": True},
})
PASSES = ReductionPolicy.model_validate({
    "enabled": True, "truncation": {"enabled": False}, "clearing": {"enabled": False},
    "passes": {"enabled": True, "recent_unit": "rounds", "keep_recent_requests": 2,
               "historical_max_tokens": 300, "oversized_max_tokens": 1500},
})


def fresh_counter() -> MessageCounter:
    # A new tiktoken wrapper and cache, and no remembered counts of large texts: nothing
    # counted before is reused.
    measure._BIG_MEMO.clear()
    return MessageCounter(TiktokenCounter("o200k_base"))


def scaled(raws: list[dict], times: int) -> list[dict]:
    """The session repeated ``times`` times, call ids made unique per copy."""
    out: list[dict] = []
    for k in range(times):
        for raw in raws:
            if k and raw.get("role") == "system":
                continue
            r = dict(raw)
            if r.get("tool_calls"):
                r["tool_calls"] = [dict(c, id=f"{c['id']}~{k}") for c in r["tool_calls"]]
            if r.get("tool_call_id"):
                r["tool_call_id"] = f"{r['tool_call_id']}~{k}"
            out.append(r)
    return out


def run_session(raws: list[dict], policy: ReductionPolicy, counter: MessageCounter) -> dict:
    """Arrival for every message, then one before-call reduction; entries written to memory."""
    archive = MemoryArchive()
    live: list[Message] = []
    names: dict[str, str] = {}
    tokens = saved = 0
    for m in wrap_originals(raws):
        for c in m.tool_calls:
            names[c["id"]] = c["function"]["name"]
        if m.role == "tool":
            r = on_append(m, policy=policy, counter=counter, session_id=SESSION, tool_name=names.get(m.tool_call_id))
            for e in r.entries:
                archive.write(e)
            saved += r.tokens_truncated
            m = r.messages[0]
        tokens += counter.count(m).total
        live.append(m)
    r = before_call(live, policy=policy, counter=counter, window=128_000, session_id=SESSION, total_tokens=tokens)
    for e in r.entries:
        archive.write(e)
    final = r.messages if not r.abandoned else live
    return {"reduced": sum(1 for m in final if m.reduction), "saved": saved + r.tokens_cleared + r.tokens_truncated,
            "entries": len(archive.entries(SESSION))}


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def peak_of(fn, *args) -> tuple[int, object]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn(*args)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak, out


def json_size(raws) -> int:
    return len(json.dumps(raws, ensure_ascii=False).encode("utf-8"))


def mb(n: float) -> str:
    return f"{n / 1e6:8.2f}"


def bench_corpus(names: list[str], scales: list[int]) -> None:
    print("\n1-2. Corpus sessions scaled by concatenation (cold token cache each run)")
    print(f"{'session':44} {'mode':8} {'x':>2} {'msgs':>6} {'JSON MB':>8} {'time s':>7} {'ms/MB':>7} "
          f"{'peak MB':>8} {'peak/JSON':>9} {'reduced':>7} {'tokens saved':>12}")
    for name in names:
        _, raws, _ = load_session_file(json.loads((CORPUS / name).read_text(encoding="utf-8")), name)
        for mode, policy in (("clearing", CLEARING), ("passes", PASSES)):
            for k in scales:
                session = scaled(raws, k)
                size = json_size(session)
                secs, info = timed(run_session, session, policy, fresh_counter())
                peak, _ = peak_of(run_session, session, policy, fresh_counter())
                print(f"{name[:44]:44} {mode:8} {k:>2} {len(session):>6} {mb(size)} {secs:7.3f} "
                      f"{secs * 1e3 / (size / 1e6):7.0f} {mb(peak)} {peak / size:9.2f} {info['reduced']:>7} "
                      f"{info['saved']:>12,}")


def ten_mb_text(n: int = 10 * 1024 * 1024) -> str:
    rng = random.Random(3)
    words = ["INFO", "WARN", "GET", "POST", "/api/v1/orders", "200", "500", "latency_ms=", "user=", "trace="]
    pool = [" ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(9)) for _ in range(4096)]
    return "".join(f"{i:08d} {pool[i % 4093]}\n" for i in range(n // 50))[:n]


def bench_ten_mb() -> None:
    print("\n3. Synthetic session with one 10 MB tool output")
    big = ten_mb_text()
    raws = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Why is the build slow?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "big", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat build.log"}'}}]},
            {"role": "tool", "tool_call_id": "big", "content": big}]
    for i in range(5):
        raws += [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"s{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"cmd": "ls {i}"}}'}}]},
                 {"role": "tool", "tool_call_id": f"s{i}", "content": f"file_{i}.py\n" * 20}]
    size = json_size(raws)
    msgs = wrap_originals(raws)

    def arrival():
        return on_append(msgs[3], policy=CLEARING, counter=fresh_counter(), session_id=SESSION, tool_name="bash")

    secs, r = timed(arrival)
    peak, _ = peak_of(arrival)
    ev = r.events[0]
    print(f"  session JSON {mb(size).strip()} MB; output {len(big):,} chars, {ev['tokens_before']:,} tokens")
    print(f"  truncation on arrival : {secs:6.2f} s, peak {mb(peak).strip()} MB = {peak / size:.2f}x JSON; "
          f"kept {len(r.messages[0].raw['content']):,} chars ({ev['tokens_after']:,} tokens)")

    clear_only = CLEARING.model_copy(update={"truncation": CLEARING.truncation.model_copy(update={"enabled": False})})

    def clearing():
        return before_call(msgs, policy=clear_only, counter=fresh_counter(), window=128_000, session_id=SESSION,
                           total_tokens=3_000_000)

    secs, rc = timed(clearing)
    peak, _ = peak_of(clearing)
    print(f"  clearing before a call: {secs:6.2f} s, peak {mb(peak).strip()} MB = {peak / size:.2f}x JSON; "
          f"{rc.tokens_cleared:,} tokens cleared")

    archive = MemoryArchive()
    for e in r.entries:
        archive.write(e)
    t = time.perf_counter()
    got, offset, n = [], 0, 0
    while offset is not None:
        piece = archive_tools.load(archive, SESSION, "big", offset, 1_000_000)
        got.append(piece["content"])
        offset = piece["next_offset"]
        n += 1
    secs = time.perf_counter() - t
    exact = "".join(got) == big
    print(f"  recovery in {n} slices of 1 MB: {secs:6.2f} s, exact: {exact}")
    t = time.perf_counter()
    hits = archive_tools.search(archive, SESSION, "latency_ms=500 trace=42", 3)
    print(f"  search over the 10 MB archive (first, cold index): {time.perf_counter() - t:6.2f} s, {len(hits)} hits")
    t = time.perf_counter()
    archive_tools.search(archive, SESSION, "POST /api/v1/orders", 3)
    print(f"  search again (index cached): {time.perf_counter() - t:6.2f} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="scales 1 and 2 only")
    ap.add_argument("--sessions", type=int, default=3, help="how many of the largest corpus sessions")
    args = ap.parse_args(argv)
    files = sorted(CORPUS.glob("*.json"), key=lambda p: p.stat().st_size, reverse=True)[: args.sessions]
    print(f"python {sys.version.split()[0]}, corpus {CORPUS}")
    bench_corpus([p.name for p in files], [1, 2] if args.quick else [1, 2, 4, 8])
    bench_ten_mb()


if __name__ == "__main__":
    main()
