"""A gateway call's inspector page and its download: figures, what the client sent, the
body sent upstream (rebuilt from the kept pieces and checked), the reply. Calls are written
by the real service (``record_call`` with a body), as the gateway writes them."""
from __future__ import annotations

import json
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from dashboard.models import GatewayCallBody, GatewayPiece
from dashboard.services.call_bodies import CallBody, SentBody, sweep_expired
from dashboard.services.gateway_calls import record_call

MESSAGES = '[{"role":"user","content":"caf\u00e9 & <b>tags</b>"},{"role":"assistant","content":"ok"}]'


def _call(session, **kw):
    sent = SentBody('{"temperature": 0.2, "model": "gpt-4o", "messages": ', MESSAGES, "}")
    fields = dict(model="gpt-4o", endpoint="chat/completions", status_code=200, estimated_prompt_tokens=1100,
                  usage={"prompt_tokens": 1000, "completion_tokens": 50}, upstream_ms=800, overhead_ms=200,
                  body=CallBody(format="chat", fields={"model": "gpt-4o", "temperature": 0.2}, messages=4, added=2,
                                upto=4, sent=sent, reply={"message": {"role": "assistant", "content": "the answer"}}))
    fields.update(kw)
    return record_call(session, **fields)


def test_the_inspector_shows_the_figures_the_client_side_the_body_sent_and_the_reply(web, small):
    call = _call(small)
    html = web.get(reverse("pages:gateway-call", args=[call.pk])).content.decode()
    assert "Call #" in html and "chat/completions" in html
    flat = " ".join(html.split())
    assert "1,100" in flat and "+10.0%" in flat and "$0.003" in flat
    assert "1,000 ms" in flat and "upstream 800 ms" in flat and "gateway 200 ms" in flat
    assert 'value="80" max="100"' in html  # the upstream's share of the time
    # the client's 4 messages are history #0-#3, two of them new (stored by this call)
    assert "4 messages" in flat and "#0</a>–#3" in flat and "2 new" in flat
    assert html.count('data-testid="client-new-message"') == 2
    assert "&quot;temperature&quot;: 0.2" in html  # its fields as sent
    # the body sent upstream, indented, escaped, with its size and a download link
    body = html.split('data-testid="upstream-body">', 1)[1].split("</pre>", 1)[0]
    assert "café &amp; &lt;b&gt;tags&lt;/b&gt;" in body and "<b>" not in body
    assert "2 messages for the client's 4" in flat
    assert reverse("pages:gateway-call-upstream", args=[call.pk]) in html
    assert "the answer" in html.split('data-testid="reply-body">', 1)[1]


def test_the_download_is_byte_for_byte_what_was_sent(web, small):
    call = _call(small)
    r = web.get(reverse("pages:gateway-call-upstream", args=[call.pk]))
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    assert r["Content-Disposition"] == f'attachment; filename="call-{call.pk}-upstream.json"'
    assert r.content == ('{"temperature": 0.2, "model": "gpt-4o", "messages": ' + MESSAGES + "}").encode()
    assert json.loads(r.content)["messages"][0]["content"] == "café & <b>tags</b>"


def test_a_body_the_pieces_no_longer_rebuild_is_neither_shown_nor_served(web, small):
    call = _call(small)
    body = GatewayCallBody.objects.get(call=call)
    piece = GatewayPiece.objects.get(pk=body.sent_head)
    piece.text = piece.text.replace("0.2", "0.3")
    piece.save()
    html = web.get(reverse("pages:gateway-call", args=[call.pk])).content.decode()
    assert 'data-testid="upstream-unverified"' in html and 'data-testid="upstream-body"' not in html
    assert web.get(reverse("pages:gateway-call-upstream", args=[call.pk])).status_code == 404


def test_an_expired_body_leaves_the_figures_and_says_so(web, small, settings):
    call = _call(small)
    GatewayCallBody.objects.filter(call=call).delete()  # what the retention sweep does
    html = web.get(reverse("pages:gateway-call", args=[call.pk])).content.decode()
    assert 'data-testid="call-not-kept"' in html and "GATEWAY_CALL_BODY_DAYS" in html and "1,100" in html
    assert web.get(reverse("pages:gateway-call-upstream", args=[call.pk])).status_code == 404


def test_a_call_that_sent_nothing_says_so_and_the_calls_table_links_to_each_call(web, small):
    failed = _call(small, status_code=400, usage=None,
                   body=CallBody(format="chat", fields={"model": "gpt-4o"}, messages=1, added=1, upto=1,
                                 reply={"error": {"message": "the context is over the window"}}))
    html = web.get(reverse("pages:gateway-call", args=[failed.pk])).content.decode()
    assert "the call ended before it reached the upstream" in html and "over the window" in html
    session_page = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert reverse("pages:gateway-call", args=[failed.pk]) in session_page


def test_bodies_expire_after_the_retention(small, settings):
    old, new = _call(small), _call(small)
    GatewayCallBody.objects.filter(call=old).update(created_at=timezone.now() - timedelta(days=15))
    assert sweep_expired() == (1, 0)  # the newer body still uses every piece
    assert list(GatewayCallBody.objects.values_list("call_id", flat=True)) == [new.pk]
