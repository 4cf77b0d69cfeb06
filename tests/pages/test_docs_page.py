"""The Docs page: README and docs/*.md readable from the menu, beside the API reference."""
from __future__ import annotations

from django.urls import reverse

from dashboard.selectors import docs


def test_the_menu_links_the_docs_and_the_api_reference(web, project):
    html = web.get(reverse("pages:sessions")).content.decode()
    assert f'href="{reverse("pages:docs")}"' in html and 'href="/api/docs"' in html


def test_the_readme_renders_with_links_between_documents(web, project):
    html = web.get(reverse("pages:doc", args=["readme"])).content.decode()
    assert "<h1>compaction studio</h1>" in html
    assert f'href="{reverse("pages:doc", args=["architecture"])}"' in html
    assert "<em>(image: Session timeline)</em>" in html  # screenshots are not served: no broken image
    for slug in ("service", "policy", "architecture"):
        assert web.get(reverse("pages:doc", args=[slug])).status_code == 200


def test_only_the_listed_documents_are_served(web, project):
    assert web.get(reverse("pages:doc", args=["pyproject"])).status_code == 404
    assert web.get("/docs/..%2Fpyproject.toml/").status_code == 404


def test_raw_html_in_a_document_is_shown_as_text(tmp_path, monkeypatch, web, project):
    page = tmp_path / "README.md"
    page.write_text('# Title\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) <img src=x onerror=alert(2)>\n')
    monkeypatch.setattr(docs, "REPO", tmp_path)
    monkeypatch.setattr(docs, "DOCS", (docs.Doc("readme", "README", "README.md"),))
    monkeypatch.setattr(docs, "_BY_SLUG", {"readme": docs.DOCS[0]})
    html = web.get(reverse("pages:doc", args=["readme"])).content.decode()
    body = html.split('data-testid="doc-body"', 1)[1]
    assert "<script>alert" not in body and "&lt;script&gt;" in body
    assert "<img" not in body and 'href="javascript:' not in body


def test_a_block_the_docs_test_does_not_run_shows_why_on_the_page(web, project):
    """The marker of tests/service/test_doc_blocks.py is the block's first line: the page shows
    it inside the block, as GitHub does."""
    html = web.get(reverse("pages:doc", args=["readme"])).content.decode()
    assert '<pre><code class="language-sh"># not run in tests: the first starts the servers' in html
