"""URL map: the dashboard pages (dashboard.urls_pages, which own "/"), the JSON API under
/api/, the OpenAI- and Anthropic-compatible gateway under /v1/ (dashboard.gateway), a liveness probe, the
admin and, when SERVE_STATIC is on, the static files."""
from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.views import serve as serve_static
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from .api import api
from .gateway.anthropic_views import messages as anthropic_messages
from .gateway.views import (
    chat_completions,
    responses_compact,
    responses_create,
    responses_not_served,
)
from .otlp.views import traces as otlp_traces


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness probe (no database, no auth): also the trivial view of bench/api_throughput.py."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("", include("dashboard.urls_pages")),  # the dashboard pages (first, so "/" is the sessions list)
    path("", RedirectView.as_view(url="/api/docs", permanent=False), name="home"),
    path("healthz", healthz, name="healthz"),
    path("api/", api.urls),
    path("v1/chat/completions", chat_completions, name="gateway-chat-completions"),
    path("v1/responses/compact", responses_compact, name="gateway-responses-compact"),
    path("v1/responses", responses_create, name="gateway-responses"),
    path("v1/responses/<path:rest>", responses_not_served),
    path("v1/messages", anthropic_messages, name="gateway-messages"),
    path("v1/traces", otlp_traces, name="otlp-traces"),
    path("admin/", admin.site.urls),
]

if settings.SERVE_STATIC:
    def _static(request: HttpRequest, path: str) -> HttpResponseBase:
        return serve_static(request, path, insecure=True)

    urlpatterns.append(re_path(r"^static/(?P<path>.*)$", _static))
