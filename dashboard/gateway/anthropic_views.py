"""HTTP entry point of ``POST /v1/messages`` (Anthropic-compatible; thin: the work is in
``anthropic_messages``). The project API key comes as the Anthropic SDK sends its
``api_key`` (``x-api-key``) or as a bearer token; every refusal is Anthropic's error object."""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ..models import Project
from ..services.keys import authenticate
from . import anthropic_messages as messages_flow
from . import anthropic_wire as wire
from . import chat
from .errors import GatewayError
from .sent import AnswerThen, event_stream

log = logging.getLogger("dashboard.gateway")


def _key(request: HttpRequest) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    scheme, _, token = (request.headers.get("Authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _project(request: HttpRequest) -> Project:
    found = authenticate(_key(request) or "")
    if found is None:
        raise GatewayError(401, "invalid x-api-key: give a project API key as the Anthropic client's api_key "
                                "(x-api-key header) or as a bearer token")
    project = Project.objects.select_related("active_policy").filter(pk=found.pk).first()
    if project is None:
        raise GatewayError(401, "the project of this API key no longer exists")
    return project


def error_response(exc: GatewayError) -> HttpResponse:
    out = HttpResponse(json.dumps(wire.error_object(exc)), status=exc.status, content_type="application/json")
    for key, value in exc.headers.items():
        out[key] = value
    return out


def _sse(session_id: int, events: Iterator[tuple[str, dict]]) -> Iterator[bytes]:
    try:
        for name, data in events:
            yield wire.sse(name, data)
    except GatewayError as exc:
        yield wire.sse("error", wire.error_object(exc))
    except Exception:  # noqa: BLE001 - the stream has started; end it with an error event, never a traceback
        log.exception("gateway messages stream of session %s failed", session_id)
        yield wire.sse("error", {"type": "error", "error": {"type": "api_error",
                                                            "message": "the gateway failed while streaming"}})


@csrf_exempt
@require_POST
def messages(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    try:
        project = _project(request)
        messages_flow.check_version(request.headers.get("anthropic-version"))
        body = messages_flow.parse(request.body)
        answer = messages_flow.answer(project, body, request.headers.get("X-Session-Id"))
        if answer.message is not None:
            prep = answer.prep
            response: HttpResponse | StreamingHttpResponse = AnswerThen(answer.message,
                                                                        lambda: chat.store_after_sent(prep))
        else:
            assert answer.events is not None
            response = event_stream(_sse(answer.prep.session.pk, answer.events))
    except GatewayError as exc:
        return error_response(exc)
    except Exception:  # noqa: BLE001 - Anthropic's api_error (the SDK's InternalServerError), logged with its traceback
        log.exception("gateway messages request failed")
        return error_response(GatewayError(500, "the gateway failed; the error is in the server's log"))
    for key, value in answer.prep.headers.items():
        response[key] = value
    return response
