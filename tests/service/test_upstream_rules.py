"""Where the gateway sends a model name and how it calls there (dashboard.gateway.upstream), on
its own, in seconds: the operator's default upstream for bare names, a model connection for
prefixed ones, the refusals (a private address, a key variable that is not set, a remote image
for a provider litellm would fetch it for, a model without a known window), and one real call
each way (posted as it is, and through litellm) to the scripted OpenAI-compatible server.
test_gateway.py shows the same through the HTTP endpoints and the SDKs."""
from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from compaction.redaction import REDACTED, redact
from dashboard.gateway import upstream
from dashboard.gateway.errors import GatewayError
from dashboard.gateway.upstream import Upstream
from dashboard.services import connections
from tests.support.llm_server import ScriptedLLMServer, error, ok, slow

# Fresh keys each run: redaction's list of known secrets lives as long as the process, so a
# key registered by an earlier run of these tests (a mutation run forks the process that ran
# them) would hide a missing registration.
GATEWAY_KEY = f"gw-operator-key-{uuid.uuid4().hex}"
CONN_KEY = f"conn-operator-key-{uuid.uuid4().hex}"


@pytest.fixture
def operator(settings, db, monkeypatch):
    """No default upstream and no connections unless a test declares them."""
    settings.GATEWAY_API_BASE = ""
    settings.GATEWAY_API_KEY = ""
    settings.COMPACTION_SUMMARIZER_MODEL = ""
    settings.COMPACTION_CONNECTIONS = []
    monkeypatch.delenv("CS_T_CONN_KEY", raising=False)
    return settings


@pytest.fixture
def server():
    with ScriptedLLMServer() as s:
        yield s


def gateway_error(call, *args) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        call(*args)
    return caught.value


# -- resolve -----------------------------------------------------------------------------------

def test_a_bare_model_name_goes_to_the_default_upstream_with_the_operators_key(operator):
    operator.GATEWAY_API_BASE = "https://llm.example.com/v1"
    operator.GATEWAY_API_KEY = GATEWAY_KEY
    assert upstream.resolve("gpt-4o") == Upstream("GATEWAY_API_BASE", "openai/gpt-4o", "https://llm.example.com/v1",
                                                  GATEWAY_KEY)
    # the key is known to redaction from now on
    assert GATEWAY_KEY not in redact(f"upstream said: bad key {GATEWAY_KEY}")
    operator.GATEWAY_API_KEY = ""
    assert upstream.resolve("gpt-4o").api_key == connections.NO_KEY


def test_a_prefixed_name_goes_to_the_first_connection_allowing_it_even_with_a_default_upstream(operator, monkeypatch):
    operator.GATEWAY_API_BASE = "https://llm.example.com/v1"
    operator.COMPACTION_CONNECTIONS = [
        {"name": "claude", "models": ["anthropic/*"], "api_key_env": "CS_T_CONN_KEY"},
        {"name": "any", "models": ["anthropic/*", "openai/*"], "api_base": "https://8.8.8.8/v1"},
    ]
    monkeypatch.setenv("CS_T_CONN_KEY", CONN_KEY)
    assert upstream.resolve("anthropic/claude-x") == Upstream("connection claude", "anthropic/claude-x", None,
                                                              CONN_KEY)
    assert CONN_KEY not in redact(f"echo: Bearer {CONN_KEY} and {CONN_KEY}")
    # an address without a key variable gets the placeholder key, never a provider's own
    assert upstream.resolve("openai/gpt-4o") == Upstream("connection any", "openai/gpt-4o", "https://8.8.8.8/v1",
                                                         connections.NO_KEY)


def test_a_connection_with_neither_address_nor_key_variable_leaves_the_key_to_litellm(operator):
    operator.COMPACTION_CONNECTIONS = [{"name": "plain", "models": ["anthropic/*"]}]
    assert upstream.resolve("anthropic/claude-x") == Upstream("connection plain", "anthropic/claude-x", None, None)


def test_a_bare_name_without_a_default_upstream_can_go_to_a_connection(operator):
    operator.COMPACTION_CONNECTIONS = [{"name": "bare", "models": ["gpt-4o"], "api_base": "https://8.8.8.8/v1"}]
    assert upstream.resolve("gpt-4o").via == "connection bare"


