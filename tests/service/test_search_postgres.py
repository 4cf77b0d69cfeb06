"""On PostgreSQL, search across sessions reads the stored documents of migration 0025 (a
generated ``search_doc`` column on messages and archived items) through their GIN indexes; the
expression indexes of migration 0022 are gone (each insert would otherwise compute every
document twice)."""
from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.postgres


def test_the_search_query_uses_the_stored_documents_and_their_indexes(api):
    if connection.vendor != "postgresql":
        pytest.skip("stored full-text documents exist on PostgreSQL only")
    with connection.cursor() as cur:
        cur.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'dashboard_search_%%' ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == ["dashboard_search_archive_doc", "dashboard_search_msg_doc"]
        cur.execute("SELECT table_name FROM information_schema.columns WHERE column_name = 'search_doc' "
                    "AND is_generated = 'ALWAYS' ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == ["dashboard_archiveitem", "dashboard_storedmessage"]
        cur.execute("SET LOCAL enable_seqscan = off")
        for table in ("dashboard_storedmessage", "dashboard_archiveitem"):
            cur.execute(f"EXPLAIN SELECT 1 FROM {table} t WHERE search_doc @@ plainto_tsquery('simple', 'quota')")
            plan = "\n".join(r[0] for r in cur.fetchall())
            assert "dashboard_search_" in plan, plan
