"""Latency the gateway adds to a chat completion: the OpenAI SDK calling the scripted
upstream directly, against the same SDK calling POST /v1/chat/completions of a live server
that forwards to that upstream, for sessions of 100 and 1,000 messages with no compaction
due (the policy's window is far above the session).

    .venv/bin/python bench/gateway_overhead.py [--port 18262] [--rounds 40] [--sizes 100,1000]
                                               [--server auto|runserver|gunicorn] [--api chat|responses]

``--api responses``: the gateway is called with ``client.responses.create`` and the session
as Responses input items (messages, function calls and their outputs; about 1,000 items at
1,000 messages), resent whole every round as the Agents SDK does; the direct call is still
the chat completion the upstream serves (the model call the translated path makes), so
"added" is what the Responses endpoint costs beyond the model call it makes.

A throw-away data dir (SQLite) is used unless DATABASE_URL is set (the issue's goal is on
PostgreSQL). Each round sends the agent's whole history plus one new user message, once
directly and once through the gateway (alternating, so drift hits both); the gateway stores
the new message and the reply, so the session grows by two messages a round. Output per size:

    messages=<n> direct_p50_ms=.. direct_p95_ms=.. gateway_p50_ms=.. gateway_p95_ms=..
    added_p50_ms=.. added_p95_ms=.. ratio_p50=<gateway/direct>     (goal: added p50 <= 10 ms at 1,000)
    server_overhead_p50_ms=.. server_upstream_p50_ms=..

The last two are what the server recorded of each call (``GatewayCall.overhead_ms``: from
the body parsed to the answer ready, less the upstream call (the reply is stored after the
answer has been sent); ``upstream_ms``: the call).
Prints figures only.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402
import openai  # noqa: E402

from compaction.integrations.responses_items import messages_to_items  # noqa: E402
from tests.support.llm_server import ScriptedLLMServer, ok  # noqa: E402


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(gateway, direct, server, history: list[dict], rounds: int, tag: str) -> dict:
    # Warm-up: the gateway's first request stores the whole history (an import).
    server.script(ok("warm"))
    first = gateway.chat.completions.create(model="gpt-4o", messages=history, extra_headers={"X-Session-Id": tag})
    history = history + [first.choices[0].message.model_dump(exclude_none=True)]
    g_times, d_times = [], []
    for i in range(rounds):
        history = history + [{"role": "user", "content": f"round {i}: go on"}]
        server.script(ok(f"direct {i}"))
        t0 = time.perf_counter()
        direct.chat.completions.create(model="gpt-4o", messages=history)
        d_times.append(time.perf_counter() - t0)
        server.script(ok(f"answer {i}"))
        t0 = time.perf_counter()
        out = gateway.chat.completions.with_raw_response.create(model="gpt-4o", messages=history,
                                                                extra_headers={"X-Session-Id": tag})
        g_times.append(time.perf_counter() - t0)
        if out.headers.get("x-compaction-run"):
            print(f"# round {i}: a compaction ran (not meant to)", flush=True)
        history = history + [out.parse().choices[0].message.model_dump(exclude_none=True)]
    ms = 1000.0
    d50, d95, g50, g95 = (_p(d_times, .5) * ms, _p(d_times, .95) * ms, _p(g_times, .5) * ms, _p(g_times, .95) * ms)
    added = [(g - d) * ms for g, d in zip(g_times, d_times)]
    return {"direct_p50_ms": d50, "direct_p95_ms": d95, "gateway_p50_ms": g50, "gateway_p95_ms": g95,
            "added_p50_ms": statistics.median(added), "added_p95_ms": _p(added, .95),
            "ratio_p50": g50 / d50 if d50 else float("nan")}


def measure_responses(gateway, direct, server, history: list[dict], rounds: int, tag: str) -> dict:
    """As ``measure``, the gateway called through ``responses.create`` with the history as items."""
    items = messages_to_items(history)
    print(f"# {len(items)} input items", flush=True)
    server.script(ok("warm"))
    first = gateway.responses.create(model="gpt-4o", input=items, extra_headers={"X-Session-Id": tag})
    items = items + [o.model_dump(exclude_none=True) for o in first.output]
    history = history + [{"role": "assistant", "content": "warm"}]
    g_times, d_times = [], []
    for i in range(rounds):
        turn = {"role": "user", "content": f"round {i}: go on"}
        history, items = history + [turn], items + [turn]
        server.script(ok(f"direct {i}"))
        t0 = time.perf_counter()
        direct.chat.completions.create(model="gpt-4o", messages=history)
        d_times.append(time.perf_counter() - t0)
        server.script(ok(f"answer {i}"))
        t0 = time.perf_counter()
        out = gateway.responses.with_raw_response.create(model="gpt-4o", input=items,
                                                         extra_headers={"X-Session-Id": tag})
        g_times.append(time.perf_counter() - t0)
        if out.headers.get("x-compaction-run"):
            print(f"# round {i}: a compaction ran (not meant to)", flush=True)
        reply = out.parse()
        items = items + [o.model_dump(exclude_none=True) for o in reply.output]
        history = history + [{"role": "assistant", "content": reply.output_text}]
    ms = 1000.0
    d50, d95, g50, g95 = (_p(d_times, .5) * ms, _p(d_times, .95) * ms, _p(g_times, .5) * ms, _p(g_times, .95) * ms)
    added = [(g - d) * ms for g, d in zip(g_times, d_times)]
    return {"direct_p50_ms": d50, "direct_p95_ms": d95, "gateway_p50_ms": g50, "gateway_p95_ms": g95,
            "added_p50_ms": statistics.median(added), "added_p95_ms": _p(added, .95),
            "ratio_p50": g50 / d50 if d50 else float("nan")}


def _recorded(tag: str, rounds: int) -> dict:
    """The server's own timings of the measured calls (the warm-up call left out)."""
    from dashboard.models import GatewayCall  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    rows = list(GatewayCall.objects.filter(session__gateway__identity=f"id:{tag}").order_by("-id")
                .values_list("overhead_ms", "upstream_ms")[:rounds])
    return {"server_overhead_p50_ms": statistics.median(r[0] for r in rows) if rows else float("nan"),
            "server_upstream_p50_ms": statistics.median(r[1] for r in rows) if rows else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=18262)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--server", choices=("auto", "runserver", "gunicorn"), default="auto")
    ap.add_argument("--api", choices=("chat", "responses"), default="chat")
    args = ap.parse_args()

    # No compaction due: a window far above every session measured here.
    os.environ["COMPACTION_DEFAULT_POLICY"] = json.dumps({"context_window": 50_000_000})
    data = svc.setup_django(args.data_dir)
    _project, key = svc.project_with_key("gateway-bench")
    server = ScriptedLLMServer().start()
    env = svc.child_env(DEBUG="0", LOG_LEVEL="WARNING", GATEWAY_API_BASE=server.api_base, GATEWAY_API_KEY="bench",
                        COMPACTION_DEFAULT_POLICY=os.environ["COMPACTION_DEFAULT_POLICY"])
    if args.server == "auto":
        args.server = "gunicorn" if importlib.util.find_spec("gunicorn") else "runserver"
    if args.server == "gunicorn":
        cmd = [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "-b", f"127.0.0.1:{args.port}", "-w", "1",
               "--threads", "1", "--log-level", "warning"]
    else:
        cmd = [sys.executable, str(svc.REPO / "manage.py"), "runserver", f"127.0.0.1:{args.port}", "--noreload"]
    proc = svc.start(cmd, env, data / "server.log")
    try:
        svc.wait_http(f"http://127.0.0.1:{args.port}/healthz")
        gateway = openai.OpenAI(base_url=f"http://127.0.0.1:{args.port}/v1", api_key=key, max_retries=0)
        direct = openai.OpenAI(base_url=server.api_base, api_key="bench", max_retries=0)
        db = "postgresql" if "postgres" in svc.database_url() else "sqlite"
        print(f"# server={args.server} database={db} rounds={args.rounds} api={args.api}", flush=True)
        run = measure_responses if args.api == "responses" else measure
        for size in (int(s) for s in args.sizes.split(",")):
            history = svc.session_ending_at_user_turn(size)
            r = run(gateway, direct, server, history, args.rounds, f"bench-{args.api}-{size}")
            r.update(_recorded(f"bench-{args.api}-{size}", args.rounds))
            print(f"messages={len(history)} " + " ".join(f"{k}={v:.2f}" for k, v in r.items()), flush=True)
    finally:
        svc.stop(proc)
        server.stop()


if __name__ == "__main__":
    main()
