"""Large imports: refused over IMPORT_MAX_MESSAGES before anything is written, and written a
chunk at a time with the same stored result as the whole session written at once. In the
PostgreSQL pass too: there the chunks go out through COPY."""
from __future__ import annotations

import json
import threading
import tracemalloc

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from compaction.formats import convert_many
from compaction.tokens import make_counter
from dashboard.models import Session, SessionContext, StoredArchiveEntry, StoredMessage
from dashboard.services.bulk_import import import_many
from dashboard.services.sessions import (
    ImportInvalid,
    convert_payload,
    import_request,
    import_session,
)
from tests.corpus import corpus_files, require_corpus
from tests.service.helpers import chat

pytestmark = pytest.mark.postgres


def jsonl(n: int) -> str:
    return "\n".join(json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"word{i}"})
                     for i in range(n))


def nothing_written(project) -> bool:
    return not Session.objects.filter(project=project).exists() and not StoredMessage.objects.filter(
        session__project=project).exists()


# -- the limit ----------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"w{i}"} for i in range(6)]},
    {"messages": jsonl(6), "format": "openai_jsonl"},
    {"messages": jsonl(6)},  # the format detected
], ids=["list", "jsonl", "detected-jsonl"])
def test_an_import_over_the_message_limit_is_a_413_naming_it_and_writes_nothing(api, project, settings, body):
    settings.IMPORT_MAX_MESSAGES = 5
    r = api.post("/api/sessions", body)
    assert r.status_code == 413, r.content
    detail = r.json()["detail"]
    assert "IMPORT_MAX_MESSAGES=5" in detail and "more than 5" in detail
    assert r.json()["fault"] == "too_many_messages" and r.json()["field"] == "messages"
    assert nothing_written(project)
    # the limit itself is admitted
    body = {**body, "messages": body["messages"][:5] if isinstance(body["messages"], list) else jsonl(5)}
    assert api.post("/api/sessions", body).status_code == 201


def test_jsonl_over_the_limit_is_refused_before_the_lines_past_it_are_read(project, settings):
    """Line 4 of 3 allowed is refused as such: the bad JSON on line 5 is never reached."""
    settings.IMPORT_MAX_MESSAGES = 3
    with pytest.raises(ImportInvalid) as err:
        import_request(project, jsonl(4) + "\n{not json", format="openai_jsonl")
    assert err.value.status == 413 and err.value.fault == "too_many_messages"
    assert nothing_written(project)


def test_the_import_command_says_the_limit_and_writes_nothing(project, settings, tmp_path, capsys):
    settings.IMPORT_MAX_MESSAGES = 5
    path = tmp_path / "long.jsonl"
    path.write_text(jsonl(6))
    with pytest.raises(CommandError):
        call_command("import_sessions", str(path), "--project", project.name, "--no-progress")
    assert "IMPORT_MAX_MESSAGES=5" in capsys.readouterr().err
    assert nothing_written(project)


# -- the same stored result, chunk by chunk ------------------------------------------------------------

MESSAGE_FIELDS = ("position", "role", "raw", "tool_call_id", "tool_names", "tokens", "tokens_by_category",
                  "content_hash", "filter_key")
SESSION_FIELDS = ("title", "external_id", "model", "metadata", "source_format", "tools", "tools_tokens",
                  "tokenizer", "message_count", "history_tokens", "history_total", "context_tokens",
                  "context_total", "context_messages", "context_version", "tokens_since_summary",
                  "messages_since_summary", "open_tool_calls")
ENTRY_FIELDS = ("entry_id", "kind", "note", "content_hash", "item_count", "size_chars")


def stored(session_id: int) -> dict:
    """Everything an import stores for a session, but ids and times, as the database holds it."""
    s = Session.objects.get(pk=session_id)
    ctx = SessionContext.objects.get(session_id=session_id)
    return {"session": {f: getattr(s, f) for f in SESSION_FIELDS},
            "messages": list(StoredMessage.objects.filter(session_id=session_id).order_by("position")
                             .values_list(*MESSAGE_FIELDS)),
            "context": (ctx.version, ctx.items, ctx.rendered),
            "archive": list(StoredArchiveEntry.objects.filter(session_id=session_id).order_by("pk")
                            .values_list(*ENTRY_FIELDS))}


