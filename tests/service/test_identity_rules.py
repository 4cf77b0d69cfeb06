"""Which stored session a gateway request belongs to (``dashboard.gateway.identity``), on its
own, in seconds: requests are parsed from their bytes as the chat completions view parses
them (with the hint the previous request left) and placed with ``place``; replies are
stored with ``store_reply``, as the view does once the answer is sent. No server and no
upstream: test_gateway.py, test_gateway_resend.py and test_gateway_one_session.py show the
same through the HTTP endpoints. What is asserted is what a client or an operator sees: the
session a request lands in, what it stores, the fork's reason, the session's title and the
400 a bad identity gets."""
from __future__ import annotations

import json

import pytest

from compaction import Policy, get_preset
from dashboard.gateway import identity
from dashboard.gateway.body import ChatBody, parse
from dashboard.gateway.errors import GatewayError
from dashboard.gateway.identity import place, store_reply
from dashboard.models import (
    CompactionRun,
    GatewaySession,
    Project,
    Session,
    SessionContext,
    StoredMessage,
)
from dashboard.services.policies import activate_policy, create_policy

SYSTEM = {"role": "system", "content": "You keep the release notes."}
ASK = {"role": "user", "content": "Draft the notes for version 3\nwith the fixes"}
ANSWER = {"role": "assistant", "content": "Version 3 fixes the importer."}
MORE = {"role": "user", "content": "Add the dashboard fixes."}
ANSWER2 = {"role": "assistant", "content": "Added: the timeline scrolls."}
LAST = {"role": "user", "content": "Now the migration notes."}


@pytest.fixture(autouse=True)
def fresh_hints(monkeypatch):
    """The hints a process keeps outlive a test's database rows (the next test's project may
    have the same id): each test starts without any."""
    monkeypatch.setattr(identity, "_HINTS", {})


def _body(messages: list[dict], header: str | None, project=None, dumps: dict | None = None, **fields) -> ChatBody:
    data = json.dumps({"model": "gpt-4o", "messages": messages, **fields}, **(dumps or {})).encode()
    return parse(data, lazy=True, hint=identity.hint(project.pk, header) if project is not None else None)


def _send(project, messages: list[dict], header: str | None = "agent-7", dumps: dict | None = None, **fields):
    """One request as the view handles it: parsed with the hint, then placed."""
    return place(project, _body(messages, header, project, dumps, **fields), header)


def _answered(project, messages: list[dict], reply: dict, header: str | None = "agent-7", **fields):
    """A request and its reply stored, as a completed call leaves them."""
    placed = _send(project, messages, header, **fields)
    store_reply(placed.gateway.pk, reply, placed.policy, placed.at)
    return placed


def _stored(session_id: int) -> list[str]:
    return [m["content"] for m in StoredMessage.objects.filter(session_id=session_id).order_by("position")
            .values_list("raw", flat=True)]


def _bad(call, *args, status: int = 400, **kw) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        call(*args, **kw)
    assert caught.value.status == status
    return caught.value


# -- who is speaking ---------------------------------------------------------------------------

def test_the_header_names_the_conversation_before_metadata_and_user(project):
    first = _send(project, [SYSTEM, ASK], "  agent-7 ", metadata={"session_id": "meta-1"}, user="bob")
    gw = first.gateway
    assert (gw.identity, gw.identity_source, gw.client_user) == ("id:agent-7", "X-Session-Id", "bob")
    # the same name given as metadata.session_id is the same conversation
    second = _send(project, [SYSTEM, ASK, ANSWER, MORE], None, metadata={"session_id": "agent-7"})
    assert second.session.pk == first.session.pk and not second.created and second.added == 2
    assert GatewaySession.objects.get(pk=gw.pk).identity_source == "X-Session-Id"


def test_metadata_session_id_then_user_then_the_leading_messages_name_it(project):
    by_meta = _send(project, [SYSTEM, ASK], None, metadata={"session_id": " meta-1 "})
    assert (by_meta.gateway.identity, by_meta.gateway.identity_source) == ("id:meta-1", "metadata.session_id")
    assert by_meta.gateway.client_user == "", "no user was given"
    by_user = _send(project, [SYSTEM, ASK], " ", metadata={"session_id": "  "}, user=" bob ")
    assert (by_user.gateway.identity, by_user.gateway.identity_source) == ("user:bob", "user")
    # a user named like a header's name is not that conversation
    assert _send(project, [SYSTEM, ASK], None, user="meta-1").session.pk not in (by_meta.session.pk,
                                                                               by_user.session.pk)
    lead = _send(project, [SYSTEM, ASK], None)
    assert lead.gateway.identity.startswith("lead:") and lead.gateway.identity_source == "leading messages"
    assert len(lead.gateway.identity) == len("lead:") + 64
    assert lead.session.pk not in (by_meta.session.pk, by_user.session.pk)