def test_a_connection_whose_key_variable_is_not_set_is_refused_naming_it(operator, monkeypatch):
    operator.COMPACTION_CONNECTIONS = [{"name": "claude", "models": ["anthropic/*"], "api_key_env": "CS_T_CONN_KEY"}]
    refused = gateway_error(upstream.resolve, "anthropic/claude-x")
    assert (refused.status, refused.type) == (502, "server_error")
    assert refused.message == ("the operator's connection 'claude' has no key: environment variable CS_T_CONN_KEY "
                               "is not set")
    monkeypatch.setenv("CS_T_CONN_KEY", "")
    assert gateway_error(upstream.resolve, "anthropic/claude-x").message == refused.message


def test_a_connection_at_a_private_address_is_refused_before_its_key_is_read(operator, monkeypatch):
    operator.COMPACTION_CONNECTIONS = [{"name": "imds", "models": ["openai/*"], "api_base": "http://169.254.169.254/v1",
                                        "api_key_env": "CS_T_CONN_KEY"}]
    monkeypatch.setenv("CS_T_CONN_KEY", CONN_KEY)
    refused = gateway_error(upstream.resolve, "openai/gpt-4o")
    assert (refused.status, refused.type) == (502, "server_error")
    assert refused.message.startswith("the operator's connection 'imds' is unusable: 'http://169.254.169.254/v1' is "
                                      "a loopback, private or link-local address (169.254.169.254)")
    operator.COMPACTION_CONNECTIONS[0]["allow_private_network"] = True
    assert upstream.resolve("openai/gpt-4o").api_key == CONN_KEY


def test_a_model_nobody_serves_gets_a_400_saying_how_to_map_it(operator):
    refused = gateway_error(upstream.resolve, "gpt-4o")
    assert (refused.status, refused.param, refused.code) == (400, "model", "model_not_found")
    assert refused.message == (
        "model 'gpt-4o' is not served by this gateway: a name without a provider prefix goes to GATEWAY_API_BASE "
        "(not set); a prefixed name (openai/..., anthropic/...) needs an operator's model connection whose models "
        "allow it (COMPACTION_CONNECTIONS or the admin; connections now: none)")
    operator.GATEWAY_API_BASE = "https://llm.example.com/v1"
    operator.COMPACTION_CONNECTIONS = [{"name": "zz", "models": ["z/*"]}, {"name": "aa", "models": ["a/*"]}]
    refused = gateway_error(upstream.resolve, "mistral/large")
    assert "GATEWAY_API_BASE (set)" in refused.message and refused.message.endswith("connections now: aa, zz)")


# -- remote images and windows -----------------------------------------------------------------

def image(url) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def test_a_remote_image_is_refused_for_a_provider_litellm_would_download_it_for():
    up = Upstream("connection claude", "anthropic/claude-x", None, "k")
    messages = [
        "not an object",
        {"role": "user", "content": "text only"},
        {"role": "user", "content": ["a string part", {"type": "text", "text": "hi"},
                                     image("data:image/png;base64,AAAA"), {"type": "image_url", "image_url": 5}]},
        {"role": "user", "content": [{"type": "text", "text": "x"}, image("https://example.com/cat.png")]},
    ]
    refused = gateway_error(upstream.refuse_remote_images, up, messages)
    assert (refused.status, refused.param) == (400, "messages[3].content[1].image_url")
    assert refused.message.startswith("messages[3].content[1].image_url: connection claude is not "
                                      "OpenAI-compatible, so the gateway would download this image itself")
    # the bare-string form of image_url too
    bare = [{"role": "user", "content": [{"type": "image_url", "image_url": "http://10.0.0.1/x.png"}]}]
    assert gateway_error(upstream.refuse_remote_images, up, bare).param == "messages[0].content[0].image_url"
    upstream.refuse_remote_images(up, messages[:3])
    # an OpenAI-compatible upstream receives the URL and fetches it itself
    upstream.refuse_remote_images(Upstream("GATEWAY_API_BASE", "openai/gpt-4o", "https://x/v1", "k"), messages)


def test_a_model_without_a_known_window_needs_the_policys_window():
    def never() -> int:
        raise AssertionError("the policy's window is asked only when litellm's table has none")
    upstream.check_window("gpt-4o", never)
    upstream.check_window("openai/no-such-model-xyz", lambda: 8000)
    refused = gateway_error(upstream.check_window, "openai/no-such-model-xyz", lambda: None)
    assert (refused.status, refused.param, refused.code) == (400, "model", "unknown_window")
    assert refused.message.startswith("model 'openai/no-such-model-xyz' has no context window in litellm's model "
                                      "table: set context_window in the project's policy")


def test_only_an_openai_model_with_an_address_is_posted_directly():
    assert upstream.relayed(Upstream("GATEWAY_API_BASE", "openai/gpt-4o", "https://x/v1", "k"))
    assert not upstream.relayed(Upstream("connection c", "openai/gpt-4o", None, "k"))
    assert not upstream.relayed(Upstream("connection c", "hosted_vllm/m", "https://x/v1", "k"))


