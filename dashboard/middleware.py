"""Middleware of every response: the request size limit (413 before the body is read) and
the Content-Security-Policy header."""
from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse


class RequestSizeLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.API_MAX_REQUEST_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "invalid Content-Length header"}, status=400)
        if limit and length > limit:
            return too_large(length, limit)
        return self.get_response(request)


def too_large(length: int | None, limit: int) -> JsonResponse:
    size = f"{length:,} bytes" if length else "the request body"
    return JsonResponse(
        {"detail": f"request body too large: {size} exceeds the limit of {limit:,} bytes "
                   f"(API_MAX_REQUEST_BYTES)"}, status=413)


def content_security_policy(directives: dict[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in directives.items())


class ContentSecurityPolicyMiddleware:
    """Adds settings.CONTENT_SECURITY_POLICY to every response that has none yet. The pages
    keep their scripts in static files and their data in ``application/json`` blocks, so the
    policy needs no 'unsafe-inline' and no nonce: an injected script cannot run."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(policy)
        return response
