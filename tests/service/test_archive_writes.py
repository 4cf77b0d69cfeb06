"""A run's writes are batched: however many archive entries a write produces, they go to
the database in a fixed number of statements inside the write's one transaction; the
engine's events reach the run page in batches, all of them and in order."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction.archive import ArchivedItem, ArchiveEntry
from dashboard.models import ArchiveItem, RunEvent, Session, StoredArchiveEntry
from dashboard.services.archive import search_text, store_entries

# PostgreSQL pass: archive and event inserts: COPY and multi-row statements on PostgreSQL, statement counts
pytestmark = pytest.mark.postgres


def _inserts(queries, table: str) -> int:
    """Statements that insert rows into ``table`` (on PostgreSQL archive items and run
    events go in through COPY)."""
    return sum(1 for q in queries if q["sql"].lstrip().startswith((f'INSERT INTO "{table}"', f'COPY "{table}"')))


def _big_tool_rounds(n: int, chars: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix it."}]
    for i in range(n):
        cid = f"c{i}"
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "cat", "arguments": f'{{"path": "f{i}.py"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"output {i} " + "y" * chars})
        msgs.append({"role": "assistant", "content": f"Read f{i}.py."})
    return msgs


def test_an_import_that_offloads_many_tool_outputs_writes_its_archive_in_one_insert(api):
    connection.queries_log.clear()  # a full log (it keeps 9,000) would capture nothing
    with CaptureQueriesContext(connection) as q:
        r = api.post("/api/sessions", {"messages": _big_tool_rounds(30, chars=60_000), "auto_compact": False})
    queries = list(q.captured_queries)  # read before the next request resets the log
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    entries = StoredArchiveEntry.objects.filter(session_id=sid)
    assert entries.count() == 30 and ArchiveItem.objects.filter(entry__session_id=sid).count() == 30
    assert _inserts(queries, "dashboard_storedarchiveentry") == 1
    assert _inserts(queries, "dashboard_archiveitem") == 1


def test_a_compaction_writes_its_archive_entries_in_one_insert(api):
    # 50 rounds: clearing keeps the last 10, so about 40 results are cleared, one event each
    sid = api.post("/api/sessions", {"messages": _big_tool_rounds(50, chars=20_000),
                                     "auto_compact": False}).json()["session"]["id"]
    connection.queries_log.clear()  # a full log (it keeps 9,000) would capture nothing
    with CaptureQueriesContext(connection) as q:
        r = api.post(f"/api/sessions/{sid}/compactions", {})
    queries = list(q.captured_queries)  # read before the next request resets the log
    run = api.get(r.json()["status_url"]).json()
    assert run["status"] == "succeeded", run
    assert len(run["archive_refs"]) > 1
    assert _inserts(queries, "dashboard_storedarchiveentry") == 1
    # handing out the new entries' handles looked at the session's archive once, not per entry
    lookups = [x for x in queries if x["sql"].lstrip().startswith("SELECT")
               and 'FROM "dashboard_storedarchiveentry"' in x["sql"]]
    assert len(lookups) <= 3, [x["sql"][:120] for x in lookups]
    # every entry read back whole
    for ref in run["archive_refs"]:
        assert api.get(f"/api/archive/{ref}").status_code == 200


def test_a_run_with_many_engine_events_records_all_of_them_in_a_few_inserts(api):
    # 50 rounds: clearing keeps the last 10, so about 40 results are cleared, one event each
    sid = api.post("/api/sessions", {"messages": _big_tool_rounds(50, chars=20_000),
                                     "auto_compact": False}).json()["session"]["id"]
    connection.queries_log.clear()  # a full log (it keeps 9,000) would capture nothing
    with CaptureQueriesContext(connection) as q:
        r = api.post(f"/api/sessions/{sid}/compactions", {})
    queries = list(q.captured_queries)  # read before the next request resets the log
    run = api.get(r.json()["status_url"]).json()
    kinds = list(RunEvent.objects.filter(run_id=run["id"]).order_by("id").values_list("kind", flat=True))
    assert len(kinds) >= 40 and kinds[:2] == ["queued", "started"] and kinds[-1] == "succeeded"
    assert [e["kind"] for e in run["events"]] == kinds
    assert _inserts(queries, "dashboard_runevent") < len(kinds) / 5


def test_archived_text_reads_back_exactly_whatever_characters_it_holds(api):
    """Archive items are written through COPY on PostgreSQL, whose text format escapes
    backslashes, tabs and line ends: each must come back as it went in."""
    hostile = ("\\N \\ back\\slash \t tab \r\n crlf \n \"quoted\" 'single' \u00e9t\u00e9 \u4e2d\u6587 \U0001f600 "
               "{\"json\": [1, \"\\u0000\"]} \\x00 end")
    msgs = _big_tool_rounds(6, chars=20_000)
    tool = next(m for m in msgs if m["role"] == "tool")
    tool["content"] = hostile + tool["content"]
    sid = api.post("/api/sessions", {"messages": msgs, "auto_compact": False}).json()["session"]["id"]
    run = api.get(api.post(f"/api/sessions/{sid}/compactions", {}).json()["status_url"]).json()
    assert run["status"] == "succeeded", run
    stored = [item["message"] for ref in run["archive_refs"]
              for item in api.get(f"/api/archive/{ref}?limit=100").json()["items"]]
    assert tool in [{k: m.get(k) for k in tool} for m in stored]
    # the search text keeps them too (the raw JSON holds ASCII escapes only)
    assert any(hostile in t for t in ArchiveItem.objects.filter(entry__session_id=sid).values_list("text", flat=True))


def test_store_entries_stores_what_the_models_would_store(project):
    """store_entries prepares its values without model instances: each column holds what
    the fields prepare (bulk_create of the models), and size_chars is the engine's, for
    texts with non-ASCII characters and escapes as well."""
    session = Session.objects.create(project=project, title="archive rows")
    raws = [{"role": "tool", "tool_call_id": "c1", "content": "plain ascii"},
            {"role": "user", "content": "naïve 你好 \U0001f600", "name": "x"},
            {"role": "tool", "tool_call_id": "c2", "content": "back\\u00e9slash \u007f del \x01 ctl \n\t"},
            {"content": "astral \U0001f600 \\ud800 escaped", "role": "assistant", "z": [1, 2.5, None, True]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "cat", "arguments": "{\"path\": \"é\"}"}}]}]
    entries = [ArchiveEntry(f"e{k}", str(session.pk), "offloaded",
                            [ArchivedItem(f"m{k}{i}", i, raw, "c1" if i == 0 else None, "cat" if i else None)
                             for i, raw in enumerate(raws[k:])], note=f"note {k}")
               for k in range(3)]
    store_entries(entries, session=session)
    stored = {r.entry_id: r for r in StoredArchiveEntry.objects.filter(session=session)}
    for entry in entries:
        row = stored[entry.id]
        assert (row.project_id, row.run_id, row.kind, row.note, row.content_hash, row.item_count) == (
            project.pk, None, entry.kind, entry.note, entry.content_hash, len(entry.items))
        assert row.size_chars == entry.size_chars and row.engine_created_at == entry.created_at
        assert row.created_at is not None
        items = list(ArchiveItem.objects.filter(entry=row).order_by("index"))
        assert [(i.index, i.message_id, i.ordinal, i.tool_call_id, i.tool_name) for i in items] == [
            (k, a.message_id, a.ordinal, a.tool_call_id or "", a.tool_name or "") for k, a in enumerate(entry.items)]
        assert [i.text for i in items] == [search_text(a.raw) for a in entry.items]
    # the raw JSON text is the field's own encoding
    field = ArchiveItem._meta.get_field("raw")
    with connection.cursor() as cursor:
        cursor.execute("SELECT i.raw FROM dashboard_archiveitem i JOIN dashboard_storedarchiveentry e "
                       "ON e.id = i.entry_id WHERE e.session_id = %s ORDER BY e.entry_id, i.\"index\"", [session.pk])
        assert [t for (t,) in cursor.fetchall()] == [field.get_prep_value(a.raw) for e in entries for a in e.items]