def long_session() -> list[dict]:
    """Tool calls whose results come in the next chunk (chunks of 7), and tool results large
    enough to be truncated on arrival (archive entries)."""
    msgs = chat(12)  # a system prompt, then user, call, result, answer: results at 3, 7, 11, ...
    big = "\n".join(f"line {i}: " + "x" * 80 for i in range(3000))
    msgs[7]["content"] = big  # its call (6) in the chunk before
    msgs[27]["content"] = big  # its call (26) in the same chunk
    return msgs


def written_whole(project, imported) -> tuple[int, dict]:
    """What ``import_many`` (bulk_import: each session written whole, counted in one batch)
    stores for ``imported``, then rolled back, the next session id set back to its id: an
    archive reference names its session, so the session compared must have the same id."""
    with transaction.atomic():
        sid = import_many(project, [imported]).session_ids[0]
        expected = stored(sid)
        transaction.set_rollback(True)
    if connection.vendor == "postgresql":  # a sequence is not rolled back
        with connection.cursor() as cursor:
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, false)", [Session._meta.db_table, sid])
    return sid, expected


@pytest.mark.parametrize("chunk", [1, 3, 7, 10_000])
def test_a_session_written_chunk_by_chunk_is_stored_as_written_whole(project, chunk):
    """The import path writes ``chunk`` messages at a time: the rows, the context texts and
    the archive entries are those of the session written whole."""
    sid, expected = written_whole(project, convert_payload(long_session(), title="t"))
    assert expected["archive"], "the big tool results were truncated on arrival"
    got = import_session(project, convert_payload(long_session(), title="t"), auto_compact=False, chunk_size=chunk)
    assert got.session.pk == sid
    assert stored(sid) == expected


def test_jsonl_text_streamed_in_chunks_is_stored_as_the_parsed_list(project, settings):
    settings.IMPORT_CHUNK_MESSAGES = 4
    text = "\n".join(json.dumps(m) for m in long_session())
    listed = convert_many(text, format="openai_jsonl")[0]
    assert isinstance(listed.messages, list)
    sid, expected = written_whole(project, listed)
    r = import_request(project, text + "\n\n", format="openai_jsonl", auto_compact=False)
    assert r.session.pk == sid and stored(sid) == expected


def test_corpus_files_imported_chunk_by_chunk_are_stored_as_written_whole(project):
    require_corpus()
    paths = corpus_files()[:4]
    for path in paths:
        for imported in convert_many(path.read_bytes(), source=path.name):
            sid, expected = written_whole(project, imported)
            assert import_session(project, imported, auto_compact=False, chunk_size=5).session.pk == sid
            assert stored(sid) == expected, path.name


# -- bounded work -------------------------------------------------------------------------------------

def test_an_import_holds_one_chunk_of_messages_not_the_whole_session(project, settings):
    """Python memory an import allocates at its peak, for 1,000 and for 4,000 messages: what
    grows with the session is the context texts it writes (~0.25 kB a message here, held
    twice while they are joined: ~0.6 kB). Written whole, every message's dicts, counts and
    row objects were alive at once (~2.8 kB a message)."""
    settings.IMPORT_CHUNK_MESSAGES = 200
    import_request(project, jsonl(10), format="openai_jsonl", auto_compact=False)  # the tokenizer loaded

    def peak(n: int) -> int:
        text = jsonl(n).replace("word", f"w{n}x")
        tracemalloc.start()
        try:
            import_request(project, text, format="openai_jsonl", auto_compact=False)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(1000), peak(4000)
    per_message = (large - small) / 3000
    assert per_message < 1000, f"{per_message:.0f} bytes a message"


def test_counting_batch_after_batch_uses_the_same_few_threads():
    """tiktoken keeps a regex with its own cache for each thread that encodes (up to 128); a
    new thread pool per batch made a long import or a long-lived process grow by ~70 MB.
    The threads that encode are recorded by wrapping the encoder's method (the real
    encoding still runs)."""
    counter = make_counter("tiktoken", encoding="o200k_base")
    enc = counter._enc
    threads: set[threading.Thread] = set()
    real = type(enc).encode_ordinary

    def spy(text: str) -> list[int]:
        threads.add(threading.current_thread())
        return real(enc, text)

    enc.encode_ordinary = spy  # an instance attribute: only this test's calls pass through it
    try:
        for batch in range(20):
            counter.count_texts([f"batch {batch} text {i}" for i in range(16)])
    finally:
        del enc.encode_ordinary
    assert 1 <= len(threads) <= 4