def test_the_leading_messages_stand_for_an_unnamed_conversation(project):
    first = _answered(project, [SYSTEM, ASK], ANSWER, None)
    # the same system prompt and first user message: the same conversation, continued
    later = _send(project, [SYSTEM, ASK, ANSWER, MORE], None)
    assert later.session.pk == first.session.pk and later.added == 1
    # another first user message (or another system prompt): another conversation
    other = _send(project, [SYSTEM, {"role": "user", "content": "Draft the notes for version 4"}], None)
    assert other.created and other.forked_from is None
    prompt = _send(project, [{"role": "system", "content": "You review code."}, ASK], None)
    assert prompt.created and prompt.forked_from is None
    assert len({first.session.pk, other.session.pk, prompt.session.pk}) == 3


def test_a_name_of_500_characters_is_accepted_and_a_longer_one_is_a_400_naming_where_it_came_from(project):
    assert _send(project, [SYSTEM, ASK], "h" * 500).gateway.identity == "id:" + "h" * 500
    err = _bad(_send, project, [SYSTEM, ASK], "h" * 501)
    assert "X-Session-Id: at most 500 characters" in err.message and err.param is None
    err = _bad(_send, project, [SYSTEM, ASK], None, metadata={"session_id": "m" * 501})
    assert err.message.startswith("metadata.session_id: at most 500") and err.param == "metadata.session_id"
    err = _bad(_send, project, [SYSTEM, ASK], None, user="u" * 501)
    assert err.message.startswith("user: at most 500") and err.param == "user"
    # not valid text: a lone surrogate
    err = _bad(_send, project, [SYSTEM, ASK], None, user="bob\ud800")
    assert err.param == "user"
    assert not Session.objects.filter(project=project).exclude(pk__in=GatewaySession.objects.values("session")).exists()
    assert GatewaySession.objects.count() == 1


@pytest.mark.parametrize("bad", [{"role": "user", "content": 7}, "not an object", {"role": "narrator", "content": "x"}])
def test_a_bad_leading_message_is_a_400_naming_it_before_anything_is_stored(project, bad):
    err = _bad(_send, project, [SYSTEM, bad, ANSWER], None)
    assert err.param.startswith("messages[1]")
    assert not Session.objects.exists()


# -- titles ------------------------------------------------------------------------------------

def test_a_session_is_titled_by_its_first_user_message_or_else_by_its_identity(project):
    assert _send(project, [SYSTEM, ASK]).session.title == "Draft the notes for version 3"
    only_system = [{"role": "system", "content": "Start."}]
    named = _send(project, only_system, "n" * 120).session
    assert named.title == "gateway " + "n" * 80
    user = _send(project, only_system, None, user="carol").session
    assert user.title == "gateway carol"
    lead = _send(project, [{"role": "system", "content": "Begin."}], None)
    assert lead.session.title == "gateway " + lead.gateway.identity[5:17]


# -- continuing, resending and forking ---------------------------------------------------------

def test_a_request_that_extends_the_history_stores_only_its_new_messages(project):
    first = _send(project, [SYSTEM, ASK])
    assert first.created and first.added == 2 and first.at == 2
    second = _send(project, [SYSTEM, ASK, ANSWER, MORE])
    assert (second.session.pk, second.created, second.added, second.at) == (first.session.pk, False, 2, 4)
    assert _stored(first.session.pk) == [m["content"] for m in (SYSTEM, ASK, ANSWER, MORE)]
    gw = GatewaySession.objects.get(pk=first.gateway.pk)
    assert gw.stored_count == 4 and gw.raw_count == 4
    # the same request again stores nothing more
    again = _send(project, [SYSTEM, ASK, ANSWER, MORE])
    assert again.session.pk == first.session.pk and again.added == 0 and again.resent is None
    assert len(_stored(first.session.pk)) == 4


