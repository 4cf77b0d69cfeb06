"""The plain-statement writes the hot paths use (``services.common.insert_row``,
``update_row``, ``batched_writes``) store what ``save()`` stores, and fail where it fails."""
from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from dashboard.models import Session, StoredMessage
from dashboard.services.common import batched_writes, insert_row, insert_rows, lock_row, update_row

# PostgreSQL pass: plain-statement inserts/updates, batched writes and lock_row: one round trip and FOR UPDATE on PostgreSQL
pytestmark = pytest.mark.postgres


@pytest.fixture
def session(project):
    return Session.objects.create(project=project, title="rows")


def test_insert_row_stores_what_save_would(session):
    raw = {"role": "user", "content": "naïve 你好 \U0001f600", "name": "x"}
    insert_row(StoredMessage(session=session, position=0, role="user", raw=raw, tokens=7,
                             tokens_by_category={"user": 7}, content_hash="h" * 64))
    StoredMessage(session=session, position=1, role="user", raw=raw, tokens=7,
                  tokens_by_category={"user": 7}, content_hash="h" * 64).save()
    first, second = StoredMessage.objects.filter(session=session).order_by("position")
    for field in ("role", "raw", "tokens", "tokens_by_category", "content_hash", "filter_key", "tool_call_id"):
        assert getattr(first, field) == getattr(second, field), field
    assert first.raw == raw and first.created_at is not None, "auto_now_add is stamped as save() stamps it"


def test_insert_row_keeps_the_tables_constraints(session):
    row = {"session": session, "position": 0, "role": "user", "raw": {"role": "user", "content": "a"},
           "tokens": 1, "content_hash": "h" * 64}
    insert_row(StoredMessage(**row))
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_row(StoredMessage(**row))
    assert StoredMessage.objects.filter(session=session).count() == 1


def test_update_row_writes_only_the_named_fields_and_refuses_a_row_that_is_gone(session):
    stale = Session.objects.get(pk=session.pk)
    Session.objects.filter(pk=session.pk).update(title="renamed elsewhere")
    before = Session.objects.get(pk=session.pk).updated_at
    stale.message_count, stale.history_tokens, stale.title = 3, {"user": 5, "total": 5}, "stale title"
    update_row(stale, ["message_count", "history_tokens", "updated_at"])
    fresh = Session.objects.get(pk=session.pk)
    assert (fresh.message_count, fresh.history_tokens) == (3, {"user": 5, "total": 5})
    assert fresh.title == "renamed elsewhere", "a field not named is left as the database has it"
    assert fresh.updated_at > before, "auto_now is stamped as save() stamps it"

    Session.objects.filter(pk=session.pk).delete()
    with pytest.raises(DatabaseError, match="gone"):
        update_row(stale, ["message_count"])


def _message(session, position: int, content: str = "a") -> StoredMessage:
    return StoredMessage(session=session, position=position, role="user", raw={"role": "user", "content": content},
                         tokens=1, content_hash="h" * 64)


def test_batched_writes_land_together_when_the_block_ends(session, django_assert_max_num_queries):
    with transaction.atomic():
        with django_assert_max_num_queries(1 if connection.vendor == "postgresql" else 4), batched_writes():
            insert_row(_message(session, 0, "one"))
            insert_rows(StoredMessage, [_message(session, 1, "two"), _message(session, 2, "three 'quoted'")])
            session.message_count = 3
            update_row(session, ["message_count"])
    assert [m.raw["content"] for m in StoredMessage.objects.filter(session=session).order_by("position")] == [
        "one", "two", "three 'quoted'"]
    assert Session.objects.get(pk=session.pk).message_count == 3


def test_a_batch_that_fails_writes_nothing(session):
    with pytest.raises(DatabaseError, match="gone"), transaction.atomic(), batched_writes():
        insert_row(_message(session, 0))
        update_row(Session(pk=session.pk + 1000), ["message_count"])  # no such row
    with pytest.raises(IntegrityError), transaction.atomic(), batched_writes():
        insert_row(_message(session, 0))
        insert_row(_message(session, 0))  # the same position twice
    with pytest.raises(RuntimeError), transaction.atomic(), batched_writes():
        insert_row(_message(session, 0))
        raise RuntimeError("the block fails before its end")
    assert not StoredMessage.objects.filter(session=session).exists()


def test_lock_row_reads_the_row_as_a_query_reads_it(session):
    Session.objects.filter(pk=session.pk).update(tools=[{"type": "function", "function": {"name": "cat"}}],
                                                  context_tokens={"user": 3, "total": 3}, active_run_id=7,
                                                  last_message_at=session.created_at)
    with transaction.atomic():
        locked = lock_row(Session, session.pk)
        assert lock_row(Session, session.pk + 1000) is None
    expected = Session.objects.get(pk=session.pk)
    assert isinstance(locked, Session) and not locked._state.adding
    for field in Session._meta.concrete_fields:
        assert getattr(locked, field.attname) == getattr(expected, field.attname), field.name
