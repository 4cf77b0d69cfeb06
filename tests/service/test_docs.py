"""/api/docs works offline: every asset it loads is served by us."""
from __future__ import annotations

import re


def test_the_docs_page_loads_only_local_assets_that_are_served(client, db):
    page = client.get("/api/docs")
    assert page.status_code == 200
    html = page.content.decode()
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert urls and all(u.startswith("/") for u in urls), urls
    for u in urls:
        r = client.get(u)
        assert r.status_code == 200, u
        assert int(r.get("Content-Length") or len(b"".join(r.streaming_content))) > 1000, u
    assert any(u.endswith("swagger-ui-bundle.js") for u in urls)


def test_the_openapi_document_names_every_route_and_the_auth_schemes(client, db):
    doc = client.get("/api/openapi.json").json()
    assert doc["info"]["title"] == "Compaction studio API"
    schemes = doc["components"]["securitySchemes"]
    assert {s["type"] for s in schemes.values()} == {"http", "apiKey"}
    assert "/api/sessions/{session_id}/context" in doc["paths"]
    assert len(doc["paths"]) >= 17
