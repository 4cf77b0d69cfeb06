"""Template tags of the sortable lists (sessions, runs): a column header that sorts."""
from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag(takes_context=True)
def sort_link(context: dict[str, Any], name: str, label: str, first: str = "desc") -> SafeString:
    """A header link sorting on ``name``: the current sort column flips direction, another
    column starts ``first`` (desc: largest first). Other filters stay; the cursor goes
    (it belongs to the old order). The arrow says the current order."""
    request = context["request"]
    current = context["filters"].sort
    active = current.lstrip("-") == name
    descending = current.startswith("-")
    if active:
        target = name if descending else f"-{name}"
    else:
        target = f"-{name}" if first == "desc" else name
    params = request.GET.copy()
    for key in ("cursor", "prev", "sort"):
        params.pop(key, None)
    params["sort"] = target
    arrow = (" ↓" if descending else " ↑") if active else ""
    state = ("descending" if descending else "ascending") if active else ""
    return format_html('<a href="?{}" data-sort="{}"{}>{}{}</a>', params.urlencode(), name,
                       format_html(' aria-label="{}, sorted {}"', label, state) if state else "", label, arrow)


@register.simple_tag(takes_context=True)
def aria_sort(context: dict[str, Any], name: str) -> str:
    """The aria-sort value of a header cell ("none" unless the list is sorted on it)."""
    current = context["filters"].sort
    if current.lstrip("-") != name:
        return "none"
    return "descending" if current.startswith("-") else "ascending"
