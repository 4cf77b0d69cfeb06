"""One gateway call's inspector page, and the exact body it sent upstream as a download."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..selectors.access import call_for
from ..selectors.gateway_call import call_page, upstream_bytes
from ._common import page


@login_required
@require_GET
def call_detail(request: HttpRequest, pk: int) -> HttpResponse:
    call = call_for(request.user, pk)
    return page(request, "pages/gateway_call.html", {"nav": "session", "session": call.session, "c": call_page(call)},
                project=call.session.project)


@login_required
@require_GET
def upstream_json(request: HttpRequest, pk: int) -> HttpResponse:
    """The bytes sent upstream, as they were (no re-serialisation)."""
    call = call_for(request.user, pk)
    data = upstream_bytes(call)
    if data is None:
        raise Http404("this call's body is not kept")
    response = HttpResponse(data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="call-{call.pk}-upstream.json"'
    return response
