"""One conversation, one session: identical calls that reach the gateway at the same moment
(an agent's retries after a timeout, a client's parallel loops) land in the session they
belong to, store their messages once and fork nothing.

8 copies of one request go out together over real HTTP (``tests.support.parallel_calls``)
to the live server, for chat completions and Anthropic messages, as the first call of a
conversation and as a continuing one, named by ``X-Session-Id`` and not named (then the
leading messages stand for the conversation). The upstream is the scripted server."""
from __future__ import annotations

import threading

import httpx
import pytest

from dashboard.gateway import views
from dashboard.models import GatewaySession, Session, StoredMessage
from dashboard.selectors import overview as O
from tests.service import test_gateway
from tests.support import gateway_writes
from tests.support.llm_server import ok, slow, tool_call
from tests.support.parallel_calls import send_together

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream
sdk = test_gateway.sdk

# PostgreSQL pass: concurrent first and continuing calls of one identity (row locks, the identity's unique row)
pytestmark = pytest.mark.postgres

COPIES = 8
ANTHROPIC_MODEL = "claude-sonnet-4-6"


def _request(endpoint: str, key: str, messages: list[dict], named: str | None) -> tuple[str, dict, dict]:
    """(path, body, headers) of one call of ``endpoint`` carrying ``messages``."""
    headers = {"x-session-id": named} if named else {}
    if endpoint == "chat":
        return ("/v1/chat/completions", {"model": "gpt-4o", "messages": messages},
                {"authorization": f"Bearer {key}", **headers})
    return ("/v1/messages", {"model": ANTHROPIC_MODEL, "max_tokens": 200, "messages": messages},
            {"x-api-key": key, "anthropic-version": "2023-06-01", **headers})


def _reply_text(endpoint: str, answer) -> str:
    data = answer.json()
    if endpoint == "chat":
        return data["choices"][0]["message"]["content"]
    return "".join(block.get("text", "") for block in data["content"])


def _contents(session_id: int) -> list[str]:
    return [raw.get("content") for raw in StoredMessage.objects.filter(session_id=session_id)
            .order_by("position").values_list("raw", flat=True)]


def _only_session(project) -> int:
    """The one gateway session of the project (failing with what there is otherwise)."""
    rows = list(GatewaySession.objects.filter(project=project).values_list("session_id", "forked_from_id"))
    assert len(rows) == 1, f"expected one session, found {len(rows)}: (session, forked from) {rows}"
    assert Session.objects.filter(project=project).count() == 1
    return rows[0][0]


@pytest.mark.parametrize("named", [True, False], ids=["x-session-id", "unnamed"])
@pytest.mark.parametrize("endpoint", ["chat", "messages"])
def test_identical_first_calls_at_once_make_one_session(gateway, project, llm_server, endpoint, named):
    llm_server.script(*[ok("the one answer") for _ in range(COPIES)])
    messages = [{"role": "user", "content": f"first words of conversation {endpoint}-{named}"}]
    path, body, headers = _request(endpoint, project.test_key, messages, "agent-1" if named else None)

    answers = send_together(gateway.url + path, body, headers, copies=COPIES)
    gateway_writes.wait()

    assert [a.status for a in answers] == [200] * COPIES, [a.content[:200] for a in answers]
    assert all(_reply_text(endpoint, a) == "the one answer" for a in answers)
    sid = _only_session(project)
    assert {a.headers["x-compaction-session"] for a in answers} == {str(sid)}
    assert not any("x-compaction-forked-from" in a.headers for a in answers)
    assert _contents(sid) == [messages[0]["content"], "the one answer"], "the message and one reply, stored once"


@pytest.mark.parametrize("named", [True, False], ids=["x-session-id", "unnamed"])
@pytest.mark.parametrize("endpoint", ["chat", "messages"])
def test_identical_continuing_calls_at_once_stay_in_their_session(gateway, project, llm_server, endpoint, named):
    first = [{"role": "user", "content": f"open the conversation {endpoint}-{named}"}]
    path, body, headers = _request(endpoint, project.test_key, first, "agent-2" if named else None)
    llm_server.script(ok("first reply"))
    (opened,) = send_together(gateway.url + path, body, headers, copies=1)
    gateway_writes.wait()
    assert opened.status == 200, opened.content
    sid = int(opened.headers["x-compaction-session"])

    history = first + [{"role": "assistant", "content": "first reply"}, {"role": "user", "content": "and then?"}]
    path, body, headers = _request(endpoint, project.test_key, history, "agent-2" if named else None)
    llm_server.script(*[ok("second reply") for _ in range(COPIES)])
    answers = send_together(gateway.url + path, body, headers, copies=COPIES)
    gateway_writes.wait()

    assert [a.status for a in answers] == [200] * COPIES, [a.content[:200] for a in answers]
    assert _only_session(project) == sid
    assert {a.headers["x-compaction-session"] for a in answers} == {str(sid)}
    assert not any("x-compaction-forked-from" in a.headers for a in answers)
    assert _contents(sid) == [first[0]["content"], "first reply", "and then?", "second reply"]
    # every copy asked the model about the history as the client has it: never with a reply
    # another copy had stored after the last user message
    for sent in llm_server.requests[1:]:
        assert [m.get("content") for m in sent.messages] == [first[0]["content"], "first reply", "and then?"]


