"""Live what-if: a preview that a later edit of the same page superseded is not replayed (or
stops mid-replay) and answers 204, so the server's time goes to the preview the user waits
for; a client that does not number its previews gets every one replayed in full."""
from __future__ import annotations

import logging

import pytest
from django.core.cache import cache
from django.http import QueryDict
from django.urls import reverse

from dashboard.selectors.tuning import tuning_preview
from dashboard.services.superseded import CHECK_EVERY, Superseded, take_ticket
from tests.pages.tuning_form import posted_form


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def post(web, session, data):
    return web.post(reverse("pages:tuning-preview", args=[session.pk]), data, HTTP_HX_REQUEST="true")


def test_a_numbered_preview_is_replayed_when_it_is_the_latest(web, grown):
    r = post(web, grown, {**posted_form(grown, trigger_value="4000"), "whatif_page": "page-token-1", "whatif_seq": "1"})
    assert r.status_code == 200 and 'data-testid="preview-result"' in r.content.decode()


def test_a_preview_that_arrives_after_a_later_one_is_not_replayed(web, grown, caplog):
    post(web, grown, {**posted_form(grown, trigger_value="4000"), "whatif_page": "page-token-1", "whatif_seq": "5"})
    with caplog.at_level(logging.INFO, logger="dashboard.pages"):
        r = post(web, grown, {**posted_form(grown, trigger_value="9000"), "whatif_page": "page-token-1",
                              "whatif_seq": "4"})
    assert r.status_code == 204 and r.content == b""
    assert any("superseded" in rec.getMessage() or "arrived after" in rec.getMessage() for rec in caplog.records)
    # another page (another tab) of the same session is not held up by this one's numbers
    r = post(web, grown, {**posted_form(grown, trigger_value="9000"), "whatif_page": "page-token-2", "whatif_seq": "1"})
    assert r.status_code == 200


def test_a_replay_stops_once_a_later_preview_arrives(grown):
    """The later preview arrives while the replay runs: the ticket's progress check sees it
    at the next look and the replay stops there instead of running to the end."""
    ticket = take_ticket(1, grown.pk, "page-token-1", "1")
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done == CHECK_EVERY - 1:
            take_ticket(1, grown.pk, "page-token-1", "2")  # the user typed again
        ticket.progress(done, total)

    with pytest.raises(Superseded):
        tuning_preview(grown, _query(posted_form(grown, trigger_value="4000")), progress=progress)
    assert seen[-1] == CHECK_EVERY < grown.message_count


def test_without_numbers_every_preview_is_replayed(web, grown):
    for value in ("4000", "9000"):
        r = post(web, grown, posted_form(grown, trigger_value=value))
        assert r.status_code == 200 and 'data-testid="preview-result"' in r.content.decode()
    # malformed tokens are ignored rather than trusted as cache keys
    r = post(web, grown, {**posted_form(grown), "whatif_page": "../../etc", "whatif_seq": "1"})
    assert r.status_code == 200


def _query(data: dict):
    q = QueryDict(mutable=True)
    for key, value in data.items():
        if isinstance(value, list):
            q.setlist(key, value)
        else:
            q[key] = value
    return q
