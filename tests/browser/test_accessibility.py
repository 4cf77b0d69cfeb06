"""axe-core (axe-playwright-python) finds no serious or critical violation on any page."""
import pytest
from axe_playwright_python.sync_playwright import Axe

from dashboard.models import CompactionRun, StoredArchiveEntry
from tests.browser.conftest import settle
from tests.pages import factories

pytestmark = pytest.mark.browser


def serious(page) -> list[str]:
    results = Axe().run(page)
    out = []
    for v in results.response["violations"]:
        if v.get("impact") in ("serious", "critical"):
            targets = [", ".join(n["target"]) for n in v["nodes"][:5]]
            out.append(f"{v['id']} ({v['impact']}): {v['help']} at {targets}")
    return out


def test_no_serious_or_critical_violations(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="y"), title="Accessible session")
    run = CompactionRun.objects.filter(session=s, status="succeeded").order_by("-id").first()
    entry = StoredArchiveEntry.objects.filter(run=run).first()
    paths = ["/", "/sessions/", "/runs/", f"/sessions/{s.pk}/", f"/runs/{run.pk}/", f"/runs/{run.pk}/before-after/",
             f"/sessions/{s.pk}/archive/?entry={entry.entry_id}", f"/sessions/{s.pk}/tuning/",
             f"/sessions/{s.pk}/archive/?entry={entry.entry_id}&q=module&hit=0"]  # search hits marked
    found = {}
    for theme in ("light", "dark"):
        for path in paths:
            page.goto(signed_in(path))
            page.evaluate(f"localStorage.setItem('cs-theme', '{theme}')")
            page.reload()
            if "tuning" in path:
                page.wait_for_selector('[data-testid="preview-result"]')
            settle(page)
            problems = serious(page)
            if problems:
                found[f"{theme} {path}"] = problems
    page.evaluate("localStorage.removeItem('cs-theme')")
    assert found == {}, "\n".join(f"{k}: {p}" for k, ps in found.items() for p in ps)
    console.assert_clean()


def test_the_login_page_has_no_serious_violations(page, live_server, transactional_db):
    page.goto(live_server.url + "/login/")
    assert serious(page) == []
