"""The REST API (django-ninja) under /api. OpenAPI: /api/openapi.json; docs: /api/docs
(swagger-ui served from our own static files, no CDN)."""
from __future__ import annotations

from typing import Any

from ninja import NinjaAPI
from ninja.openapi.schema import OpenAPISchema

from . import archive, errors, gateway_docs, policies, runs, search, sessions, tuning
from .auth import BearerKey, HeaderKey
from .parser import JsonBodyParser


class StudioAPI(NinjaAPI):
    """The API, whose OpenAPI document also describes the gateway's endpoints (served by
    ``dashboard.gateway``, outside django-ninja: see ``gateway_docs``)."""

    def get_openapi_schema(self, *, path_prefix: str | None = None,
                           path_params: dict[str, Any] | None = None) -> OpenAPISchema:
        return gateway_docs.add_to(super().get_openapi_schema(path_prefix=path_prefix,  # type: ignore[return-value]
                                                              path_params=path_params))


api = StudioAPI(
    title="Compaction studio API",
    version="1.0",
    description=(
        "Keep long LLM-agent sessions inside the context window. Authenticate with a project API key "
        "(`Authorization: Bearer KEY` or `X-API-Key: KEY`). Errors are JSON `{\"detail\": ...}`. "
        "Lists are cursor-paginated: pass `next_cursor` back as `cursor`."),
    auth=[BearerKey(), HeaderKey()],
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
    parser=JsonBodyParser(),
)
errors.install(api)
api.add_router("", sessions.router)
api.add_router("", runs.router)
api.add_router("", archive.router)
api.add_router("", search.router)
api.add_router("", policies.router)
api.add_router("", tuning.router)
