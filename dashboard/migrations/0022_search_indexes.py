"""Full-text indexes for search across sessions, on PostgreSQL only.

The expressions must stay identical to the ones ``dashboard.selectors.search`` queries with
(the planner uses an expression index only for the same expression). SQLite has no such
index; the search there scans with ``instr`` instead. ``left(..., 100000)`` bounds each
document, which keeps every tsvector under PostgreSQL's 1 MB limit so an insert can never
fail because a message is large.
"""
from django.db import migrations

INDEXES = (
    ("dashboard_search_msg_fts", "dashboard_storedmessage", "raw"),
    ("dashboard_search_archive_fts", "dashboard_archiveitem", "text"),
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, table, column in INDEXES:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {table} "
            f"USING gin (to_tsvector('simple', regexp_replace(left({column}, 100000), '\\W+', ' ', 'g')))")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _table, _column in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0021_trace_spans")]
    operations = [migrations.RunPython(create, drop)]
