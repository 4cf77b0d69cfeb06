"""How durable the gateway's own writes are.

A gateway client resends its whole history on every call. Whatever the gateway stored of
one call (the client's new messages, the upstream's reply) comes again in the next call's
body, and the gateway stores what it does not have. So its two transactions per call need
not wait for the database to flush its log to disk before the call goes on: on PostgreSQL
they commit asynchronously (``synchronous_commit = off`` for that transaction only), which
a database crash can undo for the last fraction of a second but never leaves half-written.
Under load, when many writers share the log's flush, that wait was most of a commit's cost.
Nothing else in the service commits this way."""
from __future__ import annotations

from django.db import connection


def relax_commit() -> None:
    """The current transaction's commit does not wait for the log flush (PostgreSQL; other
    databases commit as usual). Call it inside ``transaction.atomic()``."""
    if connection.vendor == "postgresql" and connection.in_atomic_block:
        with connection.cursor() as cur:
            cur.execute("SET LOCAL synchronous_commit TO OFF")
