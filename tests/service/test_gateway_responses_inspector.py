"""The inspector page of a ``POST /v1/responses`` call: a real ``openai`` SDK
``responses.create`` turn against a live server, the scripted OpenAI-compatible server as
the upstream (nothing mocked). The page shows what the client sent (its fields, the items
new in this turn) and the reply; the download is the very body the upstream received."""
from __future__ import annotations

import json

from django.urls import reverse

from dashboard.models import GatewayCall
from dashboard.services.projects import set_member
from tests.service import test_gateway
from tests.service.test_gateway import sdk
from tests.support import gateway_writes
from tests.support.llm_server import ok, tool_call

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
OUTPUT = "def main():\n    return 'caf\u00e9 & <b>tags</b>'"


def test_a_responses_call_has_an_inspector_page_and_its_upstream_body(gateway, project, llm_server, client,
                                                                      django_user_model):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("", tool_calls=[tool_call("read_file", {"path": "src/app.py"}, "call_1")]),
                      ok("app.py defines main()."))
    first = oai.responses.create(model="gpt-4o", instructions="Be brief.", tools=TOOLS,
                                 input="What does src/app.py define?")
    items: list = [{"role": "user", "content": "What does src/app.py define?"}]
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items.append({"type": "function_call_output", "call_id": "call_1", "output": OUTPUT})
    second = oai.responses.create(model="gpt-4o", instructions="Be brief.", tools=TOOLS, input=items,
                                  temperature=0.3, metadata={"ticket": "T-17"})
    assert second.output_text == "app.py defines main()."
    gateway_writes.wait()

    call = GatewayCall.objects.filter(endpoint="responses").order_by("pk").last()
    assert call is not None and GatewayCall.objects.filter(endpoint="responses").count() == 2
    viewer = django_user_model.objects.create_user("viewer", password="a long password 1")
    set_member(project, viewer, "viewer")
    client.force_login(viewer)
    page = client.get(reverse("pages:gateway-call", args=[call.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "responses" in html
    # the client's fields as sent (the input items are shown as messages, not repeated here)
    fields = html.split('data-testid="client-fields">', 1)[1].split("</pre>", 1)[0]
    assert "&quot;temperature&quot;: 0.3" in fields and "T-17" in fields and "read_file" in fields
    assert "What does src/app.py define?" not in fields
    # new in this turn: only the tool's output (escaped); the function call was the first
    # call's reply, stored then, so the client's resending it adds nothing
    new = html.split('data-testid="client-new-message"')[1:]
    assert len(new) == 1
    assert "tool" in new[0] and "café &amp; &lt;b&gt;tags&lt;/b&gt;" in new[0] and "<b>tags" not in new[0]
    assert "1 new" in " ".join(html.split())
    assert "app.py defines main()." in html.split('data-testid="reply-body">', 1)[1]

    download = client.get(reverse("pages:gateway-call-upstream", args=[call.pk]))
    assert download.status_code == 200 and download["Content-Type"] == "application/json"
    received = llm_server.requests[-1].body
    assert download.content == received, "the download is byte for byte what the upstream received"
    sent = json.loads(received)
    assert sent["temperature"] == 0.3 and sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["messages"][-1]["role"] == "tool"
    # the first call's download is its own body, not the latest one
    earlier = GatewayCall.objects.filter(endpoint="responses").order_by("pk").first()
    assert client.get(reverse("pages:gateway-call-upstream", args=[earlier.pk])).content == llm_server.requests[0].body
