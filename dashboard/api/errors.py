"""Every error is JSON {"detail": ...} with a fitting status code."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from ..middleware import too_large
from ..services import ServiceError

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

    @api.exception_handler(RequestDataTooBig)
    def data_too_big(request, exc):
        return too_large(None, settings.API_MAX_REQUEST_BYTES)
