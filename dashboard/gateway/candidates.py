"""The gateway rows of one identity, with their sessions and the policies those sessions
read, locked, in one statement built once; and the identity's own row, locked first.

Every chat completion starts here, so this is the gateway's hottest read. The ORM built
the same five-table ``select_related`` query again on each call, and that took three
times as long as the database took to answer it. This module builds the statement
once per database vendor from the models' metadata and makes the model instances from the
row with ``Model.from_db``, with each value converted by its field's database
converters, as the ORM converts them. The objects are linked through their public
descriptors, so ``gw.session.policy`` and ``gw.session.project.active_policy`` read
nothing more."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, models

from ..models import GatewayIdentity, GatewaySession, Project, Session, StoredPolicy


@dataclass(frozen=True)
class _Part:
    model: type[models.Model]
    alias: str
    fields: tuple[models.Field, ...]
    converters: tuple[tuple[Callable[..., Any], ...], ...]
    expressions: tuple[Any, ...]
    optional: bool  # from a LEFT JOIN: no row (None) when its id is NULL


# (model, alias, how it joins the ones before it; None: the table the query reads from)
_JOINS: tuple[tuple[type[models.Model], str, str | None], ...] = (
    (GatewaySession, "g", None),
    (Session, "s", "JOIN {table} s ON s.id = g.session_id"),
    (StoredPolicy, "sp", "LEFT JOIN {table} sp ON sp.id = s.policy_id"),
    (Project, "p", "JOIN {table} p ON p.id = s.project_id"),
    (StoredPolicy, "ap", "LEFT JOIN {table} ap ON ap.id = p.active_policy_id"),
)

_BUILT: dict[str, tuple[str, tuple[_Part, ...]]] = {}


def _statement() -> tuple[str, tuple[_Part, ...]]:
    if connection.vendor in _BUILT:
        return _BUILT[connection.vendor]
    q = connection.ops.quote_name
    parts, columns, sources = [], [], []
    for model, alias, join in _JOINS:
        fields = tuple(model._meta.concrete_fields)
        expressions = tuple(f.get_col(alias) for f in fields)
        converters = tuple(tuple(connection.ops.get_db_converters(e) + e.get_db_converters(connection))
                           for e in expressions)
        parts.append(_Part(model, alias, fields, converters, expressions, optional=bool(join and "LEFT" in join)))
        columns += [f"{alias}.{q(f.column)}" for f in fields]
        table = q(model._meta.db_table)
        sources.append(f"{table} {alias}" if join is None else join.format(table=table))
    sql = (f"SELECT {', '.join(columns)} FROM {' '.join(sources)} "
           f"WHERE g.{q('project_id')} = %s AND g.{q('identity')} = %s ORDER BY g.{q('id')} DESC LIMIT %s")
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF g, s"
    elif connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    _BUILT[connection.vendor] = (sql, tuple(parts))
    return _BUILT[connection.vendor]


def _instance(part: _Part, values: list[Any]) -> models.Model | None:
    if part.optional and values[0] is None:
        return None
    for i, converters in enumerate(part.converters):
        for convert in converters:
            values[i] = convert(values[i], part.expressions[i], connection)
    return part.model.from_db(connection.alias, [f.attname for f in part.fields], values)


def locked(project_id: int, identity: str, limit: int) -> list[GatewaySession]:
    """The newest ``limit`` gateway rows of ``identity`` in the project, newest first, each
    with ``session`` (its ``policy``, its ``project`` and that one's ``active_policy``)
    loaded; the gateway rows and their sessions are locked until the transaction ends
    (PostgreSQL; SQLite's transactions take the whole database's write lock as they start)."""
    sql, parts = _statement()
    with connection.cursor() as cursor:
        cursor.execute(sql, [project_id, identity, limit])
        rows = cursor.fetchall()
    out = []
    for row in rows:
        objects, at = [], 0
        for part in parts:
            objects.append(_instance(part, list(row[at:at + len(part.fields)])))
            at += len(part.fields)
        gw, session, policy, project, active = objects
        assert isinstance(gw, GatewaySession) and isinstance(session, Session) and isinstance(project, Project)
        project.active_policy = active  # type: ignore[assignment]
        session.project = project
        session.policy = policy  # type: ignore[assignment]
        gw.session = session
        out.append(gw)
    return out


def lock_identity(project_id: int, identity: str) -> None:
    """Hold the identity's row lock until the transaction ends, making the row first when
    the identity is new.

    Locking the sessions alone cannot serialise an identity's requests: before its first
    session exists there is nothing to lock, and a request waiting on the sessions' locks
    still reads the identity's sessions as they were when it started waiting, not the one
    the request ahead of it created. The identity's row is there for the first request
    (its unique constraint makes a concurrent insert wait for the first to commit, then do
    nothing), and a statement run after its lock is granted sees every committed session.
    On SQLite the row lock is the database's write lock, which the gateway's transaction
    takes as it starts (transaction_mode IMMEDIATE)."""
    q = connection.ops.quote_name
    # a plain statement: this runs on every call, and the ORM took longer to build it than
    # the database takes to answer it
    sql = (f"SELECT {q('id')} FROM {q(GatewayIdentity._meta.db_table)} "
           f"WHERE {q('project_id')} = %s AND {q('identity')} = %s")
    if connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, [project_id, identity])
        if cursor.fetchone() is not None:
            return
        GatewayIdentity.objects.bulk_create([GatewayIdentity(project_id=project_id, identity=identity)],
                                            ignore_conflicts=True)
        cursor.execute(sql, [project_id, identity])  # waits for a concurrent first request's commit, then holds the lock
