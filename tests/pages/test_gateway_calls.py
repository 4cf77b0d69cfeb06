"""The session page's Calls table (gateway calls: our estimate beside the provider's
tokens, the gap, the cost) and the cost in its header. Rows are written by the real
service (``record_call``), prices come from litellm's real table."""
from __future__ import annotations

import re

from django.urls import reverse

from dashboard.services.gateway_calls import record_call
from tests.pages import factories


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-call="\d+">(.*?)</tr>', html, re.S)


def test_the_calls_table_shows_our_estimate_beside_the_providers_tokens_and_the_cost(web, small):
    record_call(small, endpoint="chat/completions", model="gpt-4o", status_code=200, estimated_prompt_tokens=1100,
                usage={"prompt_tokens": 1000, "completion_tokens": 50}, upstream_ms=812, overhead_ms=9)
    record_call(small, endpoint="chat/completions", model="studio-local-model-7b", status_code=200,
                estimated_prompt_tokens=900, usage={"prompt_tokens": 1000, "completion_tokens": 20})
    record_call(small, endpoint="chat/completions", model="gpt-4o", status_code=429, estimated_prompt_tokens=1200)
    record_call(small, endpoint="responses/compact", model="gpt-4o", status_code=200, estimated_prompt_tokens=5000,
                usage={"prompt_tokens": 3000, "completion_tokens": 400}, price_model="gpt-4o-mini")

    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert 'data-testid="calls-table"' in html
    compacted, limited, local, priced = _rows(html)  # newest first
    # A compaction's provider tokens are the summarizer's: no gap against our estimate of
    # the context, and the price is the summarizer model's.
    assert "5,000" in compacted and "3,000" in compacted and "%" not in compacted and "$0.00069" in compacted
    assert "1,100" in priced and "1,000" in priced and "+10.0%" in priced
    assert "$0.003" in priced  # 1,000 prompt and 50 completion tokens of gpt-4o at litellm's price
    assert "812 ms" in priced
    assert "-10.0%" in local and "no price" in local and "$0" not in local
    assert "429" in limited and "status-failed" in limited and "no price" in limited
    header = html.split('data-testid="session-cost">', 1)[1].split("</strong>", 1)[0]
    assert header == "$0.00369"  # gpt-4o 0.003 + gpt-4o-mini 0.00069
    flat = " ".join(html.split())
    assert "4 gateway calls, cost" in flat and "(and 1 with no price)" in flat


def test_the_calls_table_pages_and_a_session_without_calls_has_none(web, project, small):
    for i in range(25):
        record_call(small, endpoint="chat/completions", model="gpt-4o", status_code=200,
                    estimated_prompt_tokens=100 + i, usage={"prompt_tokens": 100, "completion_tokens": 1})
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert len(_rows(html)) == 20
    older = re.search(r'hx-get="([^"]+\?before=\d+)"', html).group(1)
    rest = web.get(older).content.decode()
    assert len(_rows(rest)) == 5 and "Newest calls" in rest and "124" not in rest.split("<tbody>")[1]
    # Without JavaScript the link reloads the page on the older calls.
    plain = web.get(reverse("pages:session", args=[small.pk]) + "?" + older.split("?", 1)[1].replace("before", "calls_before"))
    assert len(_rows(plain.content.decode())) == 5

    other = factories.import_messages(project, factories.agent_messages(3), title="no gateway")
    page = web.get(reverse("pages:session", args=[other.pk])).content.decode()
    assert 'data-testid="calls-table"' not in page and "session-cost" not in page
