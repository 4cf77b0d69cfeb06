"""Per-call overhead of the LangChain middleware, beside LangChain's SummarizationMiddleware.

    python bench/integration_overhead.py [--sizes 1000,10000] [--calls 200] [--langchain-max 10000]

An agent state of N LangChain messages (user / assistant-with-tool-call / tool result
rounds, texts from the corpus) is handed to ``CompactionMiddleware`` once (its first call
takes the whole history), then repeatedly: one message is added to the state and
``before_model`` is timed. That is the whole hook: the check that the state continues our
last answer, the new message's conversion to OpenAI form, its token count, its append, and
the trigger check. The policy's window is so large that nothing ever compacts. On the same
messages, in the same run, ``SummarizationMiddleware.before_model`` is timed with a trigger
that never fires (it counts the whole list on every call). Output, one line per size:

    n=<N> ours_us=<median> langchain_us=<median> ratio=<langchain/ours>

Sizes above ``--langchain-max`` time ours only (LangChain's check takes about a second
per call at 100k on a busy machine).

Needs the ``langchain`` extra (``pip install .[langchain]``). Prints figures only.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from trigger_check import Rounds, corpus_texts, next_round_start, to_langchain  # noqa: E402

from compaction import Policy  # noqa: E402


def never_firing_policy() -> Policy:
    return Policy.load({"name": "bench", "model": "gpt-4o", "context_window": 10**9,
                        "trigger": {"kind": "window_fraction", "fraction": 0.8}})


def state_of(n: int, texts: list[str]) -> tuple[list, list]:
    """(N messages with ids, as a checkpointed agent state has them; 2,000 more to add)."""
    gen = Rounds(texts)
    raws = [next(gen) for _ in range(n)]
    next_round_start(gen)
    more = [next(gen) for _ in range(2000)]
    messages, extra = to_langchain(raws), to_langchain(more)
    for i, m in enumerate(messages + extra):
        m.id = f"m{i}"
    return messages, extra


def time_ours(messages: list, extra: list, calls: int) -> float:
    from compaction.integrations.langchain import CompactionMiddleware  # noqa: PLC0415 - optional extra, imported once LangChain is known to be there

    middleware = CompactionMiddleware(never_firing_policy(), session_id="bench")
    state = list(messages)
    t0 = time.perf_counter()
    middleware.before_model({"messages": state}, None)
    first = time.perf_counter() - t0
    print(f"# first call (takes the whole history of {len(state)}): {first * 1000:.0f} ms")
    samples = []
    for i in range(calls):
        state.append(extra[i % len(extra)])
        t0 = time.perf_counter()
        update = middleware.before_model({"messages": state}, None)
        samples.append(time.perf_counter() - t0)
        assert update is None, "the bench policy must not compact"
    return statistics.median(samples) * 1e6


def time_langchain(messages: list, extra: list, calls: int) -> float:
    from langchain.agents.middleware import SummarizationMiddleware  # noqa: PLC0415 - optional extra
    from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: PLC0415 - optional extra

    middleware = SummarizationMiddleware(model=FakeListChatModel(responses=["summary"]), trigger=("tokens", 10**12))
    state = list(messages)
    samples = []
    for i in range(calls):
        state.append(extra[i % len(extra)])
        t0 = time.perf_counter()
        update = middleware.before_model({"messages": state}, None)
        samples.append(time.perf_counter() - t0)
        assert update is None, "the langchain trigger must not fire"
    return statistics.median(samples) * 1e6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--calls", type=int, default=200, help="calls timed per size and middleware")
    ap.add_argument("--langchain-max", type=int, default=10_000, help="largest size LangChain's check is timed at")
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    args = ap.parse_args(argv)
    try:
        import langchain  # noqa: F401, PLC0415 - optional extra: say so instead of a traceback
    except ImportError:
        print("# langchain is not installed (pip install .[langchain]); nothing to measure")
        return
    noop = timeit.timeit(lambda: None, number=200_000) / 200_000 * 1e9
    print(f"# calibration: empty python call {noop:.0f} ns")
    texts = corpus_texts(args.corpus)
    for n in (int(s) for s in args.sizes.split(",") if s):
        messages, extra = state_of(n, texts)
        ours = time_ours(messages, extra, args.calls)
        if n > args.langchain_max:
            print(f"n={n} ours_us={ours:.1f} (LangChain not timed above --langchain-max {args.langchain_max})")
            continue
        theirs = time_langchain(messages, extra, args.calls)
        print(f"n={n} ours_us={ours:.1f} langchain_us={theirs:.1f} ratio={theirs / ours:.0f}")


if __name__ == "__main__":
    main()
