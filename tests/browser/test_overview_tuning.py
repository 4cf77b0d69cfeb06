"""The overview's continuous tuning sentence in a real browser: it says what the stored pass
found, links to the evidence (the sessions replayed, every setting tried), and its one click
puts the recommendation in use as the project's policy, with undo. Takes
docs/screenshots/overview_tuning.png and tuning_evidence.png (copied from test-artifacts/docs/)."""
import pytest

from compaction import Policy
from dashboard.services.continuous_tuning import tune_project
from tests.browser.conftest import ARTIFACTS, settle
from tests.pages import factories

pytestmark = pytest.mark.browser

DOCS = ARTIFACTS.parent / "docs"


def test_the_overview_says_what_tuning_found_links_the_evidence_and_applies_it(page, signed_in, console, project):
    sessions = [factories.import_messages(project, factories.agent_messages(turns, tag=f"b{turns}"), title=title)
                for turns, title in ((14, "billing refactor"), (9, "flaky test hunt"), (11, "release notes"))]
    tuning = tune_project(project.pk)
    assert tuning.recommended is not None and tuning.recommended != tuning.current, tuning.sentence
    before = project.active_policy_id

    page.goto(signed_in("/"))
    settle(page)
    sentence = page.inner_text('[data-testid="tuning-sentence"]')
    assert f"trigger {int(tuning.recommended):,} tokens" in sentence and "last week's 3 sessions" in sentence
    DOCS.mkdir(parents=True, exist_ok=True)
    page.locator('[data-testid="overview-tuning"]').scroll_into_view_if_needed()
    page.screenshot(path=str(DOCS / "overview_tuning.png"))

    page.click('[data-testid="tuning-apply"]')
    page.wait_for_selector('[data-testid="undo"]')
    project.refresh_from_db()
    assert Policy.load(project.active_policy.data).trigger.threshold == int(tuning.recommended)
    page.click('[data-testid="undo"]')
    page.wait_for_selector('[data-testid="undone"]')
    project.refresh_from_db()
    assert project.active_policy_id == before

    page.click('[data-testid="tuning-evidence"]')
    page.wait_for_selector('[data-testid="evidence-points"]')
    listed = page.locator('[data-testid="evidence-sessions"] tbody tr').all_inner_texts()
    assert [row.split("\t")[0].split(" #")[0].strip() for row in listed] == [s.title for s in sessions[::-1]]
    assert page.locator('[data-testid="evidence-points"] tbody tr').count() == len(tuning.sweep.values)
    page.screenshot(path=str(DOCS / "tuning_evidence.png"), full_page=True)
    console.assert_clean()
