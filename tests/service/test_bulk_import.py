"""Bulk import writes what one-by-one imports write, a chunk at a time, all or nothing per chunk."""
from __future__ import annotations

import pytest

from dashboard.models import Session, StoredMessage
from dashboard.services import Invalid
from dashboard.services.bulk_import import import_many
from dashboard.services.sessions import convert_payload, import_session
from tests.service.helpers import chat

# PostgreSQL pass: chunked bulk inserts (COPY on PostgreSQL), all or nothing per chunk
pytestmark = pytest.mark.postgres

COMPARED = ("message_count", "history_tokens", "context_tokens", "context_messages", "context_version",
            "tokens_since_summary", "messages_since_summary", "open_tool_calls", "tokenizer")


def test_bulk_imported_sessions_equal_sessions_imported_one_by_one(api, project):
    sources = [chat(3 + k, tag=f"s{k}") for k in range(5)]
    one = [import_session(project, convert_payload(m), auto_compact=False).session for m in sources]
    bulk = import_many(project, (convert_payload(m) for m in sources), chunk_size=2)
    assert bulk.sessions == 5 and bulk.messages == sum(len(m) for m in sources)
    for a, b_id in zip(one, bulk.session_ids):
        b = Session.objects.get(pk=b_id)
        assert {f: getattr(b, f) for f in COMPARED} == {f: getattr(a, f) for f in COMPARED}
        ctx_a = api.get(f"/api/sessions/{a.pk}/context").json()
        ctx_b = api.get(f"/api/sessions/{b_id}/context").json()
        assert ctx_b["messages"] == ctx_a["messages"] and ctx_b["tokens"] == ctx_a["tokens"]
        # and it takes appends like any session
        r = api.post(f"/api/sessions/{b_id}/messages", {"messages": [{"role": "user", "content": "more"}]})
        assert r.status_code == 201 and r.json()["positions"] == [a.message_count]


def test_a_chunk_with_a_bad_session_writes_nothing_of_that_chunk(project):
    good = [convert_payload(chat(2, tag=f"g{k}")) for k in range(2)]
    empty = convert_payload(chat(1))
    empty.messages = []
    with pytest.raises(Invalid, match=r"sessions\[3\]: messages"):
        import_many(project, good + [convert_payload(chat(2)), empty], chunk_size=2)
    # the first chunk stays, the second (with the empty session) is not written at all
    assert Session.objects.filter(project=project).count() == 2
    assert StoredMessage.objects.filter(session__project=project).count() == sum(len(g.messages) for g in good)
