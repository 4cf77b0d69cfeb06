"""Where a model name goes, and the call: posted directly to an OpenAI-compatible server
(``relay``), through litellm to any other provider.

Two kinds of upstream, both the operator's:

- the default one, ``GATEWAY_API_BASE`` with ``GATEWAY_API_KEY``: an OpenAI-compatible
  server that receives every model name without a provider prefix (``gpt-4o``);
- a model connection (``dashboard.services.connections``) whose models allow the name,
  e.g. ``anthropic/claude-sonnet-4-5`` through a connection listing ``anthropic/*``.

The key always comes from the server's side (the setting, or the connection's key
variable); the project key the client authenticated with is never forwarded, nor any of
the client's headers."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from compaction import _env
from compaction.redaction import register_secrets
from compaction.windows import model_window

from ..services import connections
from ..services.call_bodies import SentBody
from . import relay
from .errors import GatewayError, upstream_failure


@dataclass(frozen=True)
class Upstream:
    via: str               # "GATEWAY_API_BASE" or "connection <name>"
    model: str             # the litellm model string
    api_base: str | None
    api_key: str | None
    # the operator declared that this upstream serves the Responses API itself
    # (GATEWAY_RESPONSES_PASSTHROUGH): POST /v1/responses is passed through to it
    responses: bool = False


def _how_to_map(model: str) -> str:
    names = sorted(connections.registry())
    return (f"model {model!r} is not served by this gateway: a name without a provider prefix goes to "
            f"GATEWAY_API_BASE ({'set' if settings.GATEWAY_API_BASE else 'not set'}); a prefixed name "
            f"(openai/..., anthropic/...) needs an operator's model connection whose models allow it "
            f"(COMPACTION_CONNECTIONS or the admin; connections now: {', '.join(names) or 'none'})")


PASSTHROUGH_SETTING = "GATEWAY_RESPONSES_PASSTHROUGH"


def _serving_responses(up: Upstream, name: str) -> Upstream:
    """``up``, marked as serving the Responses API when the operator lists ``name`` in
    GATEWAY_RESPONSES_PASSTHROUGH (only the operator's settings decide where a request and its
    key go, never the client). Such an upstream must be one the gateway posts to itself."""
    if name not in settings.GATEWAY_RESPONSES_PASSTHROUGH:
        return up
    if not (up.model.startswith("openai/") and up.api_base):
        raise GatewayError(502, f"{PASSTHROUGH_SETTING} lists {name!r}, but {up.via} is not an OpenAI-compatible "
                                f"server address (its models need the openai/ prefix and an api_base) to pass "
                                f"Responses requests to", type="server_error")
    return Upstream(up.via, up.model, up.api_base, up.api_key, responses=True)


def resolve(model: str) -> Upstream:
    """The upstream for ``model``; a GatewayError (400) saying how to map it otherwise."""
    if "/" not in model and settings.GATEWAY_API_BASE:
        register_secrets([settings.GATEWAY_API_KEY])
        return _serving_responses(Upstream("GATEWAY_API_BASE", f"openai/{model}", settings.GATEWAY_API_BASE,
                                           settings.GATEWAY_API_KEY or connections.NO_KEY), "GATEWAY_API_BASE")
    for conn in connections.registry().values():
        if not conn.allows(model):
            continue
        try:
            connections.check_address(conn.api_base, conn.allow_private_network)
        except connections.ConnectionInvalid as exc:
            raise GatewayError(502, f"the operator's connection {conn.name!r} is unusable: {exc}",
                               type="server_error") from None
        key = os.environ.get(conn.api_key_env) if conn.api_key_env else None
        register_secrets([key])  # an admin's connection is read here first: its key is redacted from now on
        if conn.api_key_env and not key:
            raise GatewayError(502, f"the operator's connection {conn.name!r} has no key: environment variable "
                                    f"{conn.api_key_env} is not set", type="server_error")
        if key is None and conn.api_base:
            key = connections.NO_KEY
        return _serving_responses(Upstream(f"connection {conn.name}", model, conn.api_base, key), conn.name)
    raise GatewayError(400, _how_to_map(model), param="model", code="model_not_found")


def refuse_remote_images(up: Upstream, messages: list[dict[str, Any]]) -> None:
    """An image given by URL goes to an OpenAI-compatible upstream as the URL (the provider
    fetches it). For other providers litellm downloads it first, from the gateway's own
    network, at an address the client chose: refused (a 400 naming the part), before
    anything is stored. An inline ``data:`` image is always fine."""
    if up.model.startswith("openai/"):
        return
    for i, message in enumerate(messages):
        # (a message that is not an object is refused by the body's checks, later)
        content = message.get("content") if isinstance(message, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str) and not url.startswith("data:"):
                where = f"messages[{i}].content[{j}].image_url"
                raise GatewayError(400, f"{where}: {up.via} is not OpenAI-compatible, so the gateway would download "
                                        f"this image itself from an address the request chose; send it inline as a "
                                        f"data: URL", param=where)


def check_window(model: str, policy_window: Callable[[], int | None]) -> None:
    """A model whose window nobody knows cannot be kept under it: refuse, saying how to fix.
    (``policy_window`` is asked only when litellm's table has no window for the model.)"""
    if model_window(model) or policy_window():
        return
    raise GatewayError(400, f"model {model!r} has no context window in litellm's model table: set context_window "
                            f"in the project's policy so the gateway knows what to keep the context under",
                       param="model", code="unknown_window")


def relayed(up: Upstream) -> bool:
    """Whether ``up`` is an OpenAI-compatible server the gateway posts to itself (``relay``)."""
    return up.model.startswith("openai/") and bool(up.api_base)


def call(up: Upstream, messages_text: str, tools: list[dict[str, Any]], params: dict[str, Any],
         stream: bool, keep: Callable[[SentBody], None] | None = None) -> Any:
    """One call upstream (no retries of its own: the client's SDK decides), with the messages
    as the text of their JSON array: posted as they are to an OpenAI-compatible server
    (``relay``), else through litellm, which translates them for the provider. ``keep`` is
    given the body sent, before it is sent (the call inspector's record)."""
    if relayed(up):
        fields: dict[str, Any] = dict(params)
        if tools:
            fields["tools"] = tools
        if stream:
            fields.update(stream=True, stream_options={"include_usage": True})
        model = up.model.removeprefix("openai/")
        before, after = relay.body_parts(model, fields)
        data = (before + messages_text + after).encode("utf-8")
        if keep is not None:
            keep(SentBody(before, messages_text, after, exact=True, data=data,
                          to=f"{up.via}: POST {(up.api_base or '').rstrip('/')}/chat/completions"))
        key = up.api_key or connections.NO_KEY
        if stream:
            return relay.stream(up.api_base or "", key, settings.GATEWAY_TIMEOUT, data)
        return relay.complete(up.api_base or "", key, settings.GATEWAY_TIMEOUT, data)
    litellm = _env.litellm()
    kwargs: dict[str, Any] = dict(params, model=up.model, messages=json.loads(messages_text), stream=stream,
                                  timeout=settings.GATEWAY_TIMEOUT, num_retries=0, max_retries=0)
    if tools:
        kwargs["tools"] = tools
        # litellm looks for its proxy's MCP tools in any tool list, which imports the
        # optional ``mcp`` package; the gateway forwards plain function tools only.
        kwargs["_skip_mcp_handler"] = True
    if up.api_base:
        kwargs["api_base"] = up.api_base
    if up.api_key:
        kwargs["api_key"] = up.api_key
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    if keep is not None:
        keep(_handed(up, kwargs, messages_text))
    try:
        return litellm.completion(**kwargs)
    except Exception as exc:  # noqa: BLE001 - every upstream failure becomes an OpenAI error object
        raise upstream_error(exc) from None


# litellm's arguments the call inspector leaves out: the gateway's own settings of the
# call and where it goes (never the key).
_NOT_SHOWN = frozenset({"messages", "api_key", "api_base", "timeout", "num_retries", "max_retries",
                        "_skip_mcp_handler"})


def _handed(up: Upstream, kwargs: dict[str, Any], messages_text: str) -> SentBody:
    """The request handed to litellm, as JSON with the messages' text as forwarded: litellm
    builds the provider's own body from it, so this is not byte for byte what left."""
    shown = {k: v for k, v in kwargs.items() if k not in _NOT_SHOWN}
    before = json.dumps(shown, ensure_ascii=False)[:-1] + ', "messages": '
    return SentBody(before, messages_text, "}", exact=False, to=f"{up.via}: litellm {up.model}")


def upstream_error(exc: Exception) -> GatewayError:
    """A litellm exception as ``errors.upstream_failure`` shapes it (litellm keeps the
    upstream's error object in ``body`` and its headers apart)."""
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    if not (isinstance(body, dict) and isinstance(body.get("message"), str)):
        body = None
    upstream_headers = getattr(exc, "litellm_response_headers", None)
    retry_after = upstream_headers.get("retry-after") if upstream_headers is not None else None
    message = str(getattr(exc, "message", None) or exc)
    timeout = type(exc).__name__ in ("Timeout", "APITimeoutError")
    return upstream_failure(status if isinstance(status, int) else None, message, body=body,
                            retry_after=retry_after, timeout=timeout)
