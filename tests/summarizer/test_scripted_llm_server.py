"""The scripted server that the summarizer tests talk to behaves as scripted."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.support.llm_server import error, ok


def post(server, body: dict, path: str = "/v1/chat/completions"):
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_behaviours_are_served_in_order_and_every_body_is_recorded_byte_for_byte(llm_server):
    llm_server.script(error(429, retry_after=7), ok("fine", usage={"prompt_tokens": 1, "completion_tokens": 2,
                                                                    "total_tokens": 3}))
    body = {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}

    first = post(llm_server, body)
    second = post(llm_server, body, path="/chat/completions")

    assert first[0] == 429 and first[1]["Retry-After"] == "7"
    answer = json.loads(second[2])
    assert answer["choices"][0]["message"]["content"] == "fine" and answer["usage"]["total_tokens"] == 3
    assert [r.body for r in llm_server.requests] == [json.dumps(body).encode()] * 2
    assert llm_server.pending() == 0


def test_a_request_beyond_the_script_gets_a_500_instead_of_a_silent_success(llm_server):
    status, _, payload = post(llm_server, {"model": "m", "messages": []})

    assert status == 500 and b"no scripted behaviour left" in payload
    assert llm_server.requests[0].behaviour == "exhausted"


def test_a_queue_bound_to_a_model_serves_only_that_model(llm_server):
    llm_server.script(ok("for backup"), model="backup")
    llm_server.script(ok("for anyone"))

    primary = json.loads(post(llm_server, {"model": "primary", "messages": []})[2])
    backup = json.loads(post(llm_server, {"model": "backup", "messages": []})[2])

    assert primary["choices"][0]["message"]["content"] == "for anyone"
    assert backup["choices"][0]["message"]["content"] == "for backup"
