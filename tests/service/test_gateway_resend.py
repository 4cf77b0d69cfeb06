"""A client resends its whole history on every call. The gateway recognises the part it
has seen before by the text of the message array (so it neither re-validates nor
re-digests it) and posts the live context to an OpenAI-compatible upstream itself. These
tests pin what that must never change: which session a request continues, what is stored,
what goes upstream, and how the upstream's failures reach the client. Requests go through
Django's test client as raw bytes (so the tests choose the exact serialisation), to the
scripted OpenAI-compatible server over real HTTP."""
from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection, transaction
from django.test import Client as DjangoClient

from dashboard.gateway import chat, identity
from dashboard.gateway.body import Hint, parse
from dashboard.models import GatewayCall, GatewaySession, StoredMessage
from tests.service import test_gateway
from tests.support.llm_server import empty, error, garbage, ok

# PostgreSQL pass: gateway continuation: FOR UPDATE OF, twin requests, relaxed commit (synchronous_commit)
pytestmark = pytest.mark.postgres

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream


def _post(key: str, messages: list[dict], session: str = "resend", **dumps) -> tuple[int, dict, dict]:
    body = json.dumps({"model": "gpt-4o", "messages": messages}, **dumps)
    r = DjangoClient().post("/v1/chat/completions", body, content_type="application/json",
                            HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_X_SESSION_ID=session)
    return r.status_code, json.loads(r.content), {k.lower(): v for k, v in r.items()}


def _history(n: int) -> list[dict]:
    out = [{"role": "system", "content": "You are a careful agent. 你好，世界。"}]
    for i in range(n):
        out += [{"role": "user", "content": f"question {i}: what is in module {i}?"},
                {"role": "assistant", "content": f"module {i} holds helper_{i} — ünïcödé {i}"}]
    return out


def _stored(sid: int) -> list[dict]:
    return list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii-json", "utf8-json"])
def test_a_resent_history_continues_its_session_whatever_the_spacing_and_an_edit_anywhere_forks(
        gateway, project, llm_server, ascii_only):
    key, dumps = project.test_key, {"ensure_ascii": ascii_only}
    history = _history(12) + [{"role": "user", "content": "start"}]
    llm_server.script(ok("a1"))
    status, answer, headers = _post(key, history, **dumps)
    assert status == 200
    sid = headers["x-compaction-session"]
    gw = GatewaySession.objects.get(session_id=sid)
    assert gw.raw_count == len(history), "the array it received is remembered"

    for i in range(3):  # byte-identical resends, each with the reply and one new message
        history += [answer["choices"][0]["message"], {"role": "user", "content": f"next {i}"}]
        llm_server.script(ok(f"a{i + 2}"))
        status, answer, headers = _post(key, history, **dumps)
        assert (status, headers["x-compaction-session"]) == (200, sid)
        assert "x-compaction-forked-from" not in headers
        assert llm_server.requests[-1].messages[-1]["content"] == f"next {i}"
        assert len(llm_server.requests[-1].messages) == len(history), "the whole live context went upstream"
    history.append(answer["choices"][0]["message"])
    assert [m.get("content") for m in _stored(int(sid))] == [m.get("content") for m in history]

    # The same history serialised with other spacing is the same history.
    history.append({"role": "user", "content": "spaced"})
    llm_server.script(ok("a5"))
    status, answer, headers = _post(key, history, indent=1, **dumps)
    assert (status, headers["x-compaction-session"]) == (200, sid)
    history.append(answer["choices"][0]["message"])
    stored = _stored(int(sid))
    assert len(stored) == len(history)

    # One character changed deep inside the part seen before: a new session, the stored one untouched.
    edited = [dict(m) for m in history] + [{"role": "user", "content": "after the edit"}]
    edited[3]["content"] = edited[3]["content"].replace("module 1", "module 7")
    llm_server.script(ok("forked"))
    status, _answer, headers = _post(key, edited, **dumps)
    assert status == 200 and headers["x-compaction-session"] != sid
    assert headers["x-compaction-forked-from"] == sid
    assert _stored(int(sid)) == stored
    assert _stored(int(headers["x-compaction-session"]))[3]["content"] == edited[3]["content"]


def test_a_bad_message_after_the_part_seen_before_is_a_400_naming_it_and_nothing_is_stored(gateway, project,
                                                                                           llm_server):
    key = project.test_key
    history = _history(5) + [{"role": "user", "content": "go"}]
    llm_server.script(ok("fine"))
    status, answer, headers = _post(key, history, session="bad-tail")
    sid = int(headers["x-compaction-session"])
    history.append(answer["choices"][0]["message"])
    before = _stored(sid)

    n = len(history)
    for bad, where in (({"role": "user", "content": "lone \ud800 surrogate"}, f"messages[{n}].content"),
                       ({"role": "wizard", "content": "x"}, f"messages[{n}]"),
                       ({"role": "tool", "tool_call_id": "nobody", "content": "x"}, "")):
        status, err, _headers = _post(key, history + [bad], session="bad-tail")
        assert status == 400, err
        assert where in err["error"]["message"]
        assert _stored(sid) == before
    assert len(llm_server.requests) == 1, "nothing bad went upstream"


