"""Scale benchmark on PostgreSQL + Redis: bulk load, page reads, the agent-loop hot path at
three session lengths, forced-run throughput and run latency.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cs_scale \\
    .venv/bin/python bench/scale.py [--sessions 10000] [--messages 1000000]
        [--sizes 100,10000,100000] [--rounds 30] [--workers 1,2,4] [--throughput-runs 40]
        [--latency-runs 15] [--redis redis://127.0.0.1:6379/8]
        [--parts load,pages,hot,throughput,latency,search] [--reuse] [--search-messages 1000000]

Parts (each prints its figures as soon as it has them):

- load: ``--sessions`` sessions holding ``--messages`` messages in all (deterministic agent
  rounds: user, assistant tool call, tool result, assistant text) imported through the bulk
  path (``dashboard.services.bulk_import.import_many``), timed. ``--reuse`` keeps an earlier
  load of the same size instead.
- pages: the sessions list, a session's overview and its page, through the Django test client
  signed in, for a session of the loaded set and for the longest hot-path session:
  p50 over ``--rounds`` reads, and the SQL queries of one read.
- hot: one session per ``--sizes`` length (a policy whose trigger never fires, so every
  append takes the same path); per round: append one message (POST), read the context just
  after (the body is rebuilt from the stored texts), read it again (steady state: the cached
  body), and a conditional read (304). p50 of each, and the queries of one append.
- throughput: forced runs on sessions of the loaded set, all requested at once, executed by
  ``celery worker --concurrency N`` (prefork) for each ``--workers`` N; runs/s from the first
  request to the last run finished.
- latency: forced runs on a 500-message session, one at a time, one worker process, Redis
  broker: request -> done p50, and where the time goes (request to enqueue, queue wait,
  execution) from the run's own timestamps.
- search (asked for by name: it loads a set of its own): project-wide search (``dashboard.selectors.search.search``, what ``GET /api/search``
  answers) over ``--search-messages`` messages in 100-message sessions of their own project,
  plus one archive entry per session holding every tenth message (so archived originals are
  searched too). Rows are written straight (COPY; token counts are rough, search reads only
  the text), deterministic; ``--reuse`` keeps an earlier load of the same size. A fixed mix
  of queries (rare words, a word in ~2 % of messages, words in most messages, several-word
  queries, no hits), ``--rounds`` times: p50 / p90 / p99 over all, p50 and hits per query.

The summarizer is the offline extractive one (no network). Prints figures only.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service as svc  # noqa: E402  (puts the repository on sys.path)

from dashboard.celery import use_broker  # noqa: E402

LOAD_PROJECT = "scale-load"
HOT_PROJECT = "scale-hot"
SEARCH_PROJECT = "scale-search"
SEARCH_SESSION_MESSAGES = 100
#: The search part's query mix, by kind; how many messages each word occurs in follows from
#: search_messages(): ``req<g>`` one message, ``node<k>`` one message in 4,999, ``ticket<k>``
#: one in 53, the WORDS nearly all, a call id two (the call and its result).
SEARCH_QUERIES = (
    ("rare", "req424242"), ("rare", "node4211"), ("rare", "call_4242_7"), ("rare", "node17 ticket3"),
    ("medium", "ticket17"), ("medium", "ticket5 grep"),
    ("common", "error"), ("common", "session token"), ("common", "grep -rn error src/"), ("common", "step"),
    ("none", "kubernetes"), ("none", "zebra quota"),
)
WORDS = ("def return import class self value path error test file line module config data request response "
         "session token message context summary archive policy").split()


def p50(values: list[float]) -> float:
    return statistics.median(values)


def text(seed: int, length: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13) % len(WORDS)] for i in range(length))


def synthetic(n: int, seed: int) -> list[dict]:
    """A deterministic agent session of exactly ``n`` messages, ~150 characters each."""
    out: list[dict] = [{"role": "system", "content": "You are a coding agent. " + text(seed, 12)}]
    i = 0
    while len(out) < n:
        cid = f"call_{seed}_{i}"
        out += [
            {"role": "user", "content": f"Step {i}: " + text(seed + i, 20)},
            {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {
                "name": "bash", "arguments": json.dumps({"command": f"grep -rn {WORDS[i % len(WORDS)]} src/"})}}]},
            {"role": "tool", "tool_call_id": cid, "content": f"src/m{i}.py:{i}: " + text(seed * 3 + i, 25)},
            {"role": "assistant", "content": text(seed + i * 3, 22)},
        ]
        i += 1
    return out[:n]


def queries_of(fn) -> tuple[int, list[str]]:
    from django.db import connection  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from django.test.utils import CaptureQueriesContext  # noqa: PLC0415  (needs Django set up first)

    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as q:
        fn()
    sqls = [x["sql"] for x in q.captured_queries]
    return len(sqls), sqls


def timed(fn, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


# -- load ---------------------------------------------------------------------------------

def load(args) -> list[int]:
    from dashboard.models import Session  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.bulk_import import import_many  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.keys import get_or_create_project  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.sessions import convert_payload  # noqa: PLC0415  (needs Django set up first)

    project, _ = get_or_create_project(LOAD_PROJECT)
    per = max(1, args.messages // args.sessions)
    have = Session.objects.filter(project=project, message_count=per).count()
    if args.reuse and have >= args.sessions:
        print(f"# load: reusing {have} sessions of {per} messages in project {LOAD_PROJECT}", flush=True)
    else:
        Session.objects.filter(project=project).delete()
        sources = (convert_payload(synthetic(per, k)) for k in range(args.sessions))
        result = import_many(project, sources, chunk_size=args.chunk)
        print(f"load sessions={result.sessions} messages={result.messages} seconds={result.seconds:.1f} "
              f"messages_per_s={result.messages / result.seconds:.0f} "
              f"sessions_per_s={result.sessions / result.seconds:.1f}   (chunk={args.chunk}; conversion, "
              f"validation, counting and writing)", flush=True)
    ids = list(Session.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    return ids


# -- pages ----------------------------------------------------------------------------------

def signed_in_client(project_id: int):
    from django.contrib.auth import get_user_model  # noqa: PLC0415  (needs Django set up first)
    from django.test import Client  # noqa: PLC0415  (needs Django set up first)

    user, _ = get_user_model().objects.get_or_create(username="scale-bench")
    client = Client()
    client.force_login(user)
    client.post("/project/", {"project": project_id})
    return client


def pages(args, load_ids: list[int], hot: dict[int, int]) -> None:
    from dashboard.models import Session  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    targets = []
    if load_ids:
        s = Session.objects.get(pk=load_ids[len(load_ids) // 2])
        targets.append((s.project_id, s.pk, s.message_count))
    if hot:
        n = max(hot)
        s = Session.objects.get(pk=hot[n])
        targets.append((s.project_id, s.pk, s.message_count))
    for project_id, sid, n in targets:
        client = signed_in_client(project_id)
        count = Session.objects.filter(project_id=project_id).count()
        for name, url in (("sessions_list", "/sessions/"), ("overview", f"/sessions/{sid}/overview/"),
                          ("session_page", f"/sessions/{sid}/")):
            r = client.get(url)
            assert r.status_code == 200, (url, r.status_code)
            nq, _ = queries_of(lambda url=url, client=client: client.get(url))
            times = timed(lambda url=url, client=client: client.get(url), args.rounds)
            print(f"page={name} project_sessions={count} session_messages={n} p50_ms={p50(times):.1f} "
                  f"queries={nq} bytes={len(r.content)}", flush=True)


# -- the hot path -------------------------------------------------------------------------------

def hot_sessions(args) -> dict[int, int]:
    from compaction import get_preset  # noqa: PLC0415
    from compaction.policy import Policy  # noqa: PLC0415
    from dashboard.models import Session, StoredPolicy  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.bulk_import import import_many  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.keys import get_or_create_project  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.policies import create_policy  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.sessions import convert_payload  # noqa: PLC0415  (needs Django set up first)

    project, _ = get_or_create_project(HOT_PROJECT)
    if not StoredPolicy.objects.filter(project=project, name="never-fires").exists():
        data = get_preset("default").to_json()
        data["trigger"] = {"kind": "messages", "threshold": 1_000_000_000}
        data["reduction"]["clearing"]["enabled"] = False
        create_policy(project, "never-fires", Policy.load(data), activate=True)
    out = {}
    for n in sorted(int(x) for x in args.sizes.split(",")):
        title = f"hot-{n}"
        # a fresh copy each time: earlier runs of the benchmark appended to it
        Session.objects.filter(project=project, title=title).delete()
        t0 = time.perf_counter()
        result = import_many(project, [convert_payload(synthetic(n, 7), title=title)], chunk_size=1)
        print(f"# hot session n={n} imported in {time.perf_counter() - t0:.1f} s", flush=True)
        out[n] = result.session_ids[0]
    return out


def hot_path(args, hot: dict[int, int]) -> None:
    from django.test import Client  # noqa: PLC0415  (needs Django set up first)

    from dashboard.models import Session  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.keys import create_api_key  # noqa: PLC0415  (needs Django set up first)

    project = Session.objects.get(pk=next(iter(hot.values()))).project
    _row, key = create_api_key(project, "scale-bench")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    results = {}
    for n, sid in sorted(hot.items()):
        def append(sid=sid, k=[0]):  # noqa: B006  (a counter kept across calls on purpose)
            k[0] += 1
            r = client.post(f"/api/sessions/{sid}/messages", json.dumps(
                {"messages": [{"role": "user", "content": f"one more question {k[0]}"}]}),
                content_type="application/json")
            assert r.status_code == 201, r.content[:300]
            assert r.json()["compaction"] is None

        def context(sid=sid):
            r = client.get(f"/api/sessions/{sid}/context")
            assert r.status_code == 200
            return r

        append()
        context()  # warm: key cache, connection, first body
        nq, sqls = queries_of(append)
        context()
        appends, fresh, steady, not_modified = [], [], [], []
        size = 0
        for _ in range(args.rounds):
            appends += timed(append, 1)
            fresh += timed(context, 1)
            steady += timed(context, 1)
            etag = context()["ETag"]
            not_modified += timed(lambda sid=sid, etag=etag: client.get(f"/api/sessions/{sid}/context",
                                                                        HTTP_IF_NONE_MATCH=etag), 1)
            size = len(context().content)
        results[n] = p50(appends)
        print(f"hot n={n} append_p50_ms={p50(appends):.2f} append_queries={nq} "
              f"context_after_append_p50_ms={p50(fresh):.2f} context_steady_p50_ms={p50(steady):.2f} "
              f"context_304_p50_ms={p50(not_modified):.2f} context_bytes={size}", flush=True)
    if len(results) > 1:
        lo, hi = min(results), max(results)
        print(f"# append flatness: p50(n={hi}) / p50(n={lo}) = {results[hi] / results[lo]:.2f} (goal <= 1.5)",
              flush=True)


# -- search across sessions ------------------------------------------------------------------------

def search_messages(session: int) -> list[dict]:
    """The synthetic agent session ``session`` with three tag words per message, each message
    ``g`` (its number over the whole set) tagged ``req<g>``, ``node<g % 4999>`` and
    ``ticket<g % 53>``: words of known rarity for the query mix."""
    out = synthetic(SEARCH_SESSION_MESSAGES, session)
    for k, m in enumerate(out):
        g = session * SEARCH_SESSION_MESSAGES + k
        tags = f" req{g} node{g % 4999} ticket{g % 53}"
        if m.get("content") is None:
            m["tool_calls"][0]["function"]["arguments"] = json.dumps(
                {**json.loads(m["tool_calls"][0]["function"]["arguments"]), "note": tags.strip()})
        else:
            m["content"] += tags
    return out


def search_load(args):
    from django.db import connection, transaction  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    from compaction.reduction.measure import document_text  # noqa: PLC0415
    from dashboard.models import ArchiveItem, Session, StoredArchiveEntry, StoredMessage  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.common import insert_values  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.keys import get_or_create_project  # noqa: PLC0415  (needs Django set up first)

    project, _ = get_or_create_project(SEARCH_PROJECT)
    sessions = max(1, args.search_messages // SEARCH_SESSION_MESSAGES)
    have = StoredMessage.objects.filter(session__project=project).count()
    if args.reuse and have == sessions * SEARCH_SESSION_MESSAGES:
        print(f"# search: reusing {have:,} messages in project {SEARCH_PROJECT}", flush=True)
        return project
    t0 = time.perf_counter()
    Session.objects.filter(project=project).delete()
    msg_cols = ["session_id", "position", "role", "raw", "tool_call_id", "tool_names", "tokens",
                "tokens_by_category", "content_hash", "created_at"]
    item_cols = ["entry_id", "index", "message_id", "ordinal", "raw", "text", "tool_call_id", "tool_name"]
    now = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime())
    batch = 500
    for first in range(0, sessions, batch):
        with transaction.atomic():
            rows = Session.objects.bulk_create(
                [Session(project=project, title=f"search {k}", message_count=SEARCH_SESSION_MESSAGES)
                 for k in range(first, min(sessions, first + batch))])
            entries = StoredArchiveEntry.objects.bulk_create(
                [StoredArchiveEntry(entry_id=f"ar_search_{s.pk}", project=project, session=s, kind="offloaded",
                                    content_hash="-", item_count=SEARCH_SESSION_MESSAGES // 10) for s in rows])
            msgs, items = [], []
            for k, (s, e) in enumerate(zip(rows, entries)):
                for pos, m in enumerate(search_messages(first + k)):
                    raw = json.dumps(m, separators=(",", ":"))
                    calls = m.get("tool_calls") or []
                    msgs.append([s.pk, pos, m["role"], raw, m.get("tool_call_id", ""),
                                 ",".join(c["function"]["name"] for c in calls), len(raw) // 4, "{}", "-", now])
                    if pos % 10 == 5:
                        items.append([e.pk, pos // 10, f"m{pos:06d}", pos, raw, document_text(m.get("content")),
                                      m.get("tool_call_id", ""), ""])
            insert_values(StoredMessage, msg_cols, msgs)
            insert_values(ArchiveItem, item_cols, items)
    with connection.cursor() as cur:  # fresh statistics, as autovacuum would soon have them
        for table in ("dashboard_session", "dashboard_storedmessage", "dashboard_storedarchiveentry",
                      "dashboard_archiveitem"):
            cur.execute(f"ANALYZE {table}")
    print(f"# search load: {sessions:,} sessions, {sessions * SEARCH_SESSION_MESSAGES:,} messages, "
          f"{sessions * SEARCH_SESSION_MESSAGES // 10:,} archived items in {time.perf_counter() - t0:.0f} s", flush=True)
    return project


def search_latency(args) -> None:
    from dashboard.selectors import search as sel  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    project = search_load(args)
    for _kind, q in SEARCH_QUERIES:
        sel.search(project.pk, q)  # warm: plans, the first reads of each index page
    times: list[float] = []
    per: dict[str, list[float]] = {}
    hits: dict[str, int] = {}
    for _ in range(args.rounds):
        for _kind, q in SEARCH_QUERIES:
            t0 = time.perf_counter()
            found = sel.search(project.pk, q)
            dt = (time.perf_counter() - t0) * 1000
            times.append(dt)
            per.setdefault(q, []).append(dt)
            hits[q] = len(found)
    times.sort()

    def pct(p: float) -> float:
        return times[min(len(times) - 1, int(len(times) * p))]

    print(f"search messages={args.search_messages} queries={len(times)} p50_ms={p50(times):.1f} "
          f"p90_ms={pct(0.9):.1f} p99_ms={pct(0.99):.1f} load_avg={Path('/proc/loadavg').read_text().split()[0]}",
          flush=True)
    for kind, q in SEARCH_QUERIES:
        print(f"search query={q!r} kind={kind} hits={hits[q]} p50_ms={p50(per[q]):.1f} max_ms={max(per[q]):.1f}",
              flush=True)


# -- runs through real workers ---------------------------------------------------------------------

def start_worker(env: dict, log: Path, concurrency: int):
    return svc.start_worker(env, log, concurrency)


def use_redis(args, data: Path):
    u = urlparse(args.redis)
    try:
        socket.create_connection((u.hostname, u.port or 6379), timeout=1).close()
    except OSError:
        print(f"# redis: {args.redis} unreachable; run parts skipped", flush=True)
        return None
    redis.Redis.from_url(args.redis).flushdb()
    use_broker(args.redis, {"visibility_timeout": 3600, "polling_interval": 0.1})
    return svc.child_env(CELERY_BROKER_URL=args.redis)


def wait_all(run_ids: list[int], timeout: float = 1800) -> list[dict]:
    from dashboard.models import CompactionRun  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    deadline = time.monotonic() + timeout
    while True:
        rows = list(CompactionRun.objects.filter(pk__in=run_ids).values(
            "status", "created_at", "enqueued_at", "started_at", "finished_at"))
        if all(r["status"] in ("succeeded", "failed", "skipped") for r in rows):
            return rows
        if time.monotonic() > deadline:
            raise RuntimeError("runs did not finish")
        time.sleep(0.005)


def throughput(args, data: Path, load_ids: list[int]) -> None:
    from dashboard.models import Session  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.runs import request_run  # noqa: PLC0415  (needs Django set up first)

    env = use_redis(args, data)
    if env is None:
        return
    counts = [int(x) for x in args.workers.split(",")]
    need = args.throughput_runs * len(counts) + len(counts)
    # sessions of the loaded set that no run has compacted yet (earlier runs of this part did)
    pool = list(Session.objects.filter(pk__in=load_ids, compaction_count=0, active_run_id=None)
                .order_by("id").values_list("id", flat=True))
    if len(pool) < need:
        print(f"# throughput: needs {need} uncompacted loaded sessions, has {len(pool)}; skipped "
              f"(load again without --reuse)", flush=True)
        return
    for n in counts:
        worker = start_worker(env, data / f"worker-throughput-{n}.log", n)
        try:
            wait_all([request_run(Session.objects.get(pk=pool.pop()), force=True, reason="bench warm-up").pk])
            sessions = [Session.objects.get(pk=pool.pop()) for _ in range(args.throughput_runs)]
            t0 = time.perf_counter()
            ids = [request_run(s, force=True, reason="bench").pk for s in sessions]
            rows = wait_all(ids)
            wall = time.perf_counter() - t0
            ok = sum(r["status"] == "succeeded" for r in rows)
            print(f"throughput workers={n} runs={len(ids)} succeeded={ok} seconds={wall:.2f} "
                  f"runs_per_s={len(ids) / wall:.2f}", flush=True)
        finally:
            svc.stop(worker)


def latency(args, data: Path) -> None:
    from dashboard.services.keys import get_or_create_project  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.runs import request_run  # noqa: PLC0415  (needs Django set up first)

    env = use_redis(args, data)
    if env is None:
        return
    project, _ = get_or_create_project("scale-latency")
    messages = svc.messages_500()
    worker = start_worker(env, data / "worker-latency.log", 1)
    try:
        walls, enqueue, wait, execute = [], [], [], []
        for k in range(args.latency_runs + 1):
            session = svc.import_session(project, messages)
            t0 = time.perf_counter()
            run = request_run(session, force=True, reason="bench")
            row = wait_all([run.pk])[0]
            wall = (time.perf_counter() - t0) * 1000
            if k == 0:
                continue  # warm-up: first summary in a fresh pool process
            walls.append(wall)
            enqueue.append((row["enqueued_at"] - row["created_at"]).total_seconds() * 1000)
            wait.append((row["started_at"] - row["enqueued_at"]).total_seconds() * 1000)
            execute.append((row["finished_at"] - row["started_at"]).total_seconds() * 1000)
        print(f"latency broker=redis session_messages={len(messages)} runs={len(walls)} p50_ms={p50(walls):.0f} "
              f"min_ms={min(walls):.0f} max_ms={max(walls):.0f}   request_to_enqueue_p50_ms={p50(enqueue):.0f} "
              f"queue_wait_p50_ms={p50(wait):.0f} execution_p50_ms={p50(execute):.0f}", flush=True)
    finally:
        svc.stop(worker)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=200, help="sessions per bulk-import chunk")
    ap.add_argument("--sizes", default="100,10000,100000")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--throughput-runs", type=int, default=40)
    ap.add_argument("--latency-runs", type=int, default=15)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/8")
    ap.add_argument("--parts", default="load,pages,hot,throughput,latency")
    ap.add_argument("--search-messages", type=int, default=1_000_000)
    ap.add_argument("--reuse", action="store_true", help="keep an earlier load of the same size")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    parts = set(args.parts.split(","))

    data = svc.setup_django(args.data_dir)
    from django.db import connection  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    print(f"# database={connection.vendor} sessions={args.sessions} messages={args.messages} "
          f"sizes={args.sizes} rounds={args.rounds}", flush=True)
    if connection.vendor != "postgresql":
        print("# not PostgreSQL: set DATABASE_URL for the figures this benchmark is meant for", flush=True)
    load_ids = load(args) if parts & {"load", "pages", "throughput"} else []
    hot = hot_sessions(args) if parts & {"hot", "pages"} else {}
    if "hot" in parts:
        hot_path(args, hot)
    if "pages" in parts:
        pages(args, load_ids, hot)
    if "throughput" in parts:
        throughput(args, data, load_ids)
    if "latency" in parts:
        latency(args, data)
    if "search" in parts:
        search_latency(args)


if __name__ == "__main__":
    main()