def test_a_history_continued_through_its_resent_text_can_be_continued_in_other_spacing(project):
    """The second request resends the first one's array byte for byte (the gateway trusts that
    text instead of digesting it again); what it stores must be the same as a full reading,
    so a third request in other spacing, which is read in full, still continues it."""
    history = [SYSTEM, ASK]
    placed = _answered(project, history, ANSWER)
    history = [SYSTEM, ASK, ANSWER, MORE]
    second = _answered(project, history, ANSWER2)
    assert second.session.pk == placed.session.pk and second.added == 1
    third = _send(project, [*history, ANSWER2, LAST], dumps={"indent": 1})
    assert third.session.pk == placed.session.pk and third.added == 1 and not third.created
    fourth = _send(project, [*history, ANSWER2, LAST, {"role": "assistant", "content": "ok"}, MORE])
    assert fourth.session.pk == placed.session.pk and fourth.added == 2
    assert len(_stored(placed.session.pk)) == 8


def test_a_trusted_prefix_longer_than_a_shorter_candidate_is_read_again_for_it(project):
    """Two sessions of one identity: the longer one's text is trusted first, then the request
    turns out to extend only the shorter one (a fork the client went back to)."""
    root = _answered(project, [SYSTEM, ASK], ANSWER)
    _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    fork = _answered(project, [SYSTEM, ASK, ANSWER, LAST], ANSWER2)
    assert fork.forked_from == root.session.pk and fork.created
    # continues the fork, whose history is shorter than neither
    cont = _send(project, [SYSTEM, ASK, ANSWER, LAST, ANSWER2, MORE])
    assert cont.session.pk == fork.session.pk and cont.added == 1
    # and now back to the root's line: the fork's text is trusted first, the root extended
    back = _send(project, [SYSTEM, ASK, ANSWER, MORE, ANSWER2, LAST])
    assert back.session.pk == root.session.pk and back.added == 1


def test_a_retry_after_the_reply_was_stored_resends_the_history_cut_before_the_reply(project):
    first = _answered(project, [SYSTEM, ASK], ANSWER)
    retry = _send(project, [SYSTEM, ASK])
    assert retry.session.pk == first.session.pk and retry.added == 0 and not retry.created
    assert retry.resent is not None and retry.resent.count == 2 and retry.at == 2
    assert "Version 3 fixes" not in retry.resent.text and "Draft the notes" in retry.resent.text
    assert len(_stored(first.session.pk)) == 3


def test_a_resend_whose_point_the_live_context_no_longer_has_forks_naming_what_was_removed(project):
    """A compaction can fold the resent point into a summary; a session without a live context
    has no such point either (how it is produced here)."""
    first = _answered(project, [SYSTEM, ASK], ANSWER)
    SessionContext.objects.filter(session_id=first.session.pk).delete()
    retry = _send(project, [SYSTEM, ASK])
    assert retry.created and retry.forked_from == first.session.pk
    assert retry.fork_reason == "messages #2 to #2 were removed"
    assert retry.gateway.forked_at == 2


def test_a_session_forked_at_a_resent_point_is_continued_though_the_older_ones_text_matches_longer(project):
    """The older session's last request text covers more of the request than the fork holds
    (the gateway trusts that text first); the request still continues the fork."""
    root = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    SessionContext.objects.filter(session_id=root.session.pk).delete()
    fork = _send(project, [SYSTEM, ASK])
    assert fork.created and fork.fork_reason == "messages #2 to #4 were removed"
    cont = _send(project, [SYSTEM, ASK, ANSWER, MORE, LAST])
    assert cont.session.pk == fork.session.pk and cont.added == 3 and not cont.created
    assert _stored(fork.session.pk)[-1] == LAST["content"]


def test_a_request_that_extends_two_stored_histories_continues_the_longer(project):
    """A fork made at a resent point holds the first messages of the session it came from; a
    request holding the whole older history continues the older session."""
    root = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    SessionContext.objects.filter(session_id=root.session.pk).delete()
    fork = _send(project, [SYSTEM, ASK])
    assert fork.created and fork.forked_from == root.session.pk
    cont = _send(project, [SYSTEM, ASK, ANSWER, MORE, ANSWER2, LAST])
    assert cont.session.pk == root.session.pk and cont.added == 1


