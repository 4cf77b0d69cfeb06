"""Force a summary from the session page; the progress block polls until the run ends."""
import json

from django.urls import reverse

from dashboard.models import CompactionRun


def force(web, session, **data):
    return web.post(reverse("pages:force", args=[session.pk]), data, HTTP_HX_REQUEST="true")


def test_forcing_enqueues_a_manual_run_and_shows_its_progress(web, small, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        r = force(web, small, reason="tidy up")
    run = CompactionRun.objects.get(session=small)
    assert run.trigger == "manual" and run.force and run.reason == "tidy up" and run.status == "queued"
    assert len(callbacks) == 1  # the task is sent once the run is committed
    html = r.content.decode()
    assert 'data-testid="run-progress"' in html and 'data-status="queued"' in html
    assert f'hx-get="/runs/{run.pk}/progress/?poll=1&amp;context=session"' in html and 'hx-trigger="every 1s"' in html


def test_the_last_poll_stops_polling_and_tells_the_page_to_refresh(web, small, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        force(web, small)
    run = CompactionRun.objects.get(session=small)
    assert run.status == "succeeded", run.error
    r = web.get(reverse("pages:run-progress", args=[run.pk]), {"poll": 1, "context": "session"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert "every 1s" not in html and 'data-status="succeeded"' in html and "Compacted" in html
    assert json.loads(r["HX-Trigger"]) == {"run-finished": {"run": run.pk, "status": "succeeded"}}
    # the run page reloads itself instead
    r = web.get(reverse("pages:run-progress", args=[run.pk]), {"poll": 1, "context": "run"}, HTTP_HX_REQUEST="true")
    assert r["HX-Refresh"] == "true"


def test_the_session_page_listens_for_the_end_of_a_run(web, small):
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert 'hx-trigger="run-finished from:body"' in html.split('id="overview"', 1)[1][:300]
    assert 'hx-trigger="run-finished from:body"' in html.split('id="transcript-body"', 1)[1][:400]


def test_a_policy_override_and_a_preset_reach_the_run(web, small, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        force(web, small, preset="sagents", overrides="cut.keep_messages=4\nsummarizer.max_summary_words=100")
    run = CompactionRun.objects.get(session=small)
    assert run.overrides == {"cut.keep_messages": 4, "summarizer.max_summary_words": 100}
    assert run.policy_snapshot["name"] == "sagents" and run.policy_snapshot["cut"]["keep_messages"] == 4


def test_a_bad_override_is_shown_next_to_the_form_and_nothing_is_queued(web, small):
    r = force(web, small, overrides="cut.keep_fraction=7")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'data-testid="form-error"' in html and "cut.keep_fraction" in html
    r = force(web, small, overrides="no equals sign")
    assert "line 1" in r.content.decode()
    r = force(web, small, preset="no-such-preset")
    assert "unknown preset" in r.content.decode()
    assert not CompactionRun.objects.exists()


def test_a_pending_run_shows_its_progress_when_the_page_opens(web, small, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        force(web, small)
    html = web.get(reverse("pages:session", args=[small.pk])).content.decode()
    assert 'data-testid="run-progress"' in html and 'data-status="queued"' in html


def test_forcing_past_the_session_limit_says_when_to_try_again(web, small, settings,
                                                               django_capture_on_commit_callbacks):
    settings.FORCE_SESSION_RATE_LIMIT = "2/min"
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            assert 'data-testid="run-progress"' in force(web, small).content.decode()
    r = force(web, small)
    html = r.content.decode()
    assert r.status_code == 200  # htmx swaps the message in
    assert 'data-testid="form-error"' in html and "at most 2 per 60 s" in html and "retry in" in html
    assert 1 <= int(r["Retry-After"]) <= 60
    assert CompactionRun.objects.filter(session=small).count() == 2
    # without htmx (a plain form post) the answer is the 429 itself
    r = web.post(reverse("pages:force", args=[small.pk]), {})
    assert r.status_code == 429 and "FORCE_SESSION_RATE_LIMIT" in r.content.decode() and r["Retry-After"]
