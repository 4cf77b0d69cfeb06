"""The tuning form posted as a browser posts it."""
from __future__ import annotations

from typing import Any

from dashboard.selectors.tuning import policy_form, starting_point


def posted_form(session, side: str = "a", preset: str = "current", **changes: Any) -> dict[str, Any]:
    """The fields of one side as the page first renders them, with ``changes`` typed in
    (a checked box posts "1", an unchecked one nothing, a multiple select a list)."""
    form = policy_form(session, starting_point(session), side=side, preset=preset)
    data: dict[str, Any] = {}
    for bf in form:
        value = bf.value()
        if bf.widget_type == "checkbox":
            if value:
                data[bf.html_name] = "1"
        elif bf.widget_type == "selectmultiple":
            data[bf.html_name] = list(value or [])
        else:
            data[bf.html_name] = "" if value is None else str(value)
    data.update({f"{side}-{k}": v for k, v in changes.items()})
    return data