# -- calls -------------------------------------------------------------------------------------

MESSAGES = '[{"role": "user", "content": "h\\u00e9llo"}]'
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}]


def test_a_relayed_call_posts_the_messages_text_as_it_is_with_the_operators_key(server):
    up = Upstream("GATEWAY_API_BASE", "openai/gpt-4o", server.api_base, GATEWAY_KEY)
    server.script(ok("plain"), ok("with tools"), ok("streamed"))
    answer = upstream.call(up, MESSAGES, [], {"temperature": 0}, stream=False)
    assert answer.choices[0].message.content == "plain"
    first = server.requests[0]
    assert first.headers.get("authorization") == f"Bearer {GATEWAY_KEY}"
    assert first.json == {"temperature": 0, "model": "gpt-4o", "messages": [{"role": "user", "content": "héllo"}]}
    assert first.body.endswith(b', "messages": ' + MESSAGES.encode() + b"}")

    upstream.call(up, MESSAGES, TOOLS, {}, stream=False)
    assert server.requests[1].json["tools"] == TOOLS and "stream" not in server.requests[1].json

    chunks = list(upstream.call(replace(up, api_key=None), MESSAGES, [], {}, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "streamed"
    third = server.requests[2]
    assert (third.json["stream"], third.json["stream_options"]) == (True, {"include_usage": True})
    assert "tools" not in third.json
    assert third.headers.get("authorization") == f"Bearer {connections.NO_KEY}"


def test_a_relayed_call_gives_up_after_the_gateway_timeout(server, settings):
    settings.GATEWAY_TIMEOUT = 0.4
    up = Upstream("GATEWAY_API_BASE", "openai/gpt-4o", server.api_base, GATEWAY_KEY)
    server.script(slow(3))
    refused = gateway_error(upstream.call, up, MESSAGES, [], {}, False)
    assert (refused.status, refused.type) == (504, "timeout")
    server.script(slow(3))
    refused = gateway_error(lambda: list(upstream.call(up, MESSAGES, [], {}, True)))
    assert (refused.status, refused.type) == (504, "timeout")


def test_a_call_through_litellm_sends_the_address_key_tools_and_no_retries(server):
    up = Upstream("connection local", "hosted_vllm/m", server.api_base, CONN_KEY)
    server.script(ok("through litellm"), ok("streamed"))
    answer = upstream.call(up, MESSAGES, TOOLS, {"temperature": 0}, stream=False)
    assert answer.choices[0].message.content == "through litellm"
    sent = server.requests[0]
    assert sent.headers.get("authorization") == f"Bearer {CONN_KEY}"
    assert sent.json["model"] == "m" and sent.json["temperature"] == 0
    assert sent.json["messages"] == [{"role": "user", "content": "héllo"}]
    assert sent.json["tools"][0]["function"]["name"] == "read"
    chunks = list(upstream.call(up, MESSAGES, [], {}, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "streamed"
    assert server.requests[1].json["stream"] is True
    assert server.requests[1].json.get("stream_options") == {"include_usage": True}
    assert "tools" not in server.requests[1].json


def test_the_call_inspector_is_given_the_body_as_sent_and_never_the_key(server):
    """``keep`` gets what the call inspector page shows: the posted bytes of a relayed call,
    and for a call through litellm what litellm was handed, without the key, the address and
    the gateway's own settings of the call (timeout, retries)."""
    kept = []
    relayed = Upstream("GATEWAY_API_BASE", "openai/gpt-4o", server.api_base + "/", GATEWAY_KEY)
    server.script(ok("relayed"), ok("through litellm"), ok("streamed"))
    upstream.call(relayed, MESSAGES, [], {"temperature": 0}, stream=False, keep=kept.append)
    assert kept[0].exact and kept[0].payload() == server.requests[0].body
    assert kept[0].text() == server.requests[0].body.decode() and kept[0].array == MESSAGES
    assert kept[0].to == f"GATEWAY_API_BASE: POST {server.api_base}/chat/completions"

    up = Upstream("connection local", "hosted_vllm/m", server.api_base, CONN_KEY)
    upstream.call(up, MESSAGES, TOOLS, {"temperature": 0}, stream=False, keep=kept.append)
    handed = kept[1]
    assert not handed.exact and handed.to == "connection local: litellm hosted_vllm/m"
    assert handed.array == MESSAGES and handed.text().endswith(', "messages": ' + MESSAGES + "}")
    shown = json.loads(handed.text())
    assert shown == {"temperature": 0, "model": "hosted_vllm/m", "stream": False, "tools": TOOLS,
                     "messages": [{"role": "user", "content": "héllo"}]}
    assert CONN_KEY not in handed.text() and server.api_base not in handed.text()
    list(upstream.call(up, MESSAGES, [], {"user": "zoë"}, stream=True, keep=kept.append))
    assert json.loads(kept[2].text())["stream_options"] == {"include_usage": True}
    assert '"user": "zoë"' in kept[2].before, "shown as the client wrote it, not escaped"


def test_an_upstream_failure_through_litellm_is_answered_once_with_its_status_and_wait(server, operator,
                                                                                     monkeypatch):
    operator.COMPACTION_CONNECTIONS = [{"name": "local", "models": ["hosted_vllm/*"], "api_base": server.api_base,
                                        "api_key_env": "CS_T_CONN_KEY", "allow_private_network": True}]
    monkeypatch.setenv("CS_T_CONN_KEY", CONN_KEY)
    up = upstream.resolve("hosted_vllm/m")     # as the gateway gets it: the key is now known to redaction
    assert up == Upstream("connection local", "hosted_vllm/m", server.api_base, CONN_KEY)
    server.script(error(429, "slow down please", retry_after=7))
    refused = gateway_error(upstream.call, up, MESSAGES, [], {}, False)
    assert (refused.status, refused.type) == (429, "rate_limit_error")
    assert refused.headers.get("Retry-After") == "7" and "slow down please" in refused.message
    assert len(server.requests) == 1          # the client's SDK decides about retrying, not the gateway
    server.script(error(401, f"Incorrect API key provided: {CONN_KEY}"))
    refused = gateway_error(upstream.call, up, MESSAGES, [], {}, False)
    assert refused.status == 502 and "refused the gateway's credentials" in refused.message
    assert CONN_KEY not in refused.message and REDACTED in refused.message


def test_a_litellm_timeout_becomes_a_504(server, settings):
    settings.GATEWAY_TIMEOUT = 0.4
    up = Upstream("connection local", "hosted_vllm/m", server.api_base, CONN_KEY)
    server.script(slow(3))
    refused = gateway_error(upstream.call, up, MESSAGES, [], {}, False)
    assert (refused.status, refused.type) == (504, "timeout")


def test_a_litellm_error_keeps_the_providers_status_error_object_and_wait():
    """upstream_error on litellm's own exception classes, as litellm raises them for a
    provider that is not OpenAI-compatible (none answers here, so they are built directly)."""
    from compaction import _env  # noqa: PLC0415 - litellm is imported lazily
    litellm = _env.litellm()
    provider_error = {"message": "prompt is too long", "type": "invalid_request_error", "param": "messages"}
    exc = litellm.BadRequestError("litellm.BadRequestError: prompt is too long", "claude-x", "anthropic",
                                  body=provider_error)
    out = upstream.upstream_error(exc)
    assert out.status == 400 and out.error_object() == provider_error
    # a body without a message of its own is not an error object: the gateway writes one
    exc = litellm.BadRequestError("litellm.BadRequestError: odd", "claude-x", "anthropic", body={"detail": 1})
    out = upstream.upstream_error(exc)
    assert set(out.error_object()) == {"message", "type", "param", "code"}
    assert out.error_object()["message"].endswith("odd") and out.error_object()["type"] == "invalid_request_error"
    exc = litellm.RateLimitError("slow down", "anthropic", "claude-x", num_retries=2)
    exc.litellm_response_headers = {"retry-after": "9"}
    out = upstream.upstream_error(exc)
    assert (out.status, out.type, out.headers) == (429, "rate_limit_error", {"Retry-After": "9"})
    # the provider's message, without the retry note litellm's own text adds
    assert out.message == "litellm.RateLimitError: slow down" and "Retried" in str(exc)
    out = upstream.upstream_error(litellm.Timeout("took too long", "claude-x", "anthropic"))
    assert (out.status, out.type) == (504, "timeout") and "took too long" in out.message
    # the OpenAI client's own timeout (no HTTP status) is a timeout too, not "unreachable"
    import httpx  # noqa: PLC0415
    import openai  # noqa: PLC0415
    out = upstream.upstream_error(openai.APITimeoutError(request=httpx.Request("POST", "https://llm.example.com")))
    assert (out.status, out.type) == (504, "timeout")
    out = upstream.upstream_error(ConnectionError("connection refused"))
    assert (out.status, out.type, out.headers) == (502, "server_error", {})
    assert out.message == "the upstream could not be reached: connection refused"
