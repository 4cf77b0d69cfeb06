"""Before/after of a run: the two contexts aligned by message, the summary in place."""
import re

from django.urls import reverse

from tests.pages import factories


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


def _kept_tail_text(html: str) -> str:
    block = html.split('data-testid="kept-tail"', 1)[1].split("</div>", 1)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", block))


def _forced_long_run(project, capture, **cut):
    """A 305-message session (system, then 76 rounds) forced with keep_messages 8."""
    session = factories.import_messages(project, factories.agent_messages(76, words=20, tag="k"), title="Long run")
    run = factories.force(session, capture=capture,
                          overrides={"cut.keep_messages": 8, **{f"cut.{k}": v for k, v in cut.items()}})
    assert run.status == "succeeded", run.error
    return run


def test_a_forced_run_whose_keep_fraction_is_0_keeps_only_the_latest_round_and_says_why(
        web, project, django_capture_on_commit_callbacks):
    """keep_fraction 0 wins over keep_messages 8, but the latest round (here the agent's last
    answer) stays whatever the bounds say: the after side holds the system message, the
    summary and that answer, and both run pages say why."""
    run = _forced_long_run(project, django_capture_on_commit_callbacks, keep_fraction=0)
    assert [r["fate"] for r in run.ledger if r["fate"] not in ("summarized", "preserved")] == ["kept", "kept"]
    assert run.ledger[0]["role"] == "system" and run.ledger[-1]["fate"] == "kept"
    for name in ("pages:before-after", "pages:run"):
        text = _kept_tail_text(web.get(reverse(name, args=[run.pk])).content.decode())
        assert "Kept tail: the last 1 message (#304) stay" in text, name
        assert "Only the latest round stays" in text and "cut.keep_latest_round" in text, name
        assert "cut.keep_fraction is 0" in text and "cut.keep_messages (8)" in text, name
        assert "no user turn" not in text, name


def test_without_the_latest_round_rule_keep_fraction_0_keeps_no_tail_and_says_why(
        web, project, django_capture_on_commit_callbacks):
    """cut.keep_latest_round off (Eino's preset): the after side holds the system message and
    the summary only, and both run pages say that this is what the policy asked for."""
    run = _forced_long_run(project, django_capture_on_commit_callbacks, keep_fraction=0, keep_latest_round=False)
    assert [r["fate"] for r in run.ledger if r["fate"] not in ("summarized", "preserved")] == ["kept"]
    assert run.ledger[0]["role"] == "system" and run.ledger[0]["fate"] == "kept"
    for name in ("pages:before-after", "pages:run"):
        text = _kept_tail_text(web.get(reverse(name, args=[run.pk])).content.decode())
        assert "Kept tail: none, no message after the summary stays verbatim." in text, name
        assert "cut.keep_fraction is 0" in text and "cut.keep_messages (8)" in text, name
        assert "no user turn" not in text, name


def test_the_kept_tail_is_named_with_the_bound_that_decided_it(web, project, django_capture_on_commit_callbacks):
    run = _forced_long_run(project, django_capture_on_commit_callbacks, keep_fraction=0.25)
    tail = [r for r in run.ledger[1:] if r["fate"] == "kept"]
    assert len(tail) == 8 and tail[-1]["ordinal"] == 304
    text = _kept_tail_text(web.get(reverse("pages:before-after", args=[run.pk])).content.decode())
    assert "Kept tail: the last 8 messages (#297–#304) stay verbatim after the summary." in text
    assert "cut.keep_messages (8) bounds the tail" in text
