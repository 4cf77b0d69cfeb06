"""Stored full-text documents for search across sessions, on PostgreSQL only.

Migration 0022 indexed an expression (the tsvector of each text). The index finds matching
rows, but ranking them had to compute every matching row's tsvector again, and a plan that
checks the expression row by row (a few sessions, a filter) recomputed it for each: a query
for a common word took seconds at 100k messages. Here each row keeps its document in a
generated column (``search_doc``), written by PostgreSQL itself on every INSERT or COPY and on
any change of the text, so every writer (imports, appends, the gateway, archive writes) keeps
search current without knowing of it; the GIN index is on the column, and ranking reads it.

The expression is the one 0022 indexed (see ``dashboard.selectors.search``). The models do not
declare the column (SQLite has no tsvector: search there scans the text), so Django never
reads or writes it. Adding a stored column rewrites each table once, under a lock, which
takes about a minute per million messages.
"""
from django.db import migrations

DOCUMENT = "to_tsvector('simple', regexp_replace(left({column}, 100000), '\\W+', ' ', 'g'))"
TABLES = (
    # table, text column, index on the stored document, expression index of 0022
    ("dashboard_storedmessage", "raw", "dashboard_search_msg_doc", "dashboard_search_msg_fts"),
    ("dashboard_archiveitem", "text", "dashboard_search_archive_doc", "dashboard_search_archive_fts"),
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, column, index, old in TABLES:
        schema_editor.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS search_doc tsvector "
                              f"GENERATED ALWAYS AS ({DOCUMENT.format(column=column)}) STORED")
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin (search_doc)")
        schema_editor.execute(f"DROP INDEX IF EXISTS {old}")
        # The new column has no statistics until the next ANALYZE: meanwhile the planner
        # would take every word for a rare one and fetch all the rows of a common one.
        schema_editor.execute(f"ANALYZE {table}")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, column, index, old in TABLES:
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {old} ON {table} USING gin ({DOCUMENT.format(column=column)})")
        schema_editor.execute(f"DROP INDEX IF EXISTS {index}")
        schema_editor.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS search_doc")


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0024_continuous_tuning")]
    operations = [migrations.RunPython(create, drop)]
