"""Small helpers shared by the services: token counters, text clean-up, timestamps, bulk
inserts."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from django.db import connection, models

# One MessageCounter per tokenizer per process (the engine keeps them), so its
# content-hash cache is shared by every request, run and simulation in the process.
from compaction.compactor import counter_for  # noqa: F401
from compaction.tokens import CATEGORIES


def empty_totals() -> dict:
    return {c: 0 for c in CATEGORIES}


def add_totals(totals: dict, by_category: dict, sign: int = 1) -> dict:
    for k, v in by_category.items():
        totals[k] = totals.get(k, 0) + sign * v
    return totals


def with_total(totals: dict) -> dict:
    out = {c: int(totals.get(c, 0)) for c in CATEGORIES}
    for k, v in totals.items():
        if k not in out and k != "total":
            out[k] = int(v)
    out["total"] = sum(v for k, v in out.items() if k != "total")
    return out


def clean_text(text: str) -> str:
    """Text safe for any database text column: no NUL, no lone surrogates."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def text_problem(value: str) -> str | None:
    """Why a user-supplied string cannot be stored as is, or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (no lone surrogates)"
    return None


def ts(dt: datetime | None) -> float | None:
    return dt.timestamp() if dt is not None else None


def now() -> datetime:
    return datetime.now(UTC)


def insert_rows(model: type[models.Model], rows: Sequence[models.Model]) -> None:
    """Insert new rows whose ids nobody reads back, in order. On PostgreSQL through one
    ``COPY ... FROM STDIN``: ``bulk_create`` sends each column as one array literal, and
    psycopg escapes every quote of every text in it in Python; the JSON of a run's ~600
    archive items (~800 kB) spent ~40 ms there, where COPY escapes in C. Each value is
    prepared by its field as ``bulk_create`` prepares it (``pre_save``, then
    ``get_db_prep_save``), so the stored rows are the same. Other databases: ``bulk_create``."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(rows, batch_size=500)
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
    # The copy goes to psycopg's cursor directly, past Django's wrapper: its errors are
    # wrapped here, so a lost connection is django.db's OperationalError as for any query
    # (the worker retries a run at once on that, see services.runs.execute).
    with connection.cursor() as cursor, connection.wrap_database_errors, cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row([f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields])
