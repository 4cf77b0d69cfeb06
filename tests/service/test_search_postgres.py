"""On PostgreSQL, search across sessions is answered from the full-text indexes of migration
0023 (the query's expressions must match the index definitions, or every search scans)."""
from __future__ import annotations

import pytest
from django.db import connection

from dashboard.selectors import search as sel

pytestmark = pytest.mark.postgres


def test_the_search_query_uses_the_full_text_indexes(api):
    if connection.vendor != "postgresql":
        pytest.skip("full-text indexes exist on PostgreSQL only")
    with connection.cursor() as cur:
        cur.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'dashboard_search_%%' ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == ["dashboard_search_archive_fts", "dashboard_search_msg_fts"]
        cur.execute("SET LOCAL enable_seqscan = off")
        for column, table in (("raw", "dashboard_storedmessage"), ("text", "dashboard_archiveitem")):
            cur.execute(f"EXPLAIN SELECT 1 FROM {table} t WHERE {sel._doc('t.' + column)} "
                        "@@ plainto_tsquery('simple', 'quota')")
            plan = "\n".join(r[0] for r in cur.fetchall())
            assert "dashboard_search_" in plan, plan
