"""``POST /v1/responses`` with an input that resends the identity's last one: only the new
items are decoded and converted (``dashboard.gateway.responses_input``), and what is stored
is exactly what converting the whole input stores.

The real ``openai`` SDK against a live test server, the scripted upstream behind it. Which
path a request took is read by wrapping ``responses_input.resume`` (the real function is
called; the wrapper only notes its answer), since nothing a client sees may differ."""
from __future__ import annotations

import openai
import pytest

from dashboard.gateway import responses_input
from dashboard.models import GatewaySession, StoredMessage
from tests.service import test_gateway
from tests.service.test_gateway import sdk
from tests.support.llm_server import ok, tool_call

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

INSTRUCTIONS = "You are a careful coding agent."
TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]


@pytest.fixture
def paths(monkeypatch):
    """For each request, whether it took the short path (and how many messages it converted)."""
    seen: list[int | None] = []
    real = responses_input.resume

    def noted(project_id, header, req):
        found = real(project_id, header, req)
        seen.append(None if found is None else len(found.messages))
        return found

    monkeypatch.setattr(responses_input, "resume", noted)
    return seen


def _reply(turn: int):
    """The scripted model's answer at ``turn``: text, one call, two parallel calls, or text
    with a call."""
    kind = turn % 4
    if kind == 0:
        return ok(f"Summary so far, turn {turn}.")
    calls = [tool_call("read_file", {"path": f"src/m{turn}_{k}.py"}, f"call_{turn}_{k}") for k in range(1 + (kind == 2))]
    return ok("Let me read it." if kind == 3 else "", tool_calls=calls)


def _identity(name: str, fast: bool) -> dict:
    """The same identity two ways: by header (which keeps the hint) or by metadata (which does not)."""
    return {"extra_headers": {"X-Session-Id": name}} if fast else {"metadata": {"session_id": name}}


def _conversation(oai, llm_server, name: str, fast: bool, turns: int, edit_at: int | None = None) -> list[dict]:
    """A tool-using agent loop of ``turns`` requests, each resending the whole input with the
    new items; after turn 12's text answer the client asks again with nothing new, so the
    next input ends with that answer and the function call answering it joins that
    assistant turn (across what the last input held). ``edit_at``: that turn's
    input changes one character of the first user message (same length)."""
    items: list[dict] = [{"role": "user", "content": "Look at module 3 and tell me what it does."}]
    for turn in range(turns):
        sent = items
        if edit_at is not None and turn == edit_at:
            sent = [dict(items[0], content=items[0]["content"].replace("module 3", "module 4")), *items[1:]]
        llm_server.script(_reply(turn))
        out = oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS, input=sent,
                                   **_identity(name, fast))
        # as a reasoning model's answer comes: its reasoning item first (kept with the turn)
        reasoning = {"type": "reasoning", "id": f"rs_{turn}", "summary": [], "encrypted_content": f"enc-{turn}"}
        items = sent + [reasoning] + [o.model_dump(exclude_none=True) for o in out.output]
        calls = [o for o in out.output if o.type == "function_call"]
        for call in calls:
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": f"contents of {call.arguments}"})
        if not calls and turn != 12:
            items.append({"role": "user", "content": f"Go on ({turn})."})
    return items


def _stored(name: str) -> list[tuple[int, str, list]]:
    """Every session of the identity: (forked at, reason, its stored messages)."""
    return [(gw.forked_at, gw.fork_reason,
             list(StoredMessage.objects.filter(session_id=gw.session_id).order_by("position").values_list("raw", flat=True)))
            for gw in GatewaySession.objects.filter(identity=f"id:{name}").order_by("pk")]


def test_thirty_function_calling_turns_store_what_the_whole_conversion_stores(gateway, project, llm_server, paths):
    oai = sdk(gateway, project.test_key)
    _conversation(oai, llm_server, "short", fast=True, turns=30)
    sent_short = [r.json["messages"] for r in llm_server.requests]
    short = list(paths)
    paths.clear()
    _conversation(oai, llm_server, "whole", fast=False, turns=30)
    sent_whole = [r.json["messages"] for r in llm_server.requests[30:]]

    # the header's requests after the first converted only their new items (one message of
    # the last request's, kept apart since a function call may join it, and the new ones)
    assert short[0] is None and all(n is not None and n <= 4 for n in short[1:]), short
    assert paths == [None] * 30
    stored_short, stored_whole = _stored("short"), _stored("whole")
    assert [s[:2] for s in stored_short] == [s[:2] for s in stored_whole], [s[:2] for s in stored_short]
    assert sum(len(s[2]) for s in stored_short) > 90
    assert stored_short == stored_whole
    # the fork started a session from the client's whole input: each assistant turn stored
    # from it keeps its reasoning item (those stored from the upstream's replies came without)
    assert sum(1 for raw in stored_short[1][2] if raw.get("responses_reasoning")) >= 10
    assert sent_short == sent_whole
    # turn 13's function call joined the answer the input before it ended with, on both
    # paths: the stored reply changed there, so both forked at the same message, same reason
    assert len(stored_short) == 2 and "regenerated" in stored_short[1][1]


def test_a_prefix_one_byte_off_falls_back_to_the_whole_input(gateway, project, llm_server, paths):
    oai = sdk(gateway, project.test_key)
    items = _conversation(oai, llm_server, "off", fast=True, turns=6, edit_at=5)
    short = list(paths)
    paths.clear()
    _conversation(oai, llm_server, "off-whole", fast=False, turns=6, edit_at=5)

    assert short[0] is None and all(n is not None for n in short[1:5]) and short[5] is None, short
    stored = _stored("off")
    assert stored == _stored("off-whole")
    assert [s[:2] for s in stored] == [(None, ""), (1, "message #1 was edited")]
    assert stored[1][2][1]["content"].startswith("Look at module 4")

    # a bad new item on the short path is named by its place in the whole input
    assert responses_input.hint(project.pk, "off") is not None
    with pytest.raises(openai.BadRequestError) as bad:
        oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS,
                             input=[*items, {"type": "web_search_call", "id": "ws_1"}],
                             extra_headers={"X-Session-Id": "off"})
    assert bad.value.body["param"] == f"input[{len(items)}].type"
    assert "web_search_call" in bad.value.message


def test_a_long_run_keeps_one_input_per_identity_and_forgets_no_other(gateway, project, llm_server, paths,
                                                                      monkeypatch):
    """What this process keeps of an identity's last input is counted once, however many
    turns came before it: another agent's long run under a cap of a few inputs' size does
    not make it forget a conversation that is still going on."""
    monkeypatch.setattr(responses_input, "_SEEN", {})
    monkeypatch.setattr(responses_input, "_seen_chars", 0)
    monkeypatch.setattr(responses_input, "_SEEN_MAX_CHARS", 26_000)
    oai = sdk(gateway, project.test_key)
    other = _conversation(oai, llm_server, "other", fast=True, turns=3)
    _conversation(oai, llm_server, "long", fast=True, turns=16)
    paths.clear()
    llm_server.script(ok("Still here."))
    oai.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, tools=TOOLS, input=other,
                         extra_headers={"X-Session-Id": "other"})

    assert len(paths) == 1 and paths[0] is not None, "the other conversation's next input took the short path"
    kept = responses_input._SEEN[(project.pk, "id:long")]
    size = kept.hint.length + len(kept.head)
    assert 2 * size < 26_000 < sum(range(1, 17)) * size // 16  # the long run's inputs together are over the cap
