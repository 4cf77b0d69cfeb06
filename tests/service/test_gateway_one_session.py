"""One conversation, one session: identical calls that reach the gateway at the same moment
(an agent's retries after a timeout, a client's parallel loops) land in the session they
belong to, store their messages once and fork nothing.

8 copies of one request go out together over real HTTP (``tests.support.parallel_calls``)
to the live server, for chat completions and Anthropic messages, as the first call of a
conversation and as a continuing one, named by ``X-Session-Id`` and not named (then the
leading messages stand for the conversation). The upstream is the scripted server."""
from __future__ import annotations

import pytest

from dashboard.models import GatewaySession, Session, StoredMessage
from tests.service.test_gateway import gateway  # noqa: F401 - the live server fixture, reused
from tests.support import gateway_writes
from tests.support.llm_server import ok
from tests.support.parallel_calls import send_together

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