def test_a_one_message_history_is_continued_only_by_a_request_starting_with_that_message(project):
    first = _send(project, [SYSTEM])
    assert first.created
    other = _send(project, [{"role": "system", "content": "You review code."}, ASK])
    assert other.created and other.forked_from == first.session.pk
    assert other.fork_reason == "message #0 was edited"
    same = _send(project, [SYSTEM, ASK])
    assert same.session.pk == first.session.pk and same.added == 1


def test_a_shorter_copy_of_the_history_resends_an_earlier_point(project):
    first = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    earlier = _send(project, [SYSTEM, ASK])
    assert earlier.session.pk == first.session.pk and earlier.added == 0 and earlier.resent is not None
    assert earlier.resent.count == 2 and earlier.at == 2


@pytest.mark.parametrize("change, reason, at", [
    (lambda h: [*h[:3], {"role": "user", "content": "Drop the fixes."}, h[4]], "message #3 was edited", 3),
    (lambda h: [*h[:4], {"role": "assistant", "content": "Another reply."}], "message #4 (the assistant's reply) "
                                                                             "was regenerated", 4),
    (lambda h: [*h[:2], h[3], h[4]], "message #2 was removed", 2),
    (lambda h: [*h[:1], h[4]], "messages #1 to #3 were removed", 1),
    (lambda h: [*h[:2], {"role": "assistant", "content": "Other."}], "message #2 (the assistant's reply) "
                                                                     "was regenerated", 2),
    (lambda h: [*h[:2], {"role": "user", "content": "Other."}], "message #2 was edited", 2),
    (lambda h: [*h[:2], h[3], h[4], LAST], "message #2 was removed", 2),
    (lambda h: [{"role": "system", "content": "You keep the changelog."}, *h[1:]], "message #0 was edited", 0),
], ids=["edit", "regenerate", "remove-one", "remove-three", "regenerate-short", "user-instead-of-reply",
        "remove-one-then-more", "system-prompt"])
def test_a_changed_history_forks_a_new_session_naming_the_message_and_the_change(project, change, reason, at):
    history = [SYSTEM, ASK, ANSWER, MORE, ANSWER2]
    root = _answered(project, history[:4], ANSWER2)
    fork = _send(project, change(history))
    assert fork.created and fork.forked_from == root.session.pk and fork.fork_reason == reason
    gw = GatewaySession.objects.get(pk=fork.gateway.pk)
    assert (gw.forked_from_id, gw.forked_at, gw.fork_reason, gw.fork_root_id) == (root.session.pk, at, reason,
                                                                                  root.session.pk)
    assert _stored(fork.session.pk) == [m["content"] for m in change(history)]
    assert _stored(root.session.pk) == [m["content"] for m in history], "a stored session is never rewritten"


def test_a_removal_is_found_where_the_history_goes_on_even_when_a_message_repeats(project):
    """An agent that says "go on" twice: the request drops the first reply, and what follows
    is found after the removed message, not at the earlier copy of "go on"."""
    go, done = {"role": "user", "content": "go on"}, {"role": "assistant", "content": "done"}
    root = _answered(project, [SYSTEM, go, done, go], done)
    fork = _send(project, [SYSTEM, go, go, done])
    assert fork.forked_from == root.session.pk and fork.fork_reason == "message #2 was removed"


def test_a_second_change_at_the_same_message_forks_from_the_session_that_had_it_first(project):
    root = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    fork = _answered(project, [SYSTEM, ASK, ANSWER, {"role": "user", "content": "v2"}], ANSWER2)
    assert fork.forked_from == root.session.pk
    # later than the fork's change, in the fork's own history: from the fork, in the root's tree
    later = _send(project, [SYSTEM, ASK, ANSWER, {"role": "user", "content": "v2"},
                            {"role": "assistant", "content": "Other."}])
    assert later.forked_from == fork.session.pk and later.fork_reason.startswith("message #4")
    assert later.gateway.fork_root_id == root.session.pk
    # the fork's message changed again: from the root, through the fork of the fork
    again = _send(project, [SYSTEM, ASK, ANSWER, {"role": "user", "content": "v3"}])
    assert again.forked_from == root.session.pk and again.gateway.forked_at == 3
    # earlier than the fork's change: from the root too
    earlier = _send(project, [SYSTEM, ASK, {"role": "assistant", "content": "Other."}])
    assert earlier.forked_from == root.session.pk and earlier.gateway.forked_at == 2


