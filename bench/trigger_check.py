"""Cost of the trigger check after one appended message, at 1k, 10k and 100k messages.

    .venv/bin/python bench/trigger_check.py [--sizes 1000,10000,100000] [--checks 2000]

For each size a session of N messages is built (user / assistant-with-tool-call / tool
result rounds, texts taken from the corpus), then repeatedly: one message is appended
and the trigger is checked; only the check is timed. The check is
``CompactionSession.should_compact()``. The session is rebuilt every N/10 checks so it stays near N
messages; the median check time is reported. Output, one line per size:

    n=<N> per_check_us=<float>

When ``langchain`` is importable, its SummarizationMiddleware check runs side by side on
the same messages (``before_model`` with a trigger that never fires: message ids,
``count_tokens_approximately`` over the whole list, then the threshold test):

    langchain n=<N> per_check_us=<float> ratio=<langchain/ours>

langchain is not a project dependency; to compare, install it in a separate environment
(see bench/README.md). Prints figures only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compaction.policy import Policy  # noqa: E402
from compaction.session import CompactionSession  # noqa: E402

# Reference times of LangChain's check (SummarizationMiddleware.before_model at 1k / 10k /
# 100k messages), measured once with LangChain installed; printed when it is absent here.
LANGCHAIN_REFERENCE_US = {1_000: 3_000.0, 10_000: 29_800.0, 100_000: 296_000.0}


# -- synthetic sessions ---------------------------------------------------------------------

def corpus_texts(corpus: Path, limit: int = 2000, max_chars: int = 600) -> list[str]:
    texts: list[str] = []
    for path in sorted(corpus.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for m in data.get("messages", []):
            if isinstance(m.get("content"), str) and m["content"].strip():
                texts.append(m["content"][:max_chars])
            if len(texts) >= limit:
                return texts
    return texts or [f"message text number {i} with /some/path_{i}.py" for i in range(200)]


class Rounds:
    """Endless valid OpenAI messages: user, assistant with a tool call, tool result, ..."""

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        i = self.i
        self.i += 1
        text = self.texts[i % len(self.texts)]
        step = i % 3
        call_id = f"call_{i // 3}"
        if step == 0:
            return {"role": "user", "content": text}
        if step == 1:
            return {"role": "assistant", "content": text[:120],
                    "tool_calls": [{"id": call_id, "type": "function",
                                    "function": {"name": "run", "arguments": json.dumps({"cmd": text[:60]})}}]}
        return {"role": "tool", "tool_call_id": call_id, "content": text}


def next_round_start(gen: Rounds) -> None:
    """Advance to a user turn so appends never leave a tool call unanswered mid-check."""
    while gen.i % 3:
        next(gen)


# -- ours -------------------------------------------------------------------------------------

def bench_policy() -> Policy:
    # A trigger tree like a real policy (window fraction or tokens or messages since the last
    # summary); the window is set so large that it never fires during the bench.
    return Policy.load({"name": "bench", "model": "gpt-4o", "context_window": 10**9, "trigger": {"kind": "any", "conditions": [
        {"kind": "window_fraction", "fraction": 0.8},
        {"kind": "tokens_since_summary", "threshold": 50_000_000},
        {"kind": "messages", "threshold": 10_000_000}]}})


def make_checker(policy: Policy):
    """(label, append(raw), check(), bulk_load(raws), length())."""
    session = CompactionSession(policy, session_id="bench")
    return ("CompactionSession.should_compact", session.append, session.should_compact,
            session.live.extend, lambda: len(session.live))


def time_ours(n: int, checks: int, texts: list[str], policy: Policy) -> tuple[list[float], str, list[dict]]:
    """Per-check seconds. A session grows by one message per check, so it is rebuilt every
    n/10 checks to stay near size n."""
    per_build = max(1, min(checks, n // 10))
    samples: list[float] = []
    label = ""
    raws: list[dict] = []
    while len(samples) < checks:
        label, append, check, bulk, length = make_checker(policy)
        gen = Rounds(texts)
        raws = [next(gen) for _ in range(n)]
        bulk(raws)
        next_round_start(gen)
        check()  # warm-up
        for _ in range(per_build):
            raw = next(gen)
            append(raw)
            raws.append(raw)
            t0 = time.perf_counter()
            result = check()
            samples.append(time.perf_counter() - t0)
            assert not result.fired, "the bench trigger must not fire"
        label = f"{label} n_final={length()}"
    return samples, label, raws


# -- langchain ------------------------------------------------------------------------------------

def to_langchain(raws: list[dict]):
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: PLC0415  (optional, not a dependency)

    out = []
    for r in raws:
        if r["role"] == "user":
            out.append(HumanMessage(content=r["content"]))
        elif r["role"] == "assistant":
            calls = [{"id": c["id"], "name": c["function"]["name"], "args": json.loads(c["function"]["arguments"])}
                     for c in r.get("tool_calls") or []]
            out.append(AIMessage(content=r["content"] or "", tool_calls=calls))
        else:
            out.append(ToolMessage(content=r["content"], tool_call_id=r["tool_call_id"]))
    return out


def time_langchain(raws: list[dict], n: int) -> float:
    from langchain.agents.middleware import SummarizationMiddleware  # noqa: PLC0415  (optional, not a dependency)
    from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: PLC0415  (optional)

    model = FakeListChatModel(responses=["summary"])
    middleware = SummarizationMiddleware(model=model, trigger=("tokens", 10**12))
    messages = to_langchain(raws[:n])
    more = to_langchain(raws[n:])
    reps = max(3, min(200, 300_000 // max(n, 1), n // 10))
    samples = []
    for i in range(reps):
        messages.append(more[i % len(more)] if more else messages[-1])
        t0 = time.perf_counter()
        result = middleware.before_model({"messages": messages}, None)
        samples.append(time.perf_counter() - t0)
        assert result is None, "the langchain trigger must not fire"
    return statistics.median(samples) * 1e6  # median, like ours


# -- main -----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--checks", type=int, default=2000, help="appends+checks timed per size")
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--no-langchain", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    # Machine-speed calibration: the cost of an empty Python call (about 30-50 ns on an idle
    # modern core); figures below scale with it on a busy or slow machine.
    noop = timeit.timeit(lambda: None, number=200_000) / 200_000 * 1e9
    print(f"# calibration: empty python call {noop:.0f} ns")
    texts = corpus_texts(args.corpus)
    policy = bench_policy()

    try:
        if args.no_langchain:
            raise ImportError("disabled by --no-langchain")
        import langchain  # noqa: F401, PLC0415  (optional, not a dependency)
        from langchain.agents.middleware import SummarizationMiddleware  # noqa: F401, PLC0415  (optional)
        have_langchain = True
    except ImportError as exc:
        have_langchain = False
        print(f"# langchain skipped ({exc}); reference check times: "
              + ", ".join(f"n={k} {v / 1000:g} ms" for k, v in LANGCHAIN_REFERENCE_US.items()))

    ours_by_n: dict[int, float] = {}
    for n in sizes:
        samples, label, raws = time_ours(n, args.checks, texts, policy)
        per_check = statistics.median(samples) * 1e6
        ours_by_n[n] = per_check
        print(f"n={n} per_check_us={per_check:.3f}")
        print(f"# {label} checks={len(samples)} (median; mean={statistics.mean(samples) * 1e6:.3f} us)")
        if have_langchain:
            lc = time_langchain(raws, n)
            print(f"langchain n={n} per_check_us={lc:.1f} ratio={lc / per_check:.0f}")
        elif n in LANGCHAIN_REFERENCE_US:
            print(f"# reference langchain n={n} per_check_us={LANGCHAIN_REFERENCE_US[n]:.0f} "
                  f"ratio={LANGCHAIN_REFERENCE_US[n] / per_check:.0f}")
    if len(ours_by_n) > 1:
        lo, hi = min(ours_by_n), max(ours_by_n)
        print(f"# flatness: per_check(n={hi}) / per_check(n={lo}) = {ours_by_n[hi] / ours_by_n[lo]:.2f} (goal <= 2)")


if __name__ == "__main__":
    main()