def test_the_upstream_gets_the_operators_key_and_the_bare_model_never_the_clients_key(gateway, project, llm_server):
    llm_server.script(ok("hello"))
    status, _answer, _headers = _post(project.test_key, [{"role": "user", "content": "hi"}], session="keys")
    assert status == 200
    sent = llm_server.requests[-1]
    assert sent.headers.get("authorization") == "Bearer operator-upstream-key"
    assert project.test_key not in json.dumps(sent.headers) + sent.body.decode()
    assert sent.model == "gpt-4o"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_upstream_answer_that_is_not_a_completion_is_a_502_and_the_client_can_retry(gateway, project, llm_server,
                                                                                       stream):
    key = project.test_key
    history = [{"role": "user", "content": "hi"}]
    body = json.dumps({"model": "gpt-4o", "messages": history, "stream": stream})
    client = DjangoClient()
    llm_server.script(garbage())
    r = client.post("/v1/chat/completions", body, content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_X_SESSION_ID=f"garbage-{stream}")
    text = b"".join(r.streaming_content) if r.streaming else r.content
    if r.status_code == 200:  # a stream that had started: it ends with an error event, never a traceback
        assert b'"error"' in text and b"[DONE]" not in text
    else:
        assert r.status_code == 502 and json.loads(text)["error"]["type"] == "server_error"

    llm_server.script(error(503, "overloaded", retry_after=3))
    r = client.post("/v1/chat/completions", body, content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_X_SESSION_ID=f"garbage-{stream}")
    assert r.status_code == 503 and r["Retry-After"] == "3"
    assert json.loads(r.content)["error"]["message"] == "overloaded"

    llm_server.script(empty())
    r = client.post("/v1/chat/completions", body, content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_X_SESSION_ID=f"garbage-{stream}")
    assert r.status_code == 200
    if r.streaming:
        assert b"[DONE]" in b"".join(r.streaming_content)
    else:
        assert json.loads(r.content)["choices"][0]["message"]["content"] == ""
    sid = GatewaySession.objects.get(identity=f"id:garbage-{stream}").session_id
    assert [m["role"] for m in _stored(sid)] == ["user", "assistant"], "the message once, then the empty reply"


def test_a_message_that_is_not_an_object_is_a_400_for_every_kind_of_upstream(gateway, project, llm_server, settings):
    settings.COMPACTION_CONNECTIONS = [*settings.COMPACTION_CONNECTIONS, {
        "name": "claude", "models": ["anthropic/*"], "api_base": llm_server.api_base,
        "api_key_env": "CS_TEST_LLM_KEY", "allow_private_network": True}]
    for model in ("gpt-4o", "anthropic/claude-sonnet-4-5"):
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}, "not a message"]})
        r = DjangoClient().post("/v1/chat/completions", body, content_type="application/json",
                                HTTP_AUTHORIZATION=f"Bearer {project.test_key}", HTTP_X_SESSION_ID="shape")
        assert r.status_code == 400, (model, r.content)
        assert "messages[1]" in json.loads(r.content)["error"]["message"]
    assert not StoredMessage.objects.exists() and not llm_server.requests


def test_the_gateways_relaxed_commit_stays_inside_its_own_transactions(gateway, project, llm_server):
    """The gateway's writes commit without waiting for the log flush on PostgreSQL (the client
    resends what they hold); every other write of the same connection still waits for it."""
    llm_server.script(ok("one"), ok("two"))
    history = [{"role": "user", "content": "hello"}]
    status, answer, _headers = _post(project.test_key, history, session="durable")
    assert status == 200
    status, _answer, _headers = _post(project.test_key, history + [answer["choices"][0]["message"],
                                                                   {"role": "user", "content": "again"}],
                                      session="durable")
    assert status == 200
    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's; on SQLite every commit is as usual")
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SHOW synchronous_commit")
        assert cur.fetchone()[0] == "on"


def _answered(project, messages: list[dict], session: str):
    """A chat completion answered but whose response has not been closed yet: what the client
    holds while the gateway's write after the answer (``prep.after``) is still to run."""
    prep = chat.prepare(project, parse(json.dumps({"model": "gpt-4o", "messages": messages}).encode(), lazy=True),
                        session)
    return prep, chat.complete(prep)["choices"][0]["message"]


