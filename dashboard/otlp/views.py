"""``POST /v1/traces``: OTLP/HTTP trace export. The bearer token is a project API key, as an
exporter's headers setting sends it (``OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer
cs_..."``). Bodies are protobuf (``application/x-protobuf``) or JSON, plain or gzip. The answer
is 200 with ``partial_success`` naming refused spans; a body that cannot be read is a 400 and
nothing of it is stored."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ..api.auth import BearerKey
from ..services.trace_ingest import ingest
from . import wire

_bearer = BearerKey()
#: How far a gzip body may inflate when API_MAX_REQUEST_BYTES sets no limit (a small body
#: must not become gigabytes in memory).
_INFLATED_WITHOUT_LIMIT = 256 * 2**20


def _answer(content_type: str, body: bytes, status: int = 200, **headers: str) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=content_type)
    for key, value in headers.items():
        response[key.replace("_", "-")] = value
    return response


@csrf_exempt
@require_POST
def traces(request: HttpRequest) -> HttpResponse:
    content_type = (request.content_type or "").lower()
    answer_type = wire.PROTOBUF if content_type == wire.PROTOBUF else wire.JSON
    project = _bearer(request)
    if project is None:
        return _answer(answer_type, wire.status(answer_type, 16, "give a project API key as the bearer token "
                                                              "(Authorization: Bearer cs_...)"),
                       401, WWW_Authenticate='Bearer realm="api"')
    if content_type not in (wire.PROTOBUF, wire.JSON):
        return _answer(wire.JSON, wire.status(wire.JSON, 3, f"Content-Type {content_type!r} is not served "
                                                          f"({wire.PROTOBUF} or {wire.JSON})"), 415)
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    try:
        export = wire.read_request(request.body, content_type, encoding,
                                   settings.API_MAX_REQUEST_BYTES or _INFLATED_WITHOUT_LIMIT)
    except wire.BadBody as exc:
        return _answer(answer_type, wire.status(answer_type, 3, str(exc)), 400)
    result = ingest(project, export)
    return _answer(answer_type, wire.export_response(answer_type, result.rejected, result.error_message))
