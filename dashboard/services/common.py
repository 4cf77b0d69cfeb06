"""Small helpers shared by the services: token counters, text clean-up, timestamps, row
inserts and updates."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, connection, models

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


# Statements of insert_row and update_row, built once per model (and columns): building them
# through the ORM cost more Python time than the database took to run them.
_STATEMENTS: dict[tuple, tuple[str, list[models.Field]]] = {}


def _insert_statement(model: type[models.Model]) -> tuple[str, list[models.Field]]:
    key = ("insert", model, connection.vendor)
    if key not in _STATEMENTS:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        q = connection.ops.quote_name
        _STATEMENTS[key] = (f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(f.column) for f in fields)}) "
                            f"VALUES ({', '.join(['%s'] * len(fields))})", fields)
    return _STATEMENTS[key]


# Writes held back by ``batched_writes``: (statement, parameters, what must have changed
# exactly one row, or None).
_held: ContextVar[list[tuple[str, list[Any], str | None]] | None] = ContextVar("held_writes", default=None)


@contextmanager
def batched_writes() -> Iterator[None]:
    """``insert_row`` and ``update_row`` inside the block are sent together when it ends:
    one round trip to PostgreSQL (whose client-side parameter binding, Django's default,
    takes several statements in one query) instead of one each; on other databases, or
    with server-side binding, each runs where it is called. The block must not read what
    it writes this way; a failure surfaces when it ends, inside the caller's transaction.
    Nothing is sent when the block raises."""
    if connection.vendor != "postgresql" or connection.settings_dict.get("OPTIONS", {}).get("server_side_binding"):
        yield
        return
    held: list[tuple[str, list[Any], str | None]] = []
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    if not held:
        return
    with connection.cursor() as cursor:
        cursor.execute("; ".join(sql for sql, _params, _what in held), [p for _sql, params, _what in held for p in params])
        for k, (_sql, _params, what) in enumerate(held):
            if k and not cursor.nextset():
                raise DatabaseError("a batch of writes ended early")
            if what is not None and cursor.rowcount != 1:
                raise DatabaseError(f"{what} was not updated: the row is gone")


def _write(sql: str, params: list[Any], what: str | None = None) -> None:
    held = _held.get()
    if held is not None:
        held.append((sql, params, what))
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if what is not None and cursor.rowcount != 1:
            raise DatabaseError(f"{what} was not updated: the row is gone")


def insert_row(row: models.Model) -> None:
    """Insert one new row whose id nobody reads back: the values ``save()`` would write
    (each prepared by its field, ``auto_now_add`` included), in one plain statement."""
    sql, fields = _insert_statement(type(row))
    _write(sql, [f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields])


def update_row(row: models.Model, names: Sequence[str]) -> None:
    """``row.save(update_fields=names)`` in one plain statement (``auto_now`` fields among
    ``names`` are stamped as save() stamps them); a DatabaseError when the row is gone."""
    model = type(row)
    key = ("update", model, tuple(names), connection.vendor)
    if key not in _STATEMENTS:
        by_name = {f.name: f for f in model._meta.concrete_fields}
        fields = [by_name[n] for n in names]
        q = connection.ops.quote_name
        sets = ", ".join(f"{q(f.column)} = %s" for f in fields)
        _STATEMENTS[key] = (f"UPDATE {q(model._meta.db_table)} SET {sets} WHERE {q(model._meta.pk.column)} = %s",  # type: ignore[union-attr]
                            fields)
    sql, fields = _STATEMENTS[key]
    _write(sql, [f.get_db_prep_save(f.pre_save(row, False), connection) for f in fields] + [row.pk],
           what=f"{model.__name__} {row.pk}")


def insert_rows(model: type[models.Model], rows: Sequence[models.Model]) -> None:
    """Insert new rows whose ids nobody reads back, in order. On PostgreSQL through one
    ``COPY ... FROM STDIN``: ``bulk_create`` sends each column as one array literal, and
    psycopg escapes every quote of every text in it in Python; the JSON of a run's ~600
    archive items (~800 kB) spent ~40 ms there, where COPY escapes in C. Each value is
    prepared by its field as ``bulk_create`` prepares it (``pre_save``, then
    ``get_db_prep_save``), so the stored rows are the same. Other databases: ``bulk_create``."""
    if not rows:
        return
    if len(rows) == 1:  # one statement, where COPY takes two round trips
        insert_row(rows[0])
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(rows, batch_size=500)
        return
    if _held.get() is not None:  # one multi-row INSERT, held with the batch (COPY cannot wait for it)
        sql, fields = _insert_statement(model)
        head, values = sql.split(" VALUES ", 1)
        _write(f"{head} VALUES {', '.join([values] * len(rows))}",
               [f.get_db_prep_save(f.pre_save(row, True), connection) for row in rows for f in fields])
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
