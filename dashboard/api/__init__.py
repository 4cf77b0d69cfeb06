"""The REST API (django-ninja) under /api. OpenAPI: /api/openapi.json; docs: /api/docs
(swagger-ui served from our own static files, no CDN)."""
from __future__ import annotations

from ninja import NinjaAPI

from . import archive, errors, policies, runs, search, sessions
from .auth import BearerKey, HeaderKey
from .parser import JsonBodyParser

api = NinjaAPI(
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
