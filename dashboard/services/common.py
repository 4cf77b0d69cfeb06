"""Small helpers shared by the services: token counters, text clean-up, timestamps, row
inserts and updates."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, connection, models
from django.db.models.fields import AutoFieldMixin

# One MessageCounter per tokenizer per process (the engine keeps them), so its
# content-hash cache is shared by every request, run and simulation in the process.
from compaction.compactor import counter_for  # noqa: F401
from compaction.messages import Message
from compaction.tokens import CATEGORIES, MessageTokens


def context_item(msg: Message, tokens: MessageTokens, counter: str) -> dict[str, Any]:
    """A live-context item: the message and its token counts, with the name of the counter
    that made them (a run counting with the same one takes them instead of tokenizing the
    context again: runs.execute.take_stored_counts)."""
    d = msg.to_dict()
    d["tokens"] = {"total": tokens.total, "by_category": dict(tokens.by_category), "counter": counter}
    return d


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
        # an automatic id is the database's to give; a key the row is given (a response's id) is written
        fields = [f for f in model._meta.concrete_fields if not (f.primary_key and isinstance(f, AutoFieldMixin))]
        q = connection.ops.quote_name
        _STATEMENTS[key] = (f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(f.column) for f in fields)}) "
                            f"VALUES ({', '.join(['%s'] * len(fields))})", fields)
    return _STATEMENTS[key]


# Per model: the statement of lock_row, and the converters of each column it reads.
_LOCKS: dict[tuple, tuple[str, list[str], list[tuple[int, Any, list[Any]]]]] = {}


def lock_row(model: type[models.Model], pk: Any) -> models.Model | None:
    """``model.objects.select_for_update().filter(pk=pk).first()`` (inside the caller's
    transaction) through a statement built once per model: building it through the ORM
    took twice as long as PostgreSQL took to run it, on the paths that claim and commit
    runs. The row's values are converted as a query converts them (``from_db_value``)."""
    key = (model, connection.vendor)
    if key not in _LOCKS:
        fields = list(model._meta.concrete_fields)
        q, table = connection.ops.quote_name, model._meta.db_table
        sql = (f"SELECT {', '.join(q(f.column) for f in fields)} FROM {q(table)} "
               f"WHERE {q(model._meta.pk.column)} = %s")  # type: ignore[union-attr]
        if connection.features.has_select_for_update:
            sql += " FOR UPDATE"
        converters = []
        for k, f in enumerate(fields):
            col = f.get_col(table)
            found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            if found:
                converters.append((k, col, found))
        _LOCKS[key] = (sql, [f.attname for f in fields], converters)
    sql, names, converters = _LOCKS[key]
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for k, col, found in converters:
        for convert in found:
            values[k] = convert(values[k], col, connection)
    return model.from_db(connection.alias, names, values)


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
    """Insert one new row whose id nobody reads back (an automatic one; a key the row is
    given is written): the values ``save()`` would write (each prepared by its field,
    ``auto_now_add`` included), in one plain statement."""
    sql, fields = _insert_statement(type(row))
    _write(sql, [f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields])


def update_row(row: models.Model, names: Sequence[str], prepared: dict[str, Any] | None = None) -> None:
    """``row.save(update_fields=names)`` in one plain statement (``auto_now`` fields among
    ``names`` are stamped as save() stamps them); a DatabaseError when the row is gone.
    ``prepared``: the stored values of some of ``names``, already as their fields would
    prepare them (a JSON text the caller has encoded once already)."""
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
    given = prepared or {}
    _write(sql, [given[f.name] if f.name in given else f.get_db_prep_save(f.pre_save(row, False), connection)
                 for f in fields] + [row.pk],
           what=f"{model.__name__} {row.pk}")


def insert_rows(model: type[models.Model], rows: Sequence[models.Model]) -> None:
    """Insert new rows whose ids nobody reads back, in order: the values ``bulk_create``
    would write, each prepared by its field (``pre_save``, then ``get_db_prep_save``), so
    the stored rows are the same; sent by :func:`insert_values`."""
    if not rows:
        return
    if len(rows) == 1:  # one statement, where COPY takes two round trips
        insert_row(rows[0])
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(rows, batch_size=500)
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    insert_values(model, [f.column for f in fields],
                  [[f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields] for row in rows])


