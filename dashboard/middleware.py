"""Request size limit: answer 413 before the body is read."""
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
