"""Gateway sessions on the pages: titled by their first user message, the identity the client
gave beside the title, forks linked to the session they were forked from ("forked from #87
at message 12: ...") and listed under it. The sessions are made by the gateway's own
placement (``gateway.identity.place``), as a chat completion makes them."""
from __future__ import annotations

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard.gateway.body import ChatBody
from dashboard.gateway.identity import place
from dashboard.models import Session


def _place(project, messages: list[dict], name: str | None = "agent-7", **kw) -> int:
    return place(project, ChatBody(model="gpt-4o", messages=messages, **kw), name).session.pk


HISTORY = [{"role": "system", "content": "You plan releases."},
           {"role": "user", "content": "Plan the release of version 2\nwith the usual checks"},
           {"role": "assistant", "content": "Freeze on Monday, tag on Friday."},
           {"role": "user", "content": "Move the tag to Thursday."}]


def _text(html: str) -> str:
    """What a reader sees: tags dropped, white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" :", ":").replace(" ,", ",")


def _row(html: str, session_id: int) -> str:
    found = re.search(rf'<tr[^>]*data-session="{session_id}"[^>]*>.*?</tr>', html, re.S)
    assert found, f"no row for session {session_id}"
    return found.group(0)


def test_a_gateway_session_is_titled_by_its_first_user_message_with_its_identity_beside_it(web, project):
    sid = _place(project, HISTORY, user="bob", metadata={"team": "infra"})
    assert Session.objects.get(pk=sid).title == "Plan the release of version 2"
    row = _row(web.get(reverse("pages:sessions")).content.decode(), sid)
    assert "Plan the release of version 2" in row
    assert "X-Session-Id agent-7 · user bob" in _text(row)
    page = web.get(reverse("pages:session", args=[sid])).content.decode()
    line = _text(re.search(r'data-testid="gateway-line".*?</p>', page, re.S).group(0))
    assert "X-Session-Id agent-7 · user bob · team infra" in line
    assert "forked from" not in line


def test_a_fork_is_listed_under_its_parent_and_linked_to_it_at_the_changed_message(web, project):
    root = _place(project, HISTORY)
    edited = HISTORY[:3] + [{"role": "user", "content": "Move the tag to Wednesday."}]
    fork = _place(project, edited)
    again = _place(project, HISTORY[:3] + [{"role": "user", "content": "Cancel the release."}])
    assert len({root, fork, again}) == 3

    html = web.get(reverse("pages:sessions")).content.decode()
    fork_row = _row(html, fork)
    assert 'class="fork-row"' in fork_row and f'data-fork-of="{root}"' in fork_row
    assert f"forked from #{root} at message 3: message #3 was edited" in _text(fork_row)
    assert f'href="/sessions/{root}/?around=3#msg-3">message 3</a>' in fork_row, "the link opens the changed message"
    # grouped: the root's row, then its forks, before any other session's row
    order = [int(m) for m in re.findall(r'<tr[^>]*data-session="(\d+)"', html)]
    assert order.index(fork) == order.index(root) + 1 and order.index(again) == order.index(root) + 2
    assert 'data-fork-of' not in _row(html, root)

    page = web.get(reverse("pages:session", args=[fork])).content.decode()
    assert f"forked from #{root} at message 3: message #3 was edited" in _text(page)
    assert f'href="/sessions/{root}/?around=3#msg-3"' in page
    parent = web.get(reverse("pages:session", args=[root])).content.decode()
    assert f"Forks of this session: #{fork} at message 3, #{again} at message 3" in _text(parent)


def test_the_sessions_list_reads_forks_in_one_query_whatever_their_number(web, project):
    root = _place(project, HISTORY)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert web.get(reverse("pages:sessions")).status_code == 200
        return len(captured.captured_queries)

    _place(project, HISTORY[:3] + [{"role": "user", "content": "variant"}])
    queries()  # caches warmed
    one = queries()
    for i in range(6):
        _place(project, HISTORY[:3] + [{"role": "user", "content": f"variant {i}"}])
    assert queries() == one
    html = web.get(reverse("pages:sessions")).content.decode()
    assert len(re.findall(rf'data-fork-of="{root}"', html)) == 7
