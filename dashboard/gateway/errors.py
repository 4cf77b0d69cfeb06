"""Errors the gateway answers with, in OpenAI's error-object shape, so the OpenAI SDK raises
the class a caller expects (BadRequestError, AuthenticationError, RateLimitError...)."""
from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

from compaction.redaction import redact, redact_json


class GatewayError(Exception):
    """An answer other than a completion: ``status`` and the OpenAI ``error`` object.

    Every gateway answer that is not a completion, and the log lines and SSE error events made
    from it, is built from one of these; an upstream's text enters it here, so its message and
    error object are redacted here (``compaction.redaction``: an upstream or proxy that
    echoes the operator's key in its error never hands it to the client)."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | int | None = None,
                 headers: dict[str, str] | None = None, body: dict[str, Any] | None = None):
        message = redact(message)
        if body is not None:
            cleaned = redact_json(body)
            body = cleaned if isinstance(cleaned, dict) else None
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})
        self.body = body  # an upstream error object passed through as it came

    def error_object(self) -> dict[str, Any]:
        if self.body is not None:
            return self.body
        return {"message": self.message, "type": self.type, "param": self.param, "code": self.code}

    def response(self) -> HttpResponse:
        out = HttpResponse(json.dumps({"error": self.error_object()}), status=self.status,
                           content_type="application/json")
        for key, value in self.headers.items():
            out[key] = value
        return out


def project_gone() -> GatewayError:
    """The key's project was deleted while the key was still cached (API_KEY_CACHE_SECONDS)."""
    return GatewayError(401, "the project of this API key no longer exists", code="invalid_api_key",
                        headers={"WWW-Authenticate": 'Bearer realm="api"'})


def bad_request(message: str, param: str | None = None, code: str | None = None) -> GatewayError:
    return GatewayError(400, message, param=param, code=code)


def upstream_failure(status: int | None, message: str, *, body: dict[str, Any] | None = None,
                     retry_after: str | None = None, timeout: bool = False) -> GatewayError:
    """An upstream's failure as the client's SDK expects it: the same status and error object;
    a timeout is 504; no status (unreachable, broken answer) is 502; the upstream refusing the
    operator's key is 502 too (a 401 would tell the client its own project key is wrong)."""
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    if timeout or status == 408:
        return GatewayError(504, f"the upstream did not answer in time: {message}", type="timeout", headers=headers)
    if status is None or status < 400:
        return GatewayError(502, f"the upstream could not be reached: {message}", type="server_error",
                            headers=headers)
    if status in (401, 403):
        return GatewayError(502, f"the upstream refused the gateway's credentials (the operator's key; HTTP {status}): "
                                 f"{message}",
                            type="server_error", headers=headers)
    kind = "rate_limit_error" if status == 429 else ("server_error" if status >= 500 else "invalid_request_error")
    return GatewayError(status, message, type=kind, headers=headers, body=body)
