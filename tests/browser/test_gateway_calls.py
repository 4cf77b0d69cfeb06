"""A session an agent built through the gateway (the real ``openai`` SDK against the live
server, the scripted OpenAI-compatible server as the upstream) shows its Calls table and
cost in a real browser, with no console error; the htmx "older calls" link pages. A call
opens from its row on its inspector page, whose download is byte for byte a body the
upstream received. The screenshots it takes are docs/screenshots/gateway_calls.png and
gateway_call.png (copy them from test-artifacts/docs/ after a UI change)."""
from __future__ import annotations

import openai
import pytest

from dashboard.models import CompactionRun, GatewayCall
from dashboard.services.keys import create_api_key
from tests.browser.conftest import ARTIFACTS, settle
from tests.support import gateway_writes
from tests.support.llm_server import error, ok, scripted_llm_server, tool_call

pytestmark = pytest.mark.browser

DOCS = ARTIFACTS.parent / "docs"
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}}}}}]


def _as_items(history: list[dict]) -> list[dict]:
    """The chat history as Responses items (what a Responses client keeps)."""
    items: list[dict] = []
    for m in history:
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            continue
        if m.get("content"):
            items.append({"type": "message", "role": m["role"], "content": m["content"]})
        items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                   "arguments": c["function"]["arguments"]} for c in m.get("tool_calls") or []]
    return items


def _agent(oai: openai.OpenAI, server, turns: int) -> tuple[list[dict], int]:
    h = {"X-Session-Id": "browser-agent"}
    history: list[dict] = [{"role": "system", "content": "You are a careful coding agent."},
                           {"role": "user", "content": "Read every module and summarise the billing code."}]
    sid = 0
    for i in range(turns):
        # The scripted provider counts the prompt it got at 4 characters a token.
        server.script(ok("", tool_calls=[tool_call("read_file", {"path": f"billing/mod_{i}.py"}, f"call_{i}")]))
        raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, tools=TOOLS,
                                                            extra_headers=h)
        sid = int(raw.headers["x-compaction-session"])
        message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        history += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                              "content": "\n".join(f"def charge_{i}_{k}(amount): return amount * {k}" for k in range(45))}]
    server.script(error(429, "rate limited, try again", retry_after=1))
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS, extra_headers=h)
    compacted = oai.responses.with_raw_response.compact(model="gpt-4o", input=_as_items(history), extra_headers=h)
    assert int(compacted.headers["x-compaction-session"]) == sid, "the compaction continued the same session"
    return history, sid


def test_the_calls_table_of_a_gateway_session_renders_and_pages(page, signed_in, console, project, live_server,
                                                                settings, monkeypatch):
    _row, key = create_api_key(project, "browser")
    gateway_writes.install(monkeypatch)
    with scripted_llm_server() as server:
        settings.GATEWAY_API_BASE = server.api_base
        settings.GATEWAY_API_KEY = "operator-key"
        oai = openai.OpenAI(base_url=live_server.url + "/v1", api_key=key, max_retries=0,
                            http_client=gateway_writes.http_client())
        _history, sid = _agent(oai, server, turns=22)
    # (the scripted server keeps what it received after it stops)
    calls = GatewayCall.objects.filter(session_id=sid).count()
    assert calls == 24  # 22 completions, the refused one, the compaction

    page.goto(signed_in(f"/sessions/{sid}/"))
    settle(page)
    table = page.locator('[data-testid="calls-table"]')
    assert table.is_visible()
    assert table.locator("tbody tr").count() == 20
    first = table.locator("tbody tr").first.inner_text()
    assert "responses/compact" in first and "run #" in first and "no price" in first
    assert "429" in table.locator("tbody tr").nth(1).inner_text()
    cost = page.locator('[data-testid="session-cost"]').inner_text()
    assert cost.startswith("$") and cost != "$0"

    DOCS.mkdir(parents=True, exist_ok=True)
    box = page.locator('[data-testid="gateway-calls"]').bounding_box()
    page.screenshot(path=str(DOCS / "gateway_calls.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": 1400, "height": box["y"] + box["height"] + 16})

    # A call opens from its row: the inspector shows what went upstream and offers it as JSON.
    completion = table.locator("tbody tr").nth(2)
    assert "chat/completions" in completion.inner_text()
    completion.locator('[data-testid="call-link"]').click()
    page.wait_for_selector('[data-testid="upstream-body"]')
    settle(page)
    call = GatewayCall.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    body = page.locator('[data-testid="upstream-body"]').inner_text()
    assert '"messages": [' in body and '"tools": [' in body and "operator-key" not in page.content()
    assert page.locator('[data-testid="call-status"]').inner_text() == str(call.status_code)
    with page.expect_download() as download:
        page.click('[data-testid="upstream-download"]')
    sent = download.value.path().read_bytes()
    assert sent in [r.body for r in server.requests], "the download is a body the upstream received, byte for byte"
    page.screenshot(path=str(DOCS / "gateway_call.png"), full_page=True)
    page.go_back()
    settle(page)

    page.click('[data-testid="calls-older"]')
    page.wait_for_selector("text=Newest calls")
    assert page.locator('[data-testid="calls-table"] tbody tr').count() == calls - 20
    assert page.url.endswith(f"/sessions/{sid}/"), "htmx swapped the table in place"
    # A gateway session is an ordinary one: its run, archive and tuning pages work too.
    run = CompactionRun.objects.filter(session_id=sid, status="succeeded").order_by("id").first()
    for path in (f"/runs/{run.pk}/", f"/sessions/{sid}/archive/", f"/sessions/{sid}/tuning/"):
        page.goto(signed_in(path))
        if path.endswith("/tuning/"):
            page.wait_for_selector('[data-testid="preview-result"]')
        settle(page)
    console.assert_clean()
