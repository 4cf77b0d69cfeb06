"""A real agent transcript from the shared corpus, grown message by message under a policy
that compacts it a few times, renders cleanly on every page. The screenshots it takes are
the ones in docs/screenshots/ (copy them from test-artifacts/docs/ after a UI change)."""

import pytest

from dashboard.models import CompactionRun, Session
from tests.browser.conftest import ARTIFACTS, settle
from tests.corpus import load, require_corpus
from tests.pages import factories

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CORPUS = "minipr__deepseek_bench1__django__django-14580.json"
POLICY = {"name": "team-default", "trigger": {"kind": "tokens", "threshold": 16000},
          "cut": {"keep_messages": 10, "keep_fraction": 0.25}, "reduction": {"enabled": False}}
DOCS = ARTIFACTS.parent / "docs"


def save(page, name: str, full_page: bool = False):
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / f"{name}.png"), full_page=full_page)


@pytest.fixture
def real_session(transactional_db, user):
    require_corpus(CORPUS)
    project = factories.add_member(factories.make_project("demo", policy=POLICY), user)
    data = load(CORPUS)
    s = factories.grow(project, data["messages"], title="django-14580: missing import in a generated migration",
                       start=20, chunk=2)

    Session.objects.filter(pk=s.pk).update(model=data["meta"]["model"])
    s.refresh_from_db()
    assert 2 <= s.compaction_count <= 10, s.compaction_count
    return s


def test_a_real_transcript_renders_cleanly_everywhere(page, signed_in, console, real_session):
    s = real_session
    runs = list(CompactionRun.objects.filter(session=s, status="succeeded").order_by("id"))
    page.set_viewport_size({"width": 1360, "height": 1100})
    page.goto(signed_in(f"/sessions/{s.pk}/"))
    settle(page)
    save(page, "session")
    page.goto(signed_in(f"/runs/{runs[len(runs) // 2].pk}/"))
    settle(page)
    save(page, "run")
    page.goto(signed_in(f"/runs/{runs[0].pk}/before-after/"))
    settle(page)
    save(page, "before_after")
    page.goto(signed_in(f"/sessions/{s.pk}/tuning/"))
    page.locator('[data-testid="preview-result"]').wait_for()
    page.check('[data-testid="compare-toggle"]')  # opens Policy B
    page.select_option('[data-testid="b-preset"]', "langchain")
    page.wait_for_selector('#fields-b input[name="b-loaded"][value="langchain"]', state="attached")
    page.wait_for_function("() => (document.querySelector('[data-testid=preview-result]').dataset.compactions"
                           " || '').split(',').length === 2")
    page.locator("details:has(#fields-b) > summary").click()  # fold B again for the picture
    page.select_option('[data-testid="sweep-kind"]', "tokens")  # the policy's trigger kind: its setting is marked
    page.click('[data-testid="sweep-start"]')  # the sweep runs inline here (eager Celery)
    page.wait_for_selector('[data-sweep-chart][data-chart-ready="true"]', timeout=300_000)
    page.evaluate("window.scrollTo(0, 0)")
    settle(page)
    assert page.get_by_test_id("recommendation-text").inner_text().startswith("Lowest input cost")
    save(page, "tuning", full_page=True)
    # at a phone's width: the answer (current setting, recommendation, sweep chart) first
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_selector('[data-sweep-chart][data-chart-ready="true"]')
    settle(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    top = page.get_by_test_id("sweep-chart").bounding_box()
    page.screenshot(path=str(DOCS / "tuning_phone.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": 390, "height": top["y"] + top["height"] + 400})
    page.set_viewport_size({"width": 1360, "height": 1100})
    page.goto(signed_in(f"/sessions/{s.pk}/archive/?entry={runs[0].archive_refs[0]}"))
    settle(page)
    save(page, "archive")
    console.assert_clean()
