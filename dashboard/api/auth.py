"""API key authentication: ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``.
``request.auth`` becomes the key's Project."""
from __future__ import annotations

from ninja.security import APIKeyHeader, HttpBearer

from ..services.keys import authenticate

# The challenge of every 401 (RFC 9110): a bearer token; the X-API-Key header is the same key.
WWW_AUTHENTICATE = 'Bearer realm="compaction studio API"'


class BearerKey(HttpBearer):
    openapi_description = "A project API key (python manage.py create_api_key --project NAME)."

    def authenticate(self, request, token):
        return authenticate(token)


class HeaderKey(APIKeyHeader):
    param_name = "X-API-Key"
    openapi_description = "The same project API key, in the X-API-Key header."

    def authenticate(self, request, key):
        return authenticate(key) if key else None