def test_the_reply_is_stored_after_the_answer_and_a_next_request_that_comes_first_stores_it_once(
        gateway, project, llm_server):
    key, history = project.test_key, _history(3) + [{"role": "user", "content": "go"}]
    llm_server.script(ok("first answer"))
    prep, reply = _answered(project, history, "late-write")
    sid = prep.session.pk
    assert len(_stored(sid)) == len(history), "the client's messages are stored before the call; the reply not yet"
    assert not GatewayCall.objects.filter(session_id=sid).exists()

    # The client's next call arrives before that write: it carries the reply, which it stores.
    history += [{k: v for k, v in reply.items() if v is not None}, {"role": "user", "content": "and then?"}]
    llm_server.script(ok("second answer"))
    status, answer, headers = _post(key, history, session="late-write")
    assert (status, int(headers["x-compaction-session"])) == (200, sid)
    assert llm_server.requests[-1].messages[-2]["content"] == "first answer"

    chat.store_after_sent(prep)  # the first response's close() comes last
    stored = _stored(sid)
    assert [m["content"] for m in stored] == [m["content"] for m in history] + ["second answer"], \
        "each answer is in the history once, where the client put it"
    gw = GatewaySession.objects.get(session_id=sid)
    assert gw.stored_count == len(stored)
    assert GatewayCall.objects.filter(session_id=sid, status_code=200).count() == 2, "both calls are recorded"


def test_a_twin_request_answered_twice_stores_one_reply(gateway, project, llm_server):
    """A client retrying a call it timed out on: both calls are answered, one reply is kept."""
    history = _history(2) + [{"role": "user", "content": "once"}]
    llm_server.script(ok("answer A"), ok("answer B"))
    first, _a = _answered(project, history, "twins")
    second, _b = _answered(project, history, "twins")
    assert first.session.pk == second.session.pk
    chat.store_after_sent(first)
    chat.store_after_sent(second)
    stored = _stored(first.session.pk)
    assert [m["content"] for m in stored[len(history):]] == ["answer A"], "no two answers in a row"
    assert GatewayCall.objects.filter(session_id=first.session.pk).count() == 2


def test_a_resend_is_parsed_without_decoding_what_the_stored_history_vouches_for(gateway, project, llm_server):
    history = _history(6) + [{"role": "user", "content": "first"}]
    llm_server.script(ok("a1"))
    status, answer, _headers = _post(project.test_key, history, session="lazy")
    assert status == 200
    seen = identity.hint(project.pk, "lazy")
    assert seen is not None and seen.count == len(history)
    assert identity.hint(project.pk, "another") is None and identity.hint(project.pk, None) is None

    resend = history + [answer["choices"][0]["message"], {"role": "user", "content": "second"}]
    text = json.dumps({"model": "gpt-4o", "messages": resend}).encode()
    body = parse(text, lazy=True, hint=seen)
    assert body.skipped is not None and "messages" not in body.__dict__, "the part seen before is not decoded"
    assert body.count == len(resend)
    assert [m["content"] for m in body.after(len(history))] == ["a1", "second"]
    assert body.messages == json.loads(text)["messages"], "reading the messages decodes all of them, in order"

    # Anything else decodes the whole array: an edit in the part seen before, other spacing.
    edited = [dict(m) for m in resend]
    edited[2]["content"] += " (edited)"
    for other in (json.dumps({"model": "gpt-4o", "messages": edited}),
                  json.dumps({"model": "gpt-4o", "messages": resend}, indent=1)):
        body = parse(other.encode(), lazy=True, hint=seen)
        assert body.skipped is None and body.messages == json.loads(other)["messages"]


@pytest.mark.parametrize("stale", ["shorter", "garbled"])
def test_a_hint_that_disagrees_with_the_stored_rows_costs_time_and_nothing_else(gateway, project, llm_server, stale):
    """The hint is this process's memory; the stored rows decide. A hint from an older request
    (as when another process served the newer ones) or a wrong one changes no outcome."""
    history = _history(4) + [{"role": "user", "content": "start"}]
    llm_server.script(ok("a1"), ok("a2"))
    status, answer, headers = _post(project.test_key, history, session="stale")
    sid = headers["x-compaction-session"]
    history += [answer["choices"][0]["message"], {"role": "user", "content": "next"}]
    prefix = json.dumps(history[:1])[:-1]  # "[" and the first message: the text of a one-message request
    digest = hashlib.sha256(prefix.encode()).hexdigest() if stale == "shorter" else "0" * 64
    identity._HINTS[(project.pk, "id:stale")] = Hint(1, len(prefix), digest)
    status, answer, headers = _post(project.test_key, history, session="stale")
    assert (status, headers["x-compaction-session"]) == (200, sid)
    assert "x-compaction-forked-from" not in headers
    history.append(answer["choices"][0]["message"])
    assert [m["content"] for m in _stored(int(sid))] == [m["content"] for m in history]
    assert llm_server.requests[-1].messages[-1]["content"] == "next"
