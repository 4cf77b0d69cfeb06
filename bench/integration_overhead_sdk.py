"""Per-call overhead of the framework integrations, for conversations of 1,000 and 10,000
messages with no compaction due (the policy's window is far above them).

    .venv/bin/python bench/integration_overhead_sdk.py [--sizes 1000,10000] [--rounds 30]
                                                       [--port 18150] [--skip-service]

litellm callback (in-process): the conversation is first seen whole (its first call, also
reported), then each round the agent's history grows by a user and an assistant message
and the callback's deployment hook compacts the request, as ``litellm.acompletion`` runs it.

Agents SDK session (REST): a service session already holding the messages; each round is
what ``Runner.run`` asks of the session around one turn: ``add_items`` with two items, then
``get_items`` (the whole context comes back: nothing is compacted at these sizes). Needs
openai-agents only for the SDK, not here: the session class does not import it. A
throw-away data dir (SQLite) is used unless DATABASE_URL is set.

Output, one line per integration and size:

    integration=litellm messages=<n> first_call_ms=.. p50_ms=.. p95_ms=..
    integration=openai-agents messages=<n> add_items_p50_ms=.. get_items_p50_ms=.. turn_p50_ms=.. turn_p95_ms=..
Prints figures only.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402

from compaction import Policy, get_preset  # noqa: E402
from compaction.integrations.litellm import CompactionCallback  # noqa: E402
from compaction.integrations.openai_agents import CompactionServiceSession  # noqa: E402

BIG_WINDOW = 50_000_000


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _history(n: int) -> list[dict]:
    """About ``n`` messages of an agent session that ends where a user may speak next."""
    msgs = svc.messages_500(n)
    while msgs[-1].get("tool_calls") or msgs[-1]["role"] == "tool":
        msgs.pop()
    return msgs


def bench_litellm(n: int, rounds: int) -> str:
    data = get_preset("default").to_json()
    data["context_window"] = BIG_WINDOW
    handler = CompactionCallback(Policy.load(data))
    history = _history(n)
    meta = {"conversation_id": f"bench-{n}"}

    async def hook(messages: list[dict]) -> dict:
        out = await handler.async_pre_call_deployment_hook({"messages": messages, "metadata": meta}, "acompletion")
        assert out is not None
        return out

    t0 = time.perf_counter()
    asyncio.run(hook(history))
    first = time.perf_counter() - t0
    times = []
    for i in range(rounds):
        history = history + [{"role": "user", "content": f"round {i}: go on"},
                             {"role": "assistant", "content": f"answer {i}"}]
        t0 = time.perf_counter()
        out = asyncio.run(hook(history))
        times.append(time.perf_counter() - t0)
        assert len(out["messages"]) == len(history), "a compaction ran (not meant to)"
    ms = 1000.0
    return (f"integration=litellm messages={n} first_call_ms={first * ms:.2f} "
            f"p50_ms={_p(times, .5) * ms:.3f} p95_ms={_p(times, .95) * ms:.3f}")


def bench_agents(port: int, key: str, service_session: int, n: int, rounds: int) -> str:
    async def run() -> tuple[list[float], list[float]]:
        session = CompactionServiceSession(f"bench-{n}", base_url=f"http://127.0.0.1:{port}", api_key=key,
                                           service_session=service_session)
        await session.get_items()
        adds, gets = [], []
        for i in range(rounds):
            t0 = time.perf_counter()
            await session.add_items([{"role": "user", "content": f"round {i}: go on"},
                                     {"role": "assistant", "content": f"answer {i}"}])
            t1 = time.perf_counter()
            items = await session.get_items()
            t2 = time.perf_counter()
            adds.append(t1 - t0)
            gets.append(t2 - t1)
            assert items[-1]["content"] == f"answer {i}"
        await session.close()
        return adds, gets

    adds, gets = asyncio.run(run())
    turns = [a + g for a, g in zip(adds, gets)]
    ms = 1000.0
    return (f"integration=openai-agents messages={n} add_items_p50_ms={_p(adds, .5) * ms:.2f} "
            f"get_items_p50_ms={_p(gets, .5) * ms:.2f} turn_p50_ms={_p(turns, .5) * ms:.2f} "
            f"turn_p95_ms={_p(turns, .95) * ms:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--port", type=int, default=18150)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--skip-service", action="store_true", help="only the in-process litellm callback")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"# rounds={args.rounds}", flush=True)
    for n in sizes:
        print(bench_litellm(n, args.rounds), flush=True)
    if args.skip_service:
        return

    os.environ["COMPACTION_DEFAULT_POLICY"] = json.dumps({"context_window": BIG_WINDOW})
    data = svc.setup_django(args.data_dir)
    project, key = svc.project_with_key("integration-bench")
    ids = {n: svc.import_session(project, _history(n)).pk for n in sizes}
    env = svc.child_env(DEBUG="0", LOG_LEVEL="WARNING", COMPACTION_DEFAULT_POLICY=os.environ["COMPACTION_DEFAULT_POLICY"])
    cmd = [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "-b", f"127.0.0.1:{args.port}", "-w", "1",
           "--threads", "1", "--log-level", "warning"]
    proc = svc.start(cmd, env, data / "server.log")
    try:
        svc.wait_http(f"http://127.0.0.1:{args.port}/healthz")
        db = "postgresql" if "postgres" in svc.database_url() else "sqlite"
        print(f"# database={db}", flush=True)
        for n in sizes:
            print(bench_agents(args.port, key, ids[n], n, args.rounds), flush=True)
    finally:
        svc.stop(proc)


if __name__ == "__main__":
    main()
