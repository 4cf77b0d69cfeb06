"""Writes whose commit need not wait for PostgreSQL to flush its log to disk.

Two kinds of writes qualify, and nothing else in the service commits this way:

- The gateway's two transactions per call. A gateway client resends its whole history on
  every call: whatever the gateway stored of one call (the client's new messages, the
  upstream's reply) comes again in the next call's body, and the gateway stores what it
  does not have.
- A run's progress and events while it executes. They are diagnostics: the run's outcome
  is written afterwards by a transaction that does wait, and PostgreSQL's log is flushed in
  order, so once the outcome is durable, everything the run wrote before it is too. A
  crash before that loses the last fraction of a second of progress, and the run is
  executed again anyway.

Such a commit can be undone by a database crash (the last fraction of a second) but is
never half-written. Under load, when many writers share the log's flush, that wait was
most of a commit's cost."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


def relax_commit() -> None:
    """The current transaction's commit does not wait for the log flush (PostgreSQL; other
    databases commit as usual). Call it inside ``transaction.atomic()``."""
    if connection.vendor == "postgresql" and connection.in_atomic_block:
        with connection.cursor() as cur:
            cur.execute("SET LOCAL synchronous_commit TO OFF")


@contextmanager
def relaxed_transaction() -> Iterator[None]:
    """``transaction.atomic()`` whose commit does not wait for the log flush, when it is the
    outermost transaction; inside another one it is a savepoint, and the outer
    transaction's commit stays as it is."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            relax_commit()
        yield
