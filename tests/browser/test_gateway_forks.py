"""A conversation whose client changed its history shows as a fork linked to its parent, in a
real browser: the fork's page says "forked from #N at message M: <what changed>" and its
links open the parent at that message; the sessions list shows the fork under its parent,
with the identity the client gave beside the title. The sessions come from the real
``openai`` SDK through the live gateway (the scripted server as the upstream). The
screenshot it takes is docs/screenshots/gateway_fork.png (copy it from test-artifacts/docs/
after a UI change)."""
from __future__ import annotations

import openai
import pytest

from dashboard.services.keys import create_api_key
from tests.browser.conftest import ARTIFACTS, settle
from tests.support import gateway_writes
from tests.support.llm_server import ok, scripted_llm_server

pytestmark = pytest.mark.browser

DOCS = ARTIFACTS.parent / "docs"


def _conversation(oai: openai.OpenAI, server) -> tuple[int, int]:
    """(the session, its fork): a few turns, then the user edits an earlier question."""
    h = {"X-Session-Id": "release-planner"}
    history = [{"role": "system", "content": "You plan software releases."},
               {"role": "user", "content": "Plan the 2.0 release: freeze, tag, publish."}]
    for answer, follow_up in [("Freeze Monday, tag Thursday, publish Friday.", "Who signs the tag?"),
                              ("The release manager signs it.", "And the changelog?")]:
        server.script(ok(answer))
        raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, extra_headers=h,
                                                            user="maria")
        sid = int(raw.headers["x-compaction-session"])
        history += [{"role": "assistant", "content": answer}, {"role": "user", "content": follow_up}]
    server.script(ok("It is written from the merged pull requests."))
    oai.chat.completions.create(model="gpt-4o", messages=history, extra_headers=h, user="maria")
    edited = history[:3] + [{"role": "user", "content": "Who signs the tag, and with which key?"}]
    server.script(ok("The release manager, with the project key."))
    raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=edited, extra_headers=h, user="maria")
    assert raw.headers["x-compaction-forked-from"] == str(sid)
    return sid, int(raw.headers["x-compaction-session"])


def test_a_fork_links_to_its_parent_at_the_changed_message_and_is_listed_under_it(page, signed_in, console, project,
                                                                                  live_server, settings, monkeypatch):
    _row, key = create_api_key(project, "browser")
    gateway_writes.install(monkeypatch)
    with scripted_llm_server() as server:
        settings.GATEWAY_API_BASE = server.api_base
        settings.GATEWAY_API_KEY = "operator-key"
        oai = openai.OpenAI(base_url=live_server.url + "/v1", api_key=key, max_retries=0,
                            http_client=gateway_writes.http_client())
        parent, fork = _conversation(oai, server)

    page.goto(signed_in(f"/sessions/{fork}/"))
    settle(page)
    note = page.locator('[data-testid="gateway-line"] [data-testid="fork-note"]')
    assert " ".join(note.inner_text().split()) == f"forked from #{parent} at message 3: message #3 was edited"
    identity = " ".join(page.locator('[data-testid="gateway-line"] [data-testid="gateway-identity"]').inner_text().split())
    assert identity == "X-Session-Id release-planner · user maria"
    DOCS.mkdir(parents=True, exist_ok=True)
    box = page.locator('[data-testid="gateway-line"]').bounding_box()
    page.screenshot(path=str(DOCS / "gateway_fork.png"), clip={"x": 0, "y": 0, "width": 1280,
                                                               "height": box["y"] + box["height"] + 24})

    note.get_by_role("link", name="message 3").click()
    page.wait_for_url(f"**/sessions/{parent}/?around=3#msg-3")
    settle(page)
    assert page.locator("#msg-3").is_visible()
    assert "Forks of this session" in page.locator('[data-testid="forks"]').inner_text()

    page.goto(signed_in("/sessions/"))
    settle(page)
    rows = page.locator('[data-testid="sessions-table"] tbody tr')
    assert rows.count() == 2, "the fork is not a row of its own"
    assert rows.nth(0).get_attribute("data-session") == str(parent)
    assert rows.nth(1).get_attribute("data-fork-of") == str(parent)
    assert "Plan the 2.0 release" in rows.nth(0).inner_text() and "release-planner" in rows.nth(0).inner_text()
    assert f"forked from #{parent} at message 3" in " ".join(rows.nth(1).inner_text().split())
    page.screenshot(path=str(DOCS / "gateway_fork_list.png"), full_page=True)
    console.assert_clean()
