"""Session page: timeline data, compaction badges, transcript pages, both token numbers."""
import json
import re

from django.urls import reverse

from dashboard.models import CompactionRun
from dashboard.selectors.session_page import session_runs
from dashboard.services.sessions import append_messages
from dashboard.templatetags.studio import tokens
from tests.pages import factories


def timeline_data(html: str) -> dict:
    m = re.search(r'<script id="timeline-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def test_the_page_has_its_landmarks_and_labels_both_numbers(web, grown):
    html = web.get(reverse("pages:session", args=[grown.pk])).content.decode()
    for testid in ("timeline", "transcript", "force-summarize", "context-now", "total-tokens"):
        assert f'data-testid="{testid}"' in html
    assert "Context now" in html and "Total tokens" in html
    assert f"{grown.context_total:,}" in html and f"{grown.history_total:,}" in html


def test_the_timeline_has_a_bar_per_message_a_line_per_model_call_markers_and_thresholds(web, grown):
    data = timeline_data(web.get(reverse("pages:session", args=[grown.pk])).content.decode())
    n = grown.message_count
    assert data["n"] == n and data["bucket"] == 1 and len(data["x"]) == n
    assert set(data["categories"]) >= {"user", "assistant", "tool_calls", "tool_results", "system"}
    assert all(len(s) == n for s in data["series"])
    calls = [i for i, v in enumerate(data["context"]) if v is not None]
    assert len(calls) == sum(data["calls"]) == 60  # one per assistant message
    runs = list(CompactionRun.objects.filter(session=grown, status="succeeded").order_by("id"))
    assert [m["run"] for m in data["markers"]] == [r.pk for r in runs]
    assert {m["tokens_before"] for m in data["markers"]} == {r.tokens_before["total"] for r in runs}
    assert any(t["label"] == "summary trigger: 6,000 tokens" and t["value"] == 6000 for t in data["thresholds"])


def test_the_context_line_drops_after_each_compaction(web, grown):
    data = timeline_data(web.get(reverse("pages:session", args=[grown.pk])).content.decode())
    ctx = data["context"]
    checked = 0
    for m in data["markers"]:
        before = [v for v in ctx[: m["position"]] if v is not None][-1]
        after = next((v for v in ctx[m["position"]:] if v is not None), None)
        if after is not None:  # a compaction after the last model call has no call after it
            assert after < before, m
            checked += 1
    assert checked >= 2
    # the context line never goes far above the trigger: compactions kept it in check
    assert max(v for v in ctx if v is not None) < 6000 * 1.5


def test_compaction_badges_read_like_a_sentence(web, grown, last_run):
    # open the transcript page that holds the run's commit position
    position = next(r.commit_position for r in session_runs(grown) if r.pk == last_run.pk)
    html = web.get(reverse("pages:session", args=[grown.pk]) + f"?around={min(position, grown.message_count - 1)}").content.decode()
    b = last_run

    expected = (f"Compacted {b.messages_before} → {b.messages_after} messages, "
                f"{tokens(b.tokens_before['total'])} → {tokens(b.tokens_after['total'])} tokens")
    assert expected in html
    assert f'href="/runs/{b.pk}/before-after/"' in html
    assert "<details>\n    <summary>Summary (" in html


def test_the_transcript_is_paged_with_load_more(web, grown):
    html = web.get(reverse("pages:session", args=[grown.pk])).content.decode()
    assert len(re.findall(r'<article class="msg ', html)) == 50
    assert 'id="transcript-next"' in html and "?start=50&amp;dir=next" in html
    more = web.get(reverse("pages:transcript", args=[grown.pk]), {"start": 50, "dir": "next"},
                   HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in more
    positions = [int(p) for p in re.findall(r'id="msg-(\d+)"', more)]
    assert positions == list(range(50, 100))
    assert 'id="transcript-prev"' not in more


def test_around_opens_the_page_holding_a_message(web, grown):
    r = web.get(reverse("pages:transcript", args=[grown.pk]), {"around": 110}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert 'id="msg-110"' in html and 'id="transcript-prev"' in html


def test_messages_evicted_by_a_run_point_to_their_archived_original(web, grown):
    html = web.get(reverse("pages:session", args=[grown.pk])).content.decode()
    first = html.split('id="msg-1"', 1)[1].split("</article>", 1)[0]
    assert "summarized · original in" in first and "?entry=ar_" in first
    assert re.search(r'class="msg role-user evicted" id="msg-1"', html)


def test_tool_calls_and_results_are_collapsed_with_their_size(web, small):
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    call = html.split('id="msg-2"', 1)[1].split("</article>", 1)[0]
    assert "<details class=\"tool-call\">" in call and "Tool call <code>read_file</code>" in call
    result = html.split('id="msg-3"', 1)[1].split("</article>", 1)[0]
    assert "<details>" in result and "Result of <code>read_file</code>" in result and "tokens ·" in result


def test_long_messages_are_clipped_and_shown_whole_on_demand(web, project):
    long_text = "0123456789" * 500
    s = factories.import_messages(project, [{"role": "user", "content": long_text},
                                            {"role": "assistant", "content": "ok"}])
    html = web.get(reverse("pages:session", args=[s.pk])).content.decode()
    assert long_text not in html and "Show all (3,000 more characters)" in html
    full = web.get(reverse("pages:message", args=[s.pk, 0]), HTTP_HX_REQUEST="true").content.decode()
    assert long_text in full


def test_the_data_table_fallback_lists_every_message_of_a_short_session(web, small):
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    table = html.split('data-testid="timeline-table"', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(r"<tr><th scope=\"row\">", table)) == small.message_count


def test_the_overview_partial_redraws_stats_timeline_and_runs(web, grown):
    html = web.get(reverse("pages:session-overview", args=[grown.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="overview"') and 'data-testid="timeline"' in html
    assert 'data-testid="runs-table"' in html


def test_a_huge_message_is_shown_a_page_at_a_time_and_offered_whole_as_a_download(web, project, settings):
    settings.MESSAGE_PAGE_CHARS = 100_000
    words = [f"w{i:07d}" for i in range(60_000)]  # 540 KB of text, every word different
    text = " ".join(words)
    call = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": json.dumps({"body": text})}}
    s = factories.import_messages(project, [
        {"role": "user", "content": "write it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
        {"role": "assistant", "content": "done"}])
    url = reverse("pages:message", args=[s.pk, 2])
    first = web.get(url, HTTP_HX_REQUEST="true")
    html = first.content.decode()
    assert len(first.content) < 150_000  # one page, not the whole text as HTML
    assert text[:100_000] in html and text[100_000:100_050] not in html
    assert f"Characters 1–100,000 of {len(text):,}" in html and "Next" in html and "Previous" not in html
    second = web.get(url + "?offset=100000", HTTP_HX_REQUEST="true").content.decode()
    assert text[100_000:200_000] in second and "Previous" in second
    last = web.get(url + f"?offset={len(text) - 10}", HTTP_HX_REQUEST="true").content.decode()
    assert "Next" not in last and text[-10:] in last
    download = web.get(url + "?download=1")
    assert download["Content-Type"] == "text/plain; charset=utf-8"
    assert download["Content-Disposition"] == f'attachment; filename="session-{s.pk}-2-message.txt"'
    assert download.content.decode() == text
    args = web.get(reverse("pages:message", args=[s.pk, 1]) + "?part=call&call=0", HTTP_HX_REQUEST="true")
    assert len(args.content) < 150_000 and "Download the whole text" in args.content.decode()
    whole = web.get(reverse("pages:message", args=[s.pk, 1]) + "?part=call&call=0&download=1").content.decode()
    assert json.loads(whole) == {"body": text}
    assert web.get(reverse("pages:message", args=[s.pk, 1]) + "?part=call&call=5").status_code == 404


def test_a_message_under_the_limit_has_no_pager(web, project):
    s = factories.import_messages(project, [{"role": "user", "content": "short"}, {"role": "assistant", "content": "ok"}])
    html = web.get(reverse("pages:message", args=[s.pk, 0]), HTTP_HX_REQUEST="true").content.decode()
    assert "short" in html and 'data-testid="message-pager"' not in html


def test_a_forced_run_stays_where_it_was_taken_after_more_messages_arrive(web, project, django_capture_on_commit_callbacks):
    msgs = factories.agent_messages(14, tag="p")
    s = factories.import_messages(project, msgs[:40])
    run = factories.force(s, capture=django_capture_on_commit_callbacks, overrides={"cut.keep_messages": 4})
    assert run.status == "succeeded" and run.snapshot_position == 40
    data = timeline_data(web.get(reverse("pages:session", args=[s.pk])).content.decode())
    assert [m["after_end"] for m in data["markers"]] == [True]  # taken after the last message
    with django_capture_on_commit_callbacks(execute=True):
        append_messages(s, msgs[40:])
    data = timeline_data(web.get(reverse("pages:session", args=[s.pk])).content.decode())
    marker = next(m for m in data["markers"] if m["run"] == run.pk)
    assert marker["position"] == 40 and marker["x"] == 39.5 and not marker["after_end"]