def test_a_shorter_copy_of_a_forks_history_resends_the_fork_not_its_parent(project):
    """Both the fork and the session it was forked from hold the request's messages: the
    client is resending the fork, its latest session."""
    root = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    fork = _answered(project, [SYSTEM, ASK, ANSWER, LAST], ANSWER2)
    assert fork.forked_from == root.session.pk
    resent = _send(project, [SYSTEM, ASK])
    assert resent.session.pk == fork.session.pk and resent.resent is not None and not resent.created


def test_a_fork_of_a_fork_that_changes_an_earlier_message_than_its_parent_did_forks_from_the_parent(project):
    """The latest session is a fork at message #3 of a fork at message #1: a request changing
    message #2 leaves the fork at #2, later than its parent's change, so it forks from it."""
    root = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    edited_ask = {"role": "user", "content": "Draft the notes for version 3 quickly"}
    first_fork = _answered(project, [SYSTEM, edited_ask, ANSWER, MORE], ANSWER2, header="agent-7")
    assert first_fork.forked_from == root.session.pk and first_fork.gateway.forked_at == 1
    second_fork = _answered(project, [SYSTEM, edited_ask, ANSWER, LAST], ANSWER2)
    assert second_fork.forked_from == first_fork.session.pk and second_fork.gateway.forked_at == 3
    third = _send(project, [SYSTEM, edited_ask, {"role": "assistant", "content": "Other."}])
    assert third.forked_from == first_fork.session.pk and third.gateway.forked_at == 2
    assert third.gateway.fork_root_id == root.session.pk


def test_the_clients_user_is_kept_to_500_characters_beside_a_named_session(project):
    named = _send(project, [SYSTEM, ASK], "long", user="u" * 700)
    assert named.gateway.client_user == "u" * 500
    assert GatewaySession.objects.get(pk=named.gateway.pk).client_user == "u" * 500


def test_the_requests_metadata_is_kept_on_the_session_it_starts(project):
    placed = _send(project, [SYSTEM, ASK], metadata={"team": "infra"})
    assert Session.objects.get(pk=placed.session.pk).metadata.get("metadata") == {"team": "infra"}
    bare = _send(project, [SYSTEM, ASK], "bare")
    assert "metadata" not in (Session.objects.get(pk=bare.session.pk).metadata or {})


def test_a_new_session_keeps_the_requests_model_tools_and_format(project):
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object",
                                                                                 "properties": {}}}}]
    placed = _send(project, [SYSTEM, ASK], tools=tools)
    session = Session.objects.get(pk=placed.session.pk)
    assert (session.model, session.source_format) == ("gpt-4o", "openai")
    assert [t["function"]["name"] for t in session.tools] == ["read_file"]
    bare = Session.objects.get(pk=_send(project, [SYSTEM, ASK], "no-tools").session.pk)
    assert not bare.tools


def test_what_the_store_refuses_keeps_its_status_names_the_field_and_nothing_is_stored(project, settings):
    settings.IMPORT_MAX_MESSAGES = 3
    err = _bad(_send, project, [SYSTEM, ASK, ANSWER, MORE], status=413)  # as the REST API answers it
    assert err.param == "messages" and "IMPORT_MAX_MESSAGES=3" in err.message
    assert not Session.objects.exists() and not GatewaySession.objects.exists()


def test_a_tool_result_answering_no_call_is_a_400_and_nothing_is_stored(project):
    orphan = {"role": "tool", "tool_call_id": "call_9", "content": "42"}
    err = _bad(_send, project, [SYSTEM, ASK, orphan])
    assert err.message == "messages: message 2: orphan tool result: tool_call_id 'call_9' matches no earlier tool call"
    assert err.param is None
    assert not Session.objects.exists() and not GatewaySession.objects.exists()


def test_a_request_for_a_project_deleted_meanwhile_is_refused_as_its_key_would_be(project):
    """The key's project is read from a cache that may outlive the project."""
    gone = Project(pk=project.pk + 1000, name="gone")
    with pytest.raises(GatewayError) as caught:
        _send(gone, [SYSTEM, ASK])
    assert caught.value.status == 401 and "no longer exists" in caught.value.message
    assert not Session.objects.exists()


# -- the reply -------------------------------------------------------------------------------

