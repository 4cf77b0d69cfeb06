"""Every error is JSON {"detail": ...} with a fitting status code."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from ninja.errors import HttpError

from ..middleware import too_large
from ..services import ServiceError
from .auth import WWW_AUTHENTICATE
from .parser import BodyNotJson

ERROR_CODES = frozenset({400, 401, 404, 409, 413, 422})


def install(api) -> None:
    @api.exception_handler(ServiceError)
    def service_error(request, exc: ServiceError):
        body = {"detail": exc.detail}
        for name in ("field", "fault", "index", "line"):
            value = getattr(exc, name, None)
            if value is not None:
                body[name] = value
        response = api.create_response(request, body, status=exc.status)
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:  # a rate limit: when to try again
            response["Retry-After"] = str(retry_after)
        return response

    @api.exception_handler(HttpError)
    def http_error(request, exc: HttpError):
        """django-ninja's own errors; a 401 names the schemes a client can answer with, and
        a body that is not JSON says why (ninja wraps the parser's error in a bare 400)."""
        cause = exc.__cause__
        body: dict[str, str] = {"detail": str(cause) if isinstance(cause, BodyNotJson) else str(exc)}
        if isinstance(cause, BodyNotJson) and cause.field:
            body["field"] = cause.field
        response = api.create_response(request, body, status=exc.status_code)
        if exc.status_code == 401:
            response["WWW-Authenticate"] = WWW_AUTHENTICATE
        return response

    @api.exception_handler(RequestDataTooBig)
    def data_too_big(request, exc):
        return too_large(None, settings.API_MAX_REQUEST_BYTES)
