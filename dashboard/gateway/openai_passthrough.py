"""An OpenAI SDK client, handed to litellm for OpenAI-compatible upstreams, that posts a
chat request's body as it is.

The SDK's ``chat.completions.create`` walks every message against its typed-dict
annotations before sending (``maybe_transform``). For a body that came from JSON, as every
gateway request does, the walk changes nothing, yet at 1,000 messages it costs about half a
second per call, far more than everything else the gateway does. This client skips only
that walk: litellm still maps the parameters and parses the reply, and the SDK still does
the HTTP, the streaming and the error classes.

Imported lazily (``upstream.call``): it pulls in the OpenAI SDK."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import httpx
from openai import OpenAI, Stream
from openai._base_client import make_request_options
from openai._compat import cached_property
from openai._types import NOT_GIVEN, NotGiven, Omit
from openai.resources.chat import Chat
from openai.resources.chat.completions import Completions
from openai.types.chat import ChatCompletion, ChatCompletionChunk


class _Completions(Completions):
    def create(self, *, extra_headers: Any = None, extra_query: Any = None,  # type: ignore[override]
               extra_body: Any = None, timeout: float | httpx.Timeout | None | NotGiven = NOT_GIVEN,
               **body: Any) -> ChatCompletion | Stream[ChatCompletionChunk]:
        given = {k: v for k, v in body.items() if not isinstance(v, (NotGiven, Omit))}
        return self._post(
            "/chat/completions", body=given,
            options=make_request_options(extra_headers=extra_headers, extra_query=extra_query,
                                         extra_body=extra_body, timeout=timeout, security={"bearer_auth": True}),
            cast_to=ChatCompletion, stream=bool(given.get("stream")), stream_cls=Stream[ChatCompletionChunk])


class _Chat(Chat):
    @cached_property
    def completions(self) -> Completions:
        return _Completions(self._client)


class PassThroughOpenAI(OpenAI):
    @cached_property
    def chat(self) -> Chat:
        return _Chat(self)


@lru_cache(maxsize=32)
def client(api_base: str, api_key: str, timeout: float) -> PassThroughOpenAI:
    """One client per upstream, kept: its connection pool is reused from call to call. The
    gateway never retries on the client's behalf (the client's SDK decides)."""
    return PassThroughOpenAI(base_url=api_base, api_key=api_key, timeout=timeout, max_retries=0)