# -- one client, one call after another ------------------------------------------------------

def _sdk(gateway, project):
    return sdk(gateway, project.test_key)


def _call(oai, messages: list[dict], name: str, **kw):
    raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages,
                                                        extra_headers={"X-Session-Id": name}, **kw)
    return raw, {k.lower(): v for k, v in raw.headers.items()}


def test_a_retry_or_regenerate_after_the_reply_was_stored_stays_and_a_reply_kept_instead_forks(
        gateway, project, llm_server):
    oai = _sdk(gateway, project)
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "name a colour"}]
    llm_server.script(ok("red"), ok("blue"), ok("green"), ok("fine"))
    _raw, headers = _call(oai, history, "colours")
    sid = int(headers["x-compaction-session"])
    assert Session.objects.get(pk=sid).title == "name a colour", "titled by its first user message"

    # the same history again: a retry, or "regenerate" (the history without the last reply)
    for _ in range(2):
        raw, headers = _call(oai, history, "colours")
        assert int(headers["x-compaction-session"]) == sid and "x-compaction-forked-from" not in headers
        assert [m["content"] for m in llm_server.requests[-1].messages] == ["be brief", "name a colour"], \
            "the model is asked about the history as the client has it, without the reply stored before"
    assert _contents(sid) == ["be brief", "name a colour", "red"], "the first reply stays; nothing is added"

    # the client keeps the regenerated reply and goes on: the stored history changed at #2
    kept = raw.parse().choices[0].message.model_dump(exclude_none=True)
    raw, headers = _call(oai, history + [kept, {"role": "user", "content": "why?"}], "colours")
    fork = int(headers["x-compaction-session"])
    assert fork != sid and headers["x-compaction-forked-from"] == str(sid)
    assert "message #2 (the assistant's reply) was regenerated" in headers["x-compaction-notice"]
    gw = GatewaySession.objects.get(session_id=fork)
    assert (gw.forked_from_id, gw.forked_at, gw.fork_root_id) == (sid, 2, sid)
    assert gw.fork_reason == "message #2 (the assistant's reply) was regenerated"
    assert _contents(sid) == ["be brief", "name a colour", "red"], "the stored session is never rewritten"
    assert O.gateway_traffic(project).forks == 1


@pytest.mark.parametrize("change, reason, at", [
    ("edit", "message #1 was edited", 1),
    ("remove", "message #1 was removed", 1),
    ("remove-two", "messages #1 to #2 were removed", 1),
])
def test_a_fork_names_the_message_and_the_change(gateway, project, llm_server, change, reason, at):
    oai = _sdk(gateway, project)
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "one"}]
    llm_server.script(ok("r1"), ok("r2"), ok("r3"))
    _raw, headers = _call(oai, history, "changes")
    sid = int(headers["x-compaction-session"])
    history += [{"role": "assistant", "content": "r1"}, {"role": "user", "content": "two"}]
    _call(oai, history, "changes")
    changed = {"edit": history[:1] + [{"role": "user", "content": "ONE"}] + history[2:],
               "remove": history[:1] + history[2:],
               "remove-two": history[:1] + history[3:]}[change]
    _raw, headers = _call(oai, changed, "changes")
    assert headers["x-compaction-forked-from"] == str(sid)
    assert f"({reason})" in headers["x-compaction-notice"]
    gw = GatewaySession.objects.get(session_id=int(headers["x-compaction-session"]))
    assert (gw.forked_at, gw.fork_reason) == (at, reason)