def insert_values(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Insert rows given as the values the database stores in ``columns`` (what each
    field's ``get_db_prep_save`` gives): for many rows whose model instances only served
    to be taken apart again (a run's ~730 archive items spent ~25 ms building and
    preparing instances). On PostgreSQL through one ``COPY ... FROM STDIN``: a multi-row
    INSERT's texts (~800 kB of JSON for a run's archive) are escaped by psycopg in Python,
    COPY's in C; inside ``batched_writes``, multi-row INSERTs held with the batch (COPY
    cannot wait for it). Other databases: multi-row INSERTs. ``rows`` may be a generator:
    COPY sends every 32 kB as it comes, so PostgreSQL stores the first rows while the
    caller still prepares the next."""
    q = connection.ops.quote_name
    table, names = q(model._meta.db_table), ", ".join(q(c) for c in columns)
    if connection.vendor != "postgresql" or _held.get() is not None:
        statements = _multi_row_inserts(model, columns, list(rows))
        if _held.get() is not None:
            for sql, params in statements:
                _write(sql, params)
            return
        with connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
        return
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return
    # The copy goes to psycopg's cursor directly, past Django's wrapper: its errors are
    # wrapped here, so a lost connection is django.db's OperationalError as for any query
    # (the worker retries a run at once on that, see services.runs.execute).
    with connection.cursor() as cursor, connection.wrap_database_errors, \
            cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        copy.write_row(first)
        for row in rows:
            copy.write_row(row)


def insert_returning(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]],
                     key: str) -> dict[Any, int]:
    """Insert rows given as stored values (as :func:`insert_values`) and return each new
    row's id by its value of the unique column ``key``. Not inside ``batched_writes``.
    On PostgreSQL the ids are drawn from the table's sequence first (as the inserts would
    draw them), then the rows go through :func:`insert_values`' COPY with them: an INSERT
    returning its ids takes the values as array literals or one placeholder each, both
    built and escaped by psycopg in Python (~4 ms for a run's ~120 archive entries).
    Elsewhere one multi-row INSERT ... RETURNING per batch, matched by ``key``."""
    if not rows:
        return {}
    q = connection.ops.quote_name
    at = columns.index(key)
    pk = model._meta.pk.column  # type: ignore[union-attr]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                           [model._meta.db_table, pk, len(rows)])
            new = [n for (n,) in cursor.fetchall()]
            insert_values(model, [pk, *columns], [[n, *row] for n, row in zip(new, rows)])
            return {row[at]: n for n, row in zip(new, rows)}
        ids: dict[Any, int] = {}
        for sql, params in _multi_row_inserts(model, columns, rows, f" RETURNING {q(pk)}, {q(key)}"):
            cursor.execute(sql, params)
            ids.update((k, n) for n, k in cursor.fetchall())
    if len(ids) != len(rows) or any(row[at] not in ids for row in rows):
        raise DatabaseError(f"{model.__name__}: the ids of the inserted rows did not all come back")
    return ids


def _multi_row_inserts(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]],
                       tail: str = "") -> Iterator[tuple[str, list[Any]]]:
    """Multi-row INSERT statements of ``rows``, as many as the database's limit on
    parameters per statement asks (SQLite: 999)."""
    q = connection.ops.quote_name
    head = f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(c) for c in columns)}) VALUES "
    one = f"({', '.join(['%s'] * len(columns))})"
    step = max(1, (connection.features.max_query_params or 65535) // len(columns))
    for start in range(0, len(rows), step):
        chunk = rows[start:start + step]
        yield head + ", ".join([one] * len(chunk)) + tail, [v for row in chunk for v in row]


def delete_rows(model: type[models.Model], column: str, value: Any) -> None:
    """``DELETE FROM`` the model's table ``WHERE column = value``, held with the batch inside
    ``batched_writes`` (the model must have no dependents a delete would cascade to, and
    no delete signals)."""
    q = connection.ops.quote_name
    _write(f"DELETE FROM {q(model._meta.db_table)} WHERE {q(column)} = %s", [value])
