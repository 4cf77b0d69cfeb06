"""HTTP entry points of the gateway: ``POST /v1/chat/completions`` (the work is in ``chat``),
``POST /v1/responses`` (in ``responses_create``), ``POST /v1/responses/compact`` (in
``responses``); the other ``/v1/responses`` paths (retrieving a response, its input items)
are not served and say so. The bearer token is the project API key, as the OpenAI SDK sends its ``api_key``."""
from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ..api.auth import BearerKey
from ..models import Project
from . import chat, responses, responses_body, responses_input
from . import responses_create as create_flow
from . import responses_wire as rwire
from .body import parse
from .errors import GatewayError
from .identity import hint
from .sent import AnswerThen, event_stream

log = logging.getLogger("dashboard.gateway")

_bearer = BearerKey()
_View = TypeVar("_View", bound=Callable[..., HttpResponseBase])
_Response = TypeVar("_Response", bound=HttpResponseBase)


def _openai_errors(what: str) -> Callable[[_View], _View]:
    """A gateway view's failures answered as OpenAI-shaped errors: a GatewayError as itself,
    anything else as a 500 (the SDK's InternalServerError), logged with its traceback as
    ``gateway <what> failed``."""
    def wrap(view: _View) -> _View:
        @functools.wraps(view)
        def answered(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                return view(request, *args, **kwargs)
            except GatewayError as exc:
                return exc.response()
            except Exception:  # noqa: BLE001 - an OpenAI-shaped 500, logged with its traceback
                log.exception("gateway %s failed", what)
                return GatewayError(500, "the gateway failed; the error is in the server's log",
                                    type="server_error").response()
        return answered  # type: ignore[return-value]  # the same signature as the view's
    return wrap


def _with_headers(response: _Response, headers: Mapping[str, str]) -> _Response:
    for key, value in headers.items():
        response[key] = value
    return response


def _project(request: HttpRequest) -> Project:
    """The key's project, not read yet: most calls need only its id (to find the session,
    whose policy the session query reads); its other fields load when first used, and a
    new session reads it whole (``identity._start``)."""
    found = _bearer(request)
    if found is None:
        raise GatewayError(401, "Incorrect API key provided: give a project API key as the bearer token "
                                "(the OpenAI client's api_key)", code="invalid_api_key",
                           headers={"WWW-Authenticate": 'Bearer realm="api"'})
    return Project.from_db(None, ["id"], [found.pk])


def _sse(prep: chat.Prepared, first: dict[str, Any] | None, rest: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    if first is not None:
        yield b"data: " + json.dumps(first).encode() + b"\n\n"
    try:
        for chunk in rest:
            yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    except GatewayError as exc:
        yield b"data: " + json.dumps({"error": exc.error_object()}).encode() + b"\n\n"
        return
    except Exception:  # noqa: BLE001 - the stream has started; end it with an error event, never a traceback
        log.exception("gateway stream of session %s failed", prep.session.pk)
        yield b"data: " + json.dumps({"error": {"message": "the gateway failed while streaming", "type": "server_error",
                                                 "param": None, "code": None}}).encode() + b"\n\n"
        return
    yield b"data: [DONE]\n\n"


@csrf_exempt
@require_POST
@_openai_errors("request")
def chat_completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    project = _project(request)
    header = request.headers.get("X-Session-Id")
    body = parse(request.body, lazy=True, hint=hint(project.pk, header))
    prep = chat.prepare(project, body, header)
    if not body.stream:
        completion = chat.complete(prep)
        return _with_headers(AnswerThen(completion, lambda: chat.store_after_sent(prep)), prep.headers)
    chunks = chat.stream(prep)
    # The first chunk is awaited here, so an upstream that fails at once answers
    # with its own status (what the SDK turns into RateLimitError and the like).
    first = next(chunks, None)
    return _with_headers(event_stream(_sse(prep, first, chunks)), prep.headers)


@csrf_exempt
@require_POST
@_openai_errors("compaction")
def responses_compact(request: HttpRequest) -> HttpResponse:
    project = _project(request)
    answer, headers = responses.compact(project, request.body, request.headers.get("X-Session-Id"))
    return _with_headers(HttpResponse(json.dumps(answer), content_type="application/json"), headers)


def _response_events(prep: chat.Prepared, events: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    try:
        for event in events:
            yield rwire.sse(event)
    except Exception:  # noqa: BLE001 - the stream has started; end it with an error event, never a traceback
        log.exception("gateway responses stream of session %s failed", prep.session.pk)
        yield rwire.sse({"type": "error", "code": "server_error", "message": "the gateway failed while streaming",
                         "param": None, "sequence_number": 0})


@csrf_exempt
@_openai_errors("responses request")
def responses_create(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    if request.method != "POST":
        return responses_not_served(request)
    project = _project(request)
    header = request.headers.get("X-Session-Id")
    data = request.body
    # The call's overhead counts from here, as on chat completions: the key's check and the
    # body's arrival (the client's upload, which a direct call to the upstream makes too)
    # are not the gateway's work; reading the items and putting the history together are.
    started = time.perf_counter()
    req = responses_body.parse(data, responses_input.hint(project.pk, header))
    answer = create_flow.answer(project, req, header, started)
    prep = answer.prep
    if answer.response is not None:
        return _with_headers(AnswerThen(answer.response, lambda: chat.store_after_sent(prep)), prep.headers)
    assert answer.events is not None
    return _with_headers(event_stream(_response_events(prep, answer.events)), prep.headers)


# What a client asking for an endpoint this gateway lacks is told it has instead.
SERVED = "POST /v1/chat/completions, POST /v1/messages, POST /v1/responses and POST /v1/responses/compact"


@csrf_exempt
def responses_not_served(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Reading responses back (``GET /v1/responses/{id}``, its input items, cancel, delete) is
    not served: an OpenAI-shaped 404 that names what is, so an SDK raises NotFoundError with a
    message that says what to do."""
    try:
        _project(request)
    except GatewayError as exc:
        return exc.response()
    return GatewayError(404, f"{request.method} {request.path} is not served by this gateway; it serves {SERVED} "
                             f"(the gateway keeps each conversation as a session: send it whole, or continue a response by "
                             f"its previous_response_id)",
                        code="unsupported_endpoint").response()
