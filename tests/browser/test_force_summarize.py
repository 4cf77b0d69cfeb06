"""Force summarize from the session page, executed by a real Celery worker process on the
filesystem broker: the page shows progress, then redraws its timeline and transcript."""
import pytest

from dashboard.models import CompactionRun
from tests.browser.conftest import settle, shot
from tests.pages import factories

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_force_summarize_runs_in_a_worker_and_the_timeline_updates(page, signed_in, console, project, start_worker):
    s = factories.import_messages(project, factories.agent_messages(12, tag="f"), title="Summarize me now")
    worker = start_worker(broker="filesystem")
    page.goto(signed_in(f"/sessions/{s.pk}/"))
    settle(page)
    assert page.locator('[data-testid="timeline-markers"] li').count() == 0
    assert page.locator('[data-testid="compaction-badge"]').count() == 0
    evicted_before = page.locator("#transcript-body article.msg.evicted").count()

    page.fill("#force-reason", "clean up before the next task")
    page.click('[data-testid="force-button"]')
    progress = page.locator('[data-testid="run-progress"]')
    progress.wait_for()
    shot(page, "force-progress")
    page.wait_for_selector('[data-testid="run-progress"][data-status="succeeded"]', timeout=120_000)

    # the run-finished event redraws the overview and the transcript
    page.wait_for_selector('[data-testid="timeline-markers"] li')
    page.wait_for_selector('[data-testid="compaction-badge"]')
    settle(page)
    assert page.locator('[data-testid="timeline-markers"] li').count() == 1
    assert page.locator("#transcript-body article.msg.evicted").count() > evicted_before
    markers = page.evaluate("JSON.parse(document.getElementById('timeline-data').textContent).markers")
    run = CompactionRun.objects.get(session=s)
    assert run.status == "succeeded" and run.trigger == "manual" and run.reason == "clean up before the next task"
    assert [m["run"] for m in markers] == [run.pk]
    assert "Compacted" in page.locator('[data-testid="compaction-badge"]').inner_text()
    assert "run_compaction" in worker.log.read_text() or "succeeded" in worker.log.read_text()
    shot(page, "force-done")
    console.assert_clean()
