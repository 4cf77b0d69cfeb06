"""Before/after of a run: the two contexts aligned by message, the summary in place."""
import re

from django.urls import reverse


def test_rows_align_every_message_of_the_snapshot_with_its_fate(web, last_run):
    html = web.get(reverse("pages:before-after", args=[last_run.pk])).content.decode()
    assert 'data-testid="before-after"' in html
    section = html.split('data-testid="before-after"', 1)[1]
    ids = re.findall(r'<div class="cell role-\w+" id="ba-([^"]+)">', section)
    assert ids == [r["message_id"] for r in last_run.ledger]
    fates = re.findall(r'<div class="cell fate-(\w+) role-', section)
    assert fates == [r["fate"] for r in last_run.ledger]


def test_the_summary_sits_beside_the_evicted_span_it_replaced(web, last_run):
    html = web.get(reverse("pages:before-after", args=[last_run.pk])).content.decode()
    section = html.split('data-testid="before-after"', 1)[1]
    assert section.count('data-testid="ba-summary"') == 1
    first_evicted = next(r for r in last_run.ledger if r["fate"] in ("summarized", "folded", "preserved"))
    span = section.split('data-testid="ba-span"')[1]
    assert f'id="ba-{first_evicted["message_id"]}"' in span.split('data-testid="ba-span"')[0]
    assert 'data-testid="ba-summary"' in span.split('class="ba-row"')[0]  # the same row
    previous = [r for r in last_run.ledger if r["fate"] == "kept"][0]
    assert section.index(f'id="ba-{previous["message_id"]}"') < section.index('data-testid="ba-summary"')


def test_contiguous_evicted_messages_collapse_into_one_row(web, last_run):
    html = web.get(reverse("pages:before-after", args=[last_run.pk])).content.decode()
    section = html.split('data-testid="before-after"', 1)[1]
    evicted = [r for r in last_run.ledger if r["fate"] in ("summarized", "folded", "preserved")]
    assert len(evicted) >= 3
    spans = re.findall(r'data-testid="ba-span"', section)
    shown = re.findall(r'<div class="ba-row" data-changed="[01]"', section)
    # a row per message the run kept, one for the evicted span; its messages inside it
    assert len(spans) == 1 and len(shown) == len(last_run.ledger) - len(evicted) + 1
    assert f"<strong>{len(evicted)} messages</strong>" in section


def test_evicted_messages_are_greyed_and_link_to_their_archived_original(web, last_run):
    html = web.get(reverse("pages:before-after", args=[last_run.pk])).content.decode()
    original = next(r for r in last_run.ledger if r["fate"] == "summarized" and r["provenance"] == "original")
    after = html.split(f'id="ba-{original["message_id"]}"', 1)[1].split('<div class="cell', 1)[1]
    cell = after.split("</div>", 1)[0]
    assert cell.startswith(" fate-summarized")
    assert "archived original" in cell and "?entry=ar_" in cell
    # engine-written turns (earlier summaries and acknowledgements) say what they were
    written = [r for r in last_run.ledger if r["provenance"] != "original"]
    for r in written:
        assert f'· {r["provenance"]}</small>' in html.split(f'id="ba-{r["message_id"]}"', 1)[1][:400]


def test_long_ledgers_are_paged(web, last_run):
    r = web.get(reverse("pages:before-after", args=[last_run.pk]), {"offset": 5})
    section = r.content.decode().split('data-testid="before-after"', 1)[1]
    ids = re.findall(r'<div class="cell role-\w+" id="ba-([^"]+)">', section)
    assert ids == [row["message_id"] for row in last_run.ledger[5:]]
