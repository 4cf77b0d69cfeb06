"""The record of each gateway call (``GatewayCall``): written once, when the call ends,
by every gateway endpoint through :func:`record_call`.

The price comes from litellm's model cost map. A model the map does not know gets no
price (``cost_usd`` null, shown as "no price"), never a price of zero, so a session's
total never looks cheaper than it was."""
from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from django.db import transaction

from compaction import _env

from ..models import CompactionRun, GatewayCall, Session
from .call_bodies import CallBody, store, sweep_due

log = logging.getLogger("dashboard.gateway")


def price(model: str, prompt_tokens: int | None, completion_tokens: int | None) -> Decimal | None:
    """USD for these tokens at litellm's price of ``model``; None when the model has no
    price there or the provider reported no tokens."""
    if not model or (prompt_tokens is None and completion_tokens is None):
        return None
    litellm = _env.litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens or 0,
                                                              completion_tokens=completion_tokens or 0)
    except Exception:  # noqa: BLE001 - litellm raises its own kinds for a model it has no price for
        return None
    return Decimal(str(round(float(prompt_cost) + float(completion_cost), 8)))


def _count(usage: dict[str, Any] | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _ms(value: float | None) -> int | None:
    return max(0, round(value)) if value is not None else None


def record_call(session: Session | int, *, endpoint: str, model: str, status_code: int,
                run: CompactionRun | int | None = None, estimated_prompt_tokens: int | None = None,
                usage: dict[str, Any] | None = None, price_model: str | None = None,
                upstream_ms: float | None = None, overhead_ms: float | None = None,
                body: CallBody | None = None) -> GatewayCall:
    """Write one call's row. ``usage`` is the provider's (``prompt_tokens`` and
    ``completion_tokens``, as OpenAI names them; an endpoint with other names maps them);
    ``price_model`` is the model the tokens were billed at when it is not ``model`` (the
    summarizer's, for a compaction). ``body``: what the call's inspector page shows (what
    the client sent, the body sent upstream, the reply), kept by ``call_bodies``."""
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    call = GatewayCall.objects.create(
        session_id=session if isinstance(session, int) else session.pk,
        run_id=run if isinstance(run, int) or run is None else run.pk,
        endpoint=endpoint[:60], model=model[:200], status_code=status_code,
        estimated_prompt_tokens=estimated_prompt_tokens, provider_prompt_tokens=prompt,
        provider_completion_tokens=completion, cost_usd=price(price_model or model, prompt, completion),
        upstream_ms=_ms(upstream_ms), overhead_ms=_ms(overhead_ms))
    if body is not None:
        _keep_body(call, body)
    return call


def _keep_body(call: GatewayCall, body: CallBody) -> None:
    """The call's body, under its own savepoint: a body that cannot be kept is logged and
    leaves the call's row (and the caller's transaction) as they are."""
    try:
        with transaction.atomic():
            store(call, body)
    except Exception:  # noqa: BLE001 - the inspector's record is bookkeeping too
        log.exception("could not keep the body of gateway call %s", call.pk)
    # expired bodies go after the commit, outside the call's transaction
    transaction.on_commit(sweep_due)


def record_quietly(session_id: int, **fields: Any) -> None:
    """:func:`record_call` for a call that already has its answer: a failure to write the
    record is logged and never changes what the client gets (nor, in a transaction, the
    rest of it: the row is written under its own savepoint)."""
    try:
        with transaction.atomic():
            record_call(session_id, **fields)
    except Exception:  # noqa: BLE001 - the record is bookkeeping; the client's answer stands
        log.exception("could not record the gateway call of session %s", session_id)
