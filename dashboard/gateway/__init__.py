"""The OpenAI-compatible gateway: an agent points its OpenAI client's ``base_url`` here and
keeps sending its whole history; the gateway stores what is new, compacts with the
project's policy before the model call and forwards the live context upstream.

Modules: ``errors`` (OpenAI-shaped error answers), ``body`` (the request body, checked),
``wire`` (the message form compared and forwarded), ``identity`` (which stored session a
request continues), ``upstream`` (where a model name goes, through litellm), ``compact``
(the policy before the call), ``chat`` (one request, start to end), ``stream`` (SSE),
``views`` (the HTTP entry points), ``items`` (Responses items and chat messages, both
ways) and ``responses`` (``POST /v1/responses/compact``: a compaction alone). Anthropic's
``POST /v1/messages`` goes through the same ``chat``: ``anthropic_views`` (its entry),
``anthropic_messages`` (one request), ``anthropic_wire`` (the conversions) and
``anthropic_edits`` (``context_management``)."""
