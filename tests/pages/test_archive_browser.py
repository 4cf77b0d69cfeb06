"""Archive browser: entries by run, search, content by offset/limit, the replay check."""
import re

from django.urls import reverse

from dashboard.models import StoredArchiveEntry


def test_entries_are_grouped_by_the_run_that_wrote_them(web, grown):
    html = web.get(reverse("pages:archive", args=[grown.pk])).content.decode()
    assert 'data-testid="archive"' in html
    for e in StoredArchiveEntry.objects.filter(session=grown):
        assert e.entry_id[:16] in html
        assert f'href="/runs/{e.run_id}/"' in html
    assert html.count('data-testid="archive-entry-link"') == StoredArchiveEntry.objects.filter(session=grown).count()


def test_filtering_by_run_shows_only_its_entries(web, grown, last_run):
    html = web.get(reverse("pages:archive", args=[grown.pk]), {"run": last_run.pk}).content.decode()
    shown = set(re.findall(r"<code>(ar_[0-9a-f]+)</code></a>", html))
    assert shown == set(last_run.archive_refs)  # the whole handle, as agents see it


def test_an_entry_opens_and_pages_by_offset_and_limit(web, grown):
    entry = StoredArchiveEntry.objects.filter(session=grown, kind="evicted").order_by("-item_count").first()
    url = reverse("pages:archive-entry", args=[grown.pk, entry.entry_id])
    html = web.get(url, {"offset": 0, "limit": 3}, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="archive-content"' in html and "<html" not in html
    assert re.findall(r'id="archived-[^"]+-(\d+)"', html) == ["0", "1", "2"]
    html = web.get(url, {"offset": 3, "limit": 3}, HTTP_HX_REQUEST="true").content.decode()
    assert re.findall(r'id="archived-[^"]+-(\d+)"', html) == ["3", "4", "5"]
    assert "← Previous" in html
    # the archived text is the original, whole
    first = entry.items.order_by("index").first()
    text = first.raw["content"] if isinstance(first.raw.get("content"), str) else None
    html = web.get(url, {"offset": 0, "limit": 1}, HTTP_HX_REQUEST="true").content.decode()
    if text:
        assert text.split()[0] in html


def test_a_plain_link_to_an_entry_opens_the_browser_on_it(web, grown):
    entry = StoredArchiveEntry.objects.filter(session=grown).first()
    r = web.get(reverse("pages:archive-entry", args=[grown.pk, entry.entry_id]))
    assert r.status_code == 302 and f"?entry={entry.entry_id}" in r["Location"]
    html = web.get(r["Location"].split("#")[0]).content.decode()
    assert 'data-testid="archive-content"' in html


def test_an_entry_of_another_session_is_not_found(web, grown, small):
    entry = StoredArchiveEntry.objects.filter(session=grown).first()
    assert web.get(reverse("pages:archive-entry", args=[small.pk, entry.entry_id]), HTTP_HX_REQUEST="true").status_code == 404


def test_search_finds_archived_text(web, grown):
    url = reverse("pages:archive", args=[grown.pk])
    html = web.get(url, {"q": "module_1.py"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="archive-search-results").content.decode()
    assert "<html" not in html and "module_1.py" in html and "?entry=ar_" in html
    html = web.get(url, {"q": "nowhere-to-be-found"}, HTTP_HX_REQUEST="true",
                   HTTP_HX_TARGET="archive-search-results").content.decode()
    assert "Nothing archived matches" in html


def test_the_replay_check_rebuilds_the_history_exactly(web, grown):
    html = web.get(reverse("pages:archive-replay", args=[grown.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="replay-ok"' in html and f"{grown.message_count} messages rebuilt" in html