def test_the_reply_is_stored_where_its_request_left_the_history_and_only_there(project):
    placed = _send(project, [SYSTEM, ASK])
    done = []
    session = store_reply(placed.gateway.pk, ANSWER, placed.policy, placed.at, then=lambda: done.append(1))
    assert session is not None and session.pk == placed.session.pk and done == [1]
    assert _stored(placed.session.pk)[-1] == ANSWER["content"]
    # the history has moved past that point: a second reply for it is not appended
    assert store_reply(placed.gateway.pk, ANSWER2, placed.policy, placed.at, then=lambda: done.append(2)) is None
    assert done == [1, 2] and len(_stored(placed.session.pk)) == 3
    # the stored reply counts as the history's last message: the next request continues it,
    # and a retry of the first request resends it
    assert _send(project, [SYSTEM, ASK, ANSWER, MORE]).added == 1


def test_a_retry_of_a_request_whose_reply_was_stored_is_recognised_without_reading_the_history(project):
    placed = _answered(project, [SYSTEM, ASK, ANSWER, MORE], ANSWER2)
    gw = GatewaySession.objects.get(pk=placed.gateway.pk)
    assert gw.stored_count == 5
    retry = _send(project, [SYSTEM, ASK, ANSWER, MORE])
    assert retry.session.pk == placed.session.pk and retry.resent is not None and retry.resent.count == 4


def test_a_reply_that_brings_the_session_to_its_trigger_queues_a_compaction(project):
    """The next request then finds its context compacted (or being compacted)."""
    policy = get_preset("default").to_json()
    policy["trigger"] = {"kind": "messages", "threshold": 2}
    activate_policy(project, create_policy(project, "two messages", Policy.load(policy)))
    placed = _send(project, [SYSTEM, ASK])
    assert not CompactionRun.objects.exists()
    store_reply(placed.gateway.pk, ANSWER, placed.policy, placed.at)
    run = CompactionRun.objects.get(session_id=placed.session.pk)
    assert run.trigger == "auto" and not run.force


def test_placing_a_request_queues_no_compaction_even_past_the_trigger(project):
    """The gateway compacts before the call goes upstream (chat.before_call), in the request;
    a run queued by storing the request's messages would compact the same context twice."""
    policy = get_preset("default").to_json()
    policy["trigger"] = {"kind": "messages", "threshold": 2}
    activate_policy(project, create_policy(project, "two messages", Policy.load(policy)))
    placed = _send(project, [SYSTEM, ASK, ANSWER])
    extended = _send(project, [SYSTEM, ASK, ANSWER, MORE, ANSWER2, LAST])
    assert extended.session.pk == placed.session.pk and extended.added == 3
    assert not CompactionRun.objects.exists()


# -- the hint --------------------------------------------------------------------------------

def test_a_named_request_leaves_a_hint_for_its_identitys_next_request(project):
    placed = _send(project, [SYSTEM, ASK], " agent-7 ")
    text = json.dumps([SYSTEM, ASK])
    seen = identity.hint(project.pk, "agent-7 ")
    assert seen is not None and (seen.count, seen.length) == (2, len(text) - 1)  # from the [ to the last }
    assert identity.hint(project.pk, "agent-8") is None and identity.hint(project.pk, None) is None
    assert identity.hint(project.pk, "  ") is None
    assert identity.hint(project.pk + 1, "agent-7") is None
    gw = GatewaySession.objects.get(pk=placed.gateway.pk)
    assert (gw.raw_count, gw.raw_length, gw.raw_digest) == (seen.count, seen.length, seen.digest)
    # a conversation named otherwise leaves none (only the header is known before parsing)
    _send(project, [SYSTEM, ASK], None, metadata={"session_id": "meta-hint"})
    assert identity.hint(project.pk, "meta-hint") is None


def test_a_body_placed_without_its_text_remembers_no_text(project):
    placed = place(project, ChatBody(model="gpt-4o", messages=[SYSTEM, ASK]), "no-text")
    gw = GatewaySession.objects.get(pk=placed.gateway.pk)
    assert (gw.raw_count, gw.raw_length, gw.raw_digest, gw.raw_chain) == (0, 0, "", "")
    assert identity.hint(project.pk, "no-text") is None
    # and its next request is still placed against the stored history
    assert _send(project, [SYSTEM, ASK, ANSWER, MORE], "no-text").added == 2


def test_the_hint_table_is_bounded(project, monkeypatch):
    monkeypatch.setattr(identity, "_HINTS_MAX", 2)
    for name in ("a", "b", "c"):
        _send(project, [SYSTEM, ASK], name)
        assert len(identity._HINTS) <= 2
    assert identity.hint(project.pk, "c") is not None
