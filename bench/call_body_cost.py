"""What keeping a gateway call's body for its inspector page costs per call
(``services/call_bodies.store``), and the storage it takes, as a session grows: each call
sends the whole history (one more user message and one reply each round), as an agent does
with no compaction due.

    .venv/bin/python bench/call_body_cost.py [--sizes 100,1000] [--rounds 30]

A throw-away data dir (SQLite) is used unless DATABASE_URL is set. Output per size:

    messages=<n> store_p50_ms=.. store_p95_ms=.. cold_ms=.. rebuild_ms=.. sent_mb=.. kept_mb=..

``store``: one call's body kept (inside the call's transaction; its commit is not counted,
the gateway commits the call's row anyway), the process having kept the previous call's (the usual
case: only the new messages are cut and looked up); ``cold``: the first call of the session
in a process (every message cut, hashed and looked up); ``rebuild``: the inspector's rebuild
of the last body with its SHA-256 check; ``sent_mb``: the bytes the calls sent in all;
``kept_mb``: the characters the session's pieces hold. Prints figures only.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _service as svc  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    svc.setup_django()

    from django.db import transaction  # noqa: PLC0415  (needs Django set up first)
    from django.db.models import Sum  # noqa: PLC0415  (needs Django set up first)
    from django.db.models.functions import Length  # noqa: PLC0415  (needs Django set up first)

    from dashboard.models import GatewayCall, GatewayPiece  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services import call_bodies  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.call_bodies import CallBody, SentBody, rebuilt, store  # noqa: PLC0415  (needs Django set up first)

    project, _key = svc.project_with_key("call-bodies")
    for size in (int(s) for s in args.sizes.split(",")):
        history = svc.messages_500(size)
        session = svc.import_session(project, history)
        call_bodies._SPLITS.clear()
        before = json.dumps({"model": "gpt-4o", "temperature": 0.2}, ensure_ascii=False)[:-1] + ', "messages": '
        times, sent, cold = [], 0, 0.0
        for r in range(args.rounds + 1):
            array = "[" + ",".join(json.dumps(m, ensure_ascii=False) for m in history) + "]"
            body = CallBody("chat", {"model": "gpt-4o"}, len(history), 1, len(history), SentBody(before, array, "}"),
                            {"message": {"role": "assistant", "content": f"reply {r}"}})
            call = GatewayCall.objects.create(session=session, endpoint="chat/completions", model="gpt-4o",
                                              status_code=200)
            with transaction.atomic():  # the call's transaction, whose commit the gateway pays anyway
                started = time.perf_counter()
                row = store(call, body)
                took = (time.perf_counter() - started) * 1000
            if r == 0:
                cold = took
            else:
                times.append(took)
            sent += len(body.sent.payload())
            history = [*history, {"role": "assistant", "content": f"reply {r}"},
                       {"role": "user", "content": f"question {r}: " + "word " * 40}]
        started = time.perf_counter()
        again = rebuilt(row)
        rebuild_ms = (time.perf_counter() - started) * 1000
        assert again.verified
        kept = GatewayPiece.objects.filter(session_id=session.pk).aggregate(n=Sum(Length("text")))["n"]
        times.sort()
        print(f"messages={size} store_p50_ms={statistics.median(times):.2f} "
              f"store_p95_ms={times[int(len(times) * 0.95) - 1]:.2f} cold_ms={cold:.1f} rebuild_ms={rebuild_ms:.1f} "
              f"sent_mb={sent / 1e6:.1f} kept_mb={kept / 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
