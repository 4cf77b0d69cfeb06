"""CPU time the gateway spends on one call, chat completions against Responses, in process:
the load of other processes on the machine does not land in these figures (``time.thread_time``).

    .venv/bin/python bench/gateway_cpu.py [--size 1000] [--rounds 30] [--api chat,responses]
                                          [--profile DIR] [--top 25]

The session of ``bench/gateway_overhead.py`` (about 1,000 messages, or its Responses items),
resent whole with one new user message per round as an agent does, through Django's test
client (the whole request: middleware, the view, the answer's serialisation, and the work
done once the answer has been sent), SQLite in a throw-away data dir, the scripted upstream
in a thread of this process. Per api, medians over the rounds, in ms of this thread's CPU:

    api=.. items=.. total=..   the whole request, less the upstream call's own CPU
    answer=..                  until the answer is sent (the test client's and Django's share
                               included, the same for both apis)
    span=..                    what GatewayCall.overhead_ms counts, in CPU: from chat.prepare
                               (chat) or the body's parsing (responses) until the answer is ready
    after=..                   the work left for after the answer was sent (storing the reply,
                               the call's row)
    upstream=..                the upstream call in this thread (posting the body, reading the
                               reply), left out of all the above
    span_wall=..               ``span`` in wall-clock time (the upstream call's wall time left
                               out): what the call's row records, here in process

The apis' rounds alternate (chat first in even rounds), after ``--warm`` unmeasured rounds
of each; ``gap=responses-chat``: the median over the rounds of the difference between the
two apis' figures in the same round. ``--parts``: also the CPU of the endpoints' main
steps, by name.

``--profile DIR``: a cProfile (clock: ``time.thread_time``) of the measured rounds per api,
saved as ``DIR/<api>.prof``, and its top functions by own time, per call, printed.
Prints figures only.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402

from compaction.integrations.responses_items import messages_to_items  # noqa: E402
from tests.support.llm_server import ScriptedLLMServer, ok  # noqa: E402


class _Clock:
    """CPU of this thread spent inside the wrapped functions, per round, and the thread's
    CPU clock when the last of them returned (``ended``) or the first began (``began``)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.spent, self.began, self.ended = 0.0, None, 0.0
        # the same in wall-clock time (perf_counter)
        self.spent_wall, self.began_wall, self.ended_wall = 0.0, 0.0, 0.0

    def wrap(self, owner, name: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            t0, w0 = time.thread_time(), time.perf_counter()
            if self.began is None:
                self.began, self.began_wall = t0, w0
            try:
                return inner(*args, **kwargs)
            finally:
                self.ended, self.ended_wall = time.thread_time(), time.perf_counter()
                self.spent += self.ended - t0
                self.spent_wall += self.ended_wall - w0
        setattr(owner, name, timed)


class _Api:
    """One endpoint's session as its client resends it, and its measured rounds."""

    def __init__(self, api: str, history: list[dict], key: str, profile: bool):
        self.api = api
        self.path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
        self.field = "input" if api == "responses" else "messages"
        self.sent = messages_to_items(history) if api == "responses" else history
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {key}", "HTTP_X_SESSION_ID": f"cpu-{api}-{len(history)}"}
        self.rows: dict[str, list[float]] = {"total": [], "answer": [], "span": [], "after": [], "upstream": [],
                                             "span_wall": []}
        self.profiler = cProfile.Profile(time.thread_time) if profile else None

    def post(self, client):
        data = json.dumps({"model": "gpt-4o", self.field: self.sent}).encode()
        out = client.post(self.path, data=data, content_type="application/json", **self.headers)
        assert out.status_code == 200, out.content[:500]
        if out.headers.get("X-Compaction-Run"):
            print(f"# {self.api}: a compaction ran (not meant to)", flush=True)
        reply = out.json()
        if self.api == "responses":
            self.sent = self.sent + [{k: v for k, v in item.items() if v is not None} for item in reply["output"]]
        else:
            self.sent = self.sent + [{k: v for k, v in reply["choices"][0]["message"].items() if v is not None}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warm", type=int, default=3, help="rounds of each api run before measuring")
    ap.add_argument("--api", default="chat,responses")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--parts", action="store_true", help="also the CPU of the endpoints' main steps")
    args = ap.parse_args()

    os.environ["COMPACTION_DEFAULT_POLICY"] = json.dumps({"context_window": 50_000_000})
    server = ScriptedLLMServer().start()
    os.environ["GATEWAY_API_BASE"] = server.api_base
    os.environ["GATEWAY_API_KEY"] = "bench"
    svc.setup_django()
    _project, key = svc.project_with_key("gateway-cpu")

    from django.test import Client  # noqa: PLC0415  (needs Django set up)

    from dashboard.gateway import chat, relay, responses_body, responses_wire  # noqa: PLC0415

    # the span GatewayCall.overhead_ms counts: from chat.prepare (chat) or from reading the
    # body (responses) to the answer ready (chat: the upstream's answer; responses: the
    # response kept and its object made), less the upstream call
    upstream, after, begun, made = _Clock(), _Clock(), _Clock(), _Clock()
    upstream.wrap(relay, "complete")
    after.wrap(chat, "store_after_sent")
    begun.wrap(chat, "prepare")
    begun.wrap(responses_body, "parse")
    made.wrap(responses_wire, "response_object")  # (responses: the answer is ready once its object is made)
    parts: dict[str, _Clock] = {}
    if args.parts:
        from dashboard.gateway import body, identity, responses_create, responses_input  # noqa: PLC0415
        from dashboard.gateway import views as gateway_views  # noqa: PLC0415

        for owner, name in ((gateway_views, "parse"), (responses_body, "parse"), (responses_input, "resume"),
                            (responses_input, "remember"), (chat, "prepare"), (chat, "place"),
                            (chat, "before_call"), (chat, "forwarded"), (chat, "complete"),
                            (responses_create, "_keep"), (responses_create, "_leading"),
                            (chat, "store_call_reply"), (body, "check_messages"), (identity, "_extend"),
                            (identity, "locked"), (identity, "lock_identity")):
            clock = parts[f"{owner.__name__.rsplit('.', 1)[-1]}.{name}"] = _Clock()
            clock.wrap(owner, name)
    client = Client()
    history = svc.session_ending_at_user_turn(args.size)
    apis = [_Api(api, history, key, bool(args.profile)) for api in args.api.split(",")]
    for api in apis:  # the first request stores the whole history (an import)
        server.script(ok("warm"))
        api.post(client)
    for i in range(args.warm + args.rounds):
        for api in (apis if i % 2 == 0 else apis[::-1]):  # alternating, so drift hits both
            api.sent = api.sent + [{"role": "user", "content": f"round {i}: go on"}]
            server.script(ok(f"answer {i}"))
            for clock in (upstream, after, begun, made, *parts.values()):
                clock.reset()
            measured = i >= args.warm
            if measured and api.profiler is not None:
                api.profiler.enable()
            t0 = time.thread_time()
            api.post(client)
            spent = time.thread_time() - t0
            if measured and api.profiler is not None:
                api.profiler.disable()
            if not measured:
                continue
            assert begun.began is not None
            rows = api.rows
            rows["total"].append((spent - upstream.spent) * 1000)
            rows["answer"].append((spent - upstream.spent - after.spent) * 1000)
            rows["span"].append((max(upstream.ended, made.ended) - begun.began - upstream.spent) * 1000)
            rows["span_wall"].append((max(upstream.ended_wall, made.ended_wall) - begun.began_wall
                                      - upstream.spent_wall) * 1000)
            rows["after"].append(after.spent * 1000)
            rows["upstream"].append(upstream.spent * 1000)
            for name, clock in parts.items():
                rows.setdefault(name, []).append(clock.spent * 1000)
                rows.setdefault(f"{name}_wall", []).append(clock.spent_wall * 1000)
    if len(apis) == 2:  # round by round (each pair ran back to back, so load hits both alike)
        gaps = {k: statistics.median(b - a for a, b in zip(apis[0].rows[k], apis[1].rows[k]))
                for k in ("total", "answer", "span", "span_wall")}
        print(f"gap={apis[1].api}-{apis[0].api} " + " ".join(f"{k}={v:.2f}" for k, v in gaps.items()), flush=True)
    for api in apis:
        print(f"api={api.api} items={len(api.sent)} "
              + " ".join(f"{k}={statistics.median(v):.2f}" for k, v in api.rows.items()), flush=True)
        if api.profiler is None:
            continue
        out_dir = Path(args.profile)
        out_dir.mkdir(parents=True, exist_ok=True)
        api.profiler.dump_stats(str(out_dir / f"{api.api}.prof"))
        stats = pstats.Stats(api.profiler)
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:args.top]  # type: ignore[attr-defined]
        print(f"# {api.api}: top functions by own CPU, ms per call (own / cumulative, calls per call)")
        for (file, line, fn), (_cc, nc, tt, ct, _callers) in rows:
            where = f"{Path(file).name}:{line}({fn})"
            print(f"#   {tt * 1000 / args.rounds:7.3f} {ct * 1000 / args.rounds:7.3f}  {nc / args.rounds:8.1f}x  {where}")
    server.stop()


if __name__ == "__main__":
    main()
