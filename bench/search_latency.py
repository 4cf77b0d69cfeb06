"""p50 latency of search across sessions on PostgreSQL, at a chosen number of messages.

Builds a scratch table shaped like the stored messages (JSON text with ASCII escapes) with
the same full-text expression index as migration 0023 and runs the query shape of
``dashboard.selectors.search`` (project filter, ranking, limit 50) for a fixed list of
queries: rare words, common words and two-word queries. Only the message half of the search
is measured (the archive half is the same query on a smaller table).

    python bench/search_latency.py --messages 200000 [--url postgres://postgres@127.0.0.1:5432/postgres]

Prints the size it measured; figures at other sizes must be measured, not scaled.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import django
import psycopg

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django.setup()

from dashboard.selectors.search import INDEXED_CHARS  # noqa: E402  (needs the app registry)

DOC = f"to_tsvector('simple', regexp_replace(left(raw, {INDEXED_CHARS}), '\\W+', ' ', 'g'))"
QUERIES = ["kubelet", "quota exceeded", "module_417.py", "error", "deploy region", "w123", "zebra",
           "retry invoice", "w7 w8", "session"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--url", default="postgres://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with psycopg.connect(a.url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS bench_search_msg")
        db.execute("CREATE TABLE bench_search_msg (id bigserial PRIMARY KEY, project_id int, session_id int, "
                   "position int, raw text)")
        t0 = time.perf_counter()
        # deterministic text: 200 sessions per project, words drawn from i's digits
        db.execute(f"""INSERT INTO bench_search_msg (project_id, session_id, position, raw)
            SELECT i % 5, i % 1000, i / 1000,
                   '{{"role":"user","content":"step ' || i || ': inspect src/module_' || (i % 997) || '.py w' || (i % 131)
                   || ' w' || (i % 17) || ' ' || (CASE WHEN i % 50 = 0 THEN 'quota exceeded in deploy region ' ELSE '' END)
                   || (CASE WHEN i % 9 = 0 THEN 'error retry invoice ' ELSE 'session notes ' END)
                   || repeat('filler text about the agent work ', 6) || '"}}'
              FROM generate_series(1, {a.messages}) i""")
        load = time.perf_counter() - t0
        t0 = time.perf_counter()
        db.execute(f"CREATE INDEX bench_search_fts ON bench_search_msg USING gin ({DOC})")
        db.execute("ANALYZE bench_search_msg")
        index = time.perf_counter() - t0
        sql = (f"SELECT ts_rank({DOC}, q), session_id, position FROM bench_search_msg, "
               "plainto_tsquery('simple', regexp_replace(%s, '\\W+', ' ', 'g')) q "
               f"WHERE project_id = 1 AND {DOC} @@ q ORDER BY 1 DESC, session_id, position LIMIT 50")
        times: list[float] = []
        per_query: dict[str, list[float]] = {}
        for _ in range(a.repeat):
            for q in QUERIES:
                t0 = time.perf_counter()
                db.execute(sql, [q]).fetchall()
                dt = (time.perf_counter() - t0) * 1000
                times.append(dt)
                per_query.setdefault(q, []).append(dt)
        db.execute("DROP TABLE bench_search_msg")
    print(f"messages: {a.messages:,}  load {load:.1f}s  index {index:.1f}s")
    print(f"search p50 {statistics.median(times):.1f} ms  p90 {sorted(times)[int(len(times) * 0.9)]:.1f} ms "
          f"over {len(times)} queries")
    for q, ts in per_query.items():
        print(f"  {q!r:18} p50 {statistics.median(ts):.1f} ms")


if __name__ == "__main__":
    main()
