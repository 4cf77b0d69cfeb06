"""The project's own documentation (README.md and docs/*.md), rendered for the dashboard's
Docs page. Only the files listed here are served, by a fixed name: a request never names a
path. Markdown is rendered by markdown-it-py with raw HTML off (HTML in a file is shown as
text, and links with unsafe schemes are dropped by its link validator); links between these
files point at their Docs pages; images are replaced by their description, since the
repository's screenshots are not served."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.http import Http404
from django.urls import reverse
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token

REPO = Path(settings.BASE_DIR)


@dataclass(frozen=True)
class Doc:
    slug: str
    title: str
    rel: str  # the file, relative to the repository's root

    @property
    def path(self) -> Path:
        return REPO / self.rel


DOCS = (
    Doc("readme", "Overview (README)", "README.md"),
    Doc("service", "The service: settings, API, gateway, runs", "docs/SERVICE.md"),
    Doc("policy", "Every policy setting", "docs/POLICY.md"),
    Doc("architecture", "Architecture: where each change goes", "docs/ARCHITECTURE.md"),
)
_BY_SLUG = {d.slug: d for d in DOCS}


def available_docs() -> list[Doc]:
    return [d for d in DOCS if d.path.is_file()]


def _link_targets() -> dict[str, str]:
    out = {}
    for d in DOCS:
        url = reverse("pages:doc", args=[d.slug])
        out[d.rel] = out[Path(d.rel).name] = out["../" + d.rel] = url
    return out


def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    targets = _link_targets()

    def link_open(self: RendererHTML, tokens: list[Token], idx: int, options, env) -> str:
        href = str(tokens[idx].attrGet("href") or "")
        page, _, anchor = href.partition("#")
        if page in targets:
            tokens[idx].attrSet("href", targets[page] + (f"#{anchor}" if anchor else ""))
        return self.renderToken(tokens, idx, options, env)

    def image(self: RendererHTML, tokens: list[Token], idx: int, options, env) -> str:
        alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
        return f"<em>(image: {md.utils.escapeHtml(alt)})</em>"

    def table_open(self: RendererHTML, tokens: list[Token], idx: int, options, env) -> str:
        return '<div class="scroll-x">' + self.renderToken(tokens, idx, options, env)

    def table_close(self: RendererHTML, tokens: list[Token], idx: int, options, env) -> str:
        return self.renderToken(tokens, idx, options, env) + "</div>"

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("image", image)
    md.add_render_rule("table_open", table_open)
    md.add_render_rule("table_close", table_close)
    return md


@lru_cache(maxsize=16)
def _render(path: str, mtime: float) -> str:
    return _renderer().render(Path(path).read_text(encoding="utf-8"))


def render_doc(slug: str) -> tuple[Doc, str]:
    """(the document, its HTML), or 404 for a name not in DOCS."""
    doc = _BY_SLUG.get(slug)
    if doc is None or not doc.path.is_file():
        raise Http404("no such document")
    return doc, _render(str(doc.path), doc.path.stat().st_mtime)