def test_a_resend_of_an_earlier_point_stays_and_the_model_sees_the_history_cut_there(gateway, project, llm_server):
    """A straggler: the client has moved on two exchanges, and a copy of an older call arrives."""
    oai = _sdk(gateway, project)
    history = [{"role": "user", "content": "start"}]
    llm_server.script(*[ok(f"r{i}") for i in range(4)])
    _raw, headers = _call(oai, history, "straggler")
    sid = int(headers["x-compaction-session"])
    old = history + [{"role": "assistant", "content": "r0"}, {"role": "user", "content": "step 1"}]
    _call(oai, old, "straggler")
    newer = old + [{"role": "assistant", "content": "r1"}, {"role": "user", "content": "step 2"}]
    _call(oai, newer, "straggler")
    _raw, headers = _call(oai, old, "straggler")
    assert int(headers["x-compaction-session"]) == sid and "x-compaction-forked-from" not in headers
    assert [m["content"] for m in llm_server.requests[-1].messages] == ["start", "r0", "step 1"]
    assert _contents(sid) == ["start", "r0", "step 1", "r1", "step 2", "r2"]


@pytest.mark.parametrize("point", ["before-the-answer", "before-reading", "after-the-first-event"])
def test_a_stream_cancelled_at_any_point_then_resent_stays_in_its_session(gateway, project, llm_server, monkeypatch,
                                                                         point):
    ended = threading.Event()
    relay = views._sse

    def tracked(*args):  # instrumentation: when the cancelled answer's server side has ended
        try:
            yield from relay(*args)
        finally:
            ended.set()

    monkeypatch.setattr(views, "_sse", tracked)
    oai = _sdk(gateway, project)
    history = [{"role": "user", "content": "tell me a story"}]
    llm_server.script(ok("once"))
    _raw, headers = _call(oai, history, f"cancel-{point}")
    sid = int(headers["x-compaction-session"])

    history += [{"role": "assistant", "content": "once"}, {"role": "user", "content": "go on"}]
    llm_server.script(slow(1.0, "upon a time") if point == "before-the-answer" else ok("upon a time"))
    body = {"model": "gpt-4o", "messages": history, "stream": True}
    auth = {"authorization": f"Bearer {project.test_key}", "x-session-id": f"cancel-{point}"}
    with httpx.Client(timeout=0.3 if point == "before-the-answer" else 30) as client:
        try:
            with client.stream("POST", gateway.url + "/v1/chat/completions", json=body, headers=auth) as r:
                assert r.status_code == 200
                if point == "after-the-first-event":
                    next(r.iter_raw())
        except httpx.ReadTimeout:
            assert point == "before-the-answer"

    llm_server.script(ok("upon a time"))  # the model tells the same story again
    _raw, headers = _call(oai, history, f"cancel-{point}")
    assert int(headers["x-compaction-session"]) == sid and "x-compaction-forked-from" not in headers
    assert [m["content"] for m in llm_server.requests[-1].messages] == ["tell me a story", "once", "go on"]
    assert ended.wait(60), "the cancelled call's server side never ended"
    llm_server.script(ok("the end"))
    _raw, headers = _call(oai, history + [{"role": "assistant", "content": "upon a time"},
                                          {"role": "user", "content": "and then?"}], f"cancel-{point}")
    assert int(headers["x-compaction-session"]) == sid and "x-compaction-forked-from" not in headers
    assert _contents(sid) == ["tell me a story", "once", "go on", "upon a time", "and then?", "the end"]
    assert GatewaySession.objects.filter(project=project).count() == 1


def test_an_agent_that_retries_every_call_stays_one_session_through_compactions(gateway, project, llm_server):
    """Every call sent twice (the second time after the first one's reply was stored), over
    enough turns that the policy compacts: one session, no fork, and each retry's upstream
    context ends where the client's history ends, without the reply stored before it."""
    oai = _sdk(gateway, project)
    history: list[dict] = [{"role": "system", "content": "You are a careful coding agent."},
                           {"role": "user", "content": "Read every module of the project and summarise it."}]
    sid = None
    for i in range(24):
        call = tool_call("read_file", {"path": f"src/module_{i}.py"}, f"call_{i}")
        llm_server.script(ok("", tool_calls=[call]), ok("", tool_calls=[call]))
        for _attempt in range(2):
            raw, headers = _call(oai, history, "retrying-agent", tools=test_gateway.TOOLS)
            assert "x-compaction-forked-from" not in headers, headers.get("x-compaction-notice")
            sid = sid or int(headers["x-compaction-session"])
            assert int(headers["x-compaction-session"]) == sid
            sent = llm_server.requests[-1].messages
            assert sent[-1].get("content") == history[-1]["content"], "the context ends where the client's does"
        message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        history += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                              "content": test_gateway._tool_output(i)}]
    assert Session.objects.get(pk=sid).compaction_count >= 1, "the policy compacted along the way"
    assert GatewaySession.objects.filter(project=project).count() == 1
    assert len(_contents(sid)) == len(history) - 1, "each reply stored once"
    assert O.gateway_traffic(project).forks == 0
