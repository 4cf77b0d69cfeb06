"""Import scale: time and peak memory of importing one session of 10k / 100k / 300k messages.

    .venv/bin/python bench/import_scale.py [--sizes 10000,100000,300000] [--via service|http]
        [--chunk 2000]

Each size runs in a fresh child process (a throw-away SQLite database unless DATABASE_URL is
set), so its peak RSS (``VmHWM``) is that of the one import. The session is OpenAI JSONL
text, one short message per line (``{"role": "user", "content": "word17"}``, roles
alternating, every word different so every message is tokenized), imported the way
``POST /api/sessions`` imports it: ``--via service`` calls the service the API route calls
(``services.sessions.import_request``, ``auto_compact`` on, as the API's default),
``--via http`` posts the body through Django's test client (the whole request: body parser,
schema, route, the same service). Timed: the import only, not building the text.

Output, one line per size, then the ratio of the 100k time to the 10k time:

    n=<N> seconds=<float> cpu_seconds=<float> peak_rss_mb=<float> before_mb=<float> messages=<N> load=<1-min load avg>
    ratio_100k_10k=<float> cpu_ratio_100k_10k=<float>

``seconds`` is wall clock; ``cpu_seconds`` the child's CPU time over the same span (all
its threads), the figure to compare on a shared machine, printed with the load average.
``before_mb`` is the child's RSS just before the import (Django, the tokenizer and the
text loaded). Prints figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def text_of(n: int) -> str:
    return "\n".join(json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"word{i}"})
                     for i in range(n))


def rss_mb(field: str) -> float:
    """VmHWM (peak) or VmRSS (now) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(n: int, via: str) -> None:
    sys.path.insert(0, str(HERE))
    import _service as svc  # noqa: PLC0415  (the child alone sets Django up, on its own database)

    svc.setup_django()
    from django.test import Client  # noqa: PLC0415  (needs Django set up)

    from dashboard.services.sessions import import_request  # noqa: PLC0415  (needs Django set up)

    project, key = svc.project_with_key(f"import-scale-{n}-{os.getpid()}")
    # the tokenizer loaded and the first import's statements prepared before timing
    import_request(project, '{"role":"user","content":"warm"}', format="openai_jsonl", auto_compact=False)
    text = text_of(n)
    body = json.dumps({"messages": text, "format": "openai_jsonl"}) if via == "http" else ""
    before = rss_mb("VmRSS")
    cpu = time.process_time()
    started = time.perf_counter()
    if via == "http":
        response = Client(HTTP_AUTHORIZATION=f"Bearer {key}").post("/api/sessions", body,
                                                                   content_type="application/json")
        if response.status_code != 201:
            raise SystemExit(f"import answered {response.status_code}: {response.content[:500]!r}")
        count = response.json()["session"]["message_count"]
    else:
        count = import_request(project, text, format="openai_jsonl").session.message_count
    seconds = time.perf_counter() - started
    print(json.dumps({"n": n, "seconds": seconds, "cpu_seconds": time.process_time() - cpu, "peak_rss_mb": rss_mb("VmHWM"), "before_mb": before,
                      "messages": count}), flush=True)
    os._exit(0)  # no waiting for the run the import queued (no worker here)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,300000")
    parser.add_argument("--via", choices=("service", "http"), default="service")
    parser.add_argument("--chunk", type=int, default=None, help="IMPORT_CHUNK_MESSAGES (default: the setting's)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.via)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"# via={args.via} database={'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'sqlite'} "
          f"cpus={os.cpu_count()} load_before={os.getloadavg()[0]:.2f}")
    times: dict[int, float] = {}
    cpu: dict[int, float] = {}
    for n in sizes:
        env = dict(os.environ, LOG_LEVEL="ERROR", RUN_NO_WORKER_FALLBACK="off",
                   IMPORT_MAX_MESSAGES=str(max(n, int(os.environ.get("IMPORT_MAX_MESSAGES") or 0))))
        if args.chunk:
            env["IMPORT_CHUNK_MESSAGES"] = str(args.chunk)
        with tempfile.TemporaryDirectory(prefix="cs_import_scale_") as data:
            env["DATA_DIR"] = data
            out = subprocess.run([sys.executable, __file__, "--child", str(n), "--via", args.via], env=env,
                                 capture_output=True, text=True, check=False)
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if out.returncode != 0 or not lines:
            raise SystemExit(f"n={n}: the child failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
        r = json.loads(lines[-1])
        times[n] = r["seconds"]
        print(f"n={n} seconds={r['seconds']:.2f} cpu_seconds={r['cpu_seconds']:.2f} peak_rss_mb={r['peak_rss_mb']:.0f} before_mb={r['before_mb']:.0f} "
              f"messages={r['messages']} load={os.getloadavg()[0]:.2f}", flush=True)
        cpu[n] = r["cpu_seconds"]
    if 10_000 in times and 100_000 in times:
        print(f"ratio_100k_10k={times[100_000] / times[10_000]:.2f} "
              f"cpu_ratio_100k_10k={cpu[100_000] / cpu[10_000]:.2f}")


if __name__ == "__main__":
    main()
