"""axe-core (axe-playwright-python) finds no serious or critical violation on any page."""
import pytest
from axe_playwright_python.sync_playwright import Axe

from dashboard.models import CompactionRun, StoredArchiveEntry, TuningSweep
from dashboard.selectors.tuning import starting_point
from dashboard.services.tuning_sweeps import request_sweep
from tests.browser.conftest import settle
from tests.browser.test_markdown import png
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


def in_both_themes(page, signed_in, paths: list[str], tuning_ready: str) -> dict[str, list[str]]:
    """Serious or critical violations of each page in the light and the dark theme, keyed
    "<theme> <path>" (a tuning page is checked once ``tuning_ready`` is on it)."""
    found = {}
    for theme in ("light", "dark"):
        for path in paths:
            page.goto(signed_in(path))
            page.evaluate(f"localStorage.setItem('cs-theme', '{theme}')")
            page.reload()
            if "tuning" in path:
                page.wait_for_selector(tuning_ready)
            settle(page)
            problems = serious(page)
            if problems:
                found[f"{theme} {path}"] = problems
    page.evaluate("localStorage.removeItem('cs-theme')")
    return found


def test_no_serious_or_critical_violations(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(30, tag="y"), title="Accessible session")
    run = CompactionRun.objects.filter(session=s, status="succeeded").order_by("-id").first()
    entry = StoredArchiveEntry.objects.filter(run=run).first()
    paths = ["/", "/sessions/", "/runs/", f"/sessions/{s.pk}/", f"/runs/{run.pk}/", f"/runs/{run.pk}/before-after/",
             f"/sessions/{s.pk}/archive/?entry={entry.entry_id}", f"/sessions/{s.pk}/tuning/",
             f"/sessions/{s.pk}/archive/?entry={entry.entry_id}&q=module&hit=0"]  # search hits marked
    found = in_both_themes(page, signed_in, paths, tuning_ready='[data-testid="preview-result"]')
    assert found == {}, "\n".join(f"{k}: {p}" for k, ps in found.items() for p in ps)
    console.assert_clean()


def test_the_login_page_has_no_serious_violations(page, live_server, transactional_db):
    page.goto(live_server.url + "/login/")
    assert serious(page) == []


def test_a_finished_sweep_and_markdown_content_have_no_serious_violations(page, signed_in, console, project):
    s = factories.grow(project, factories.agent_messages(20, tag="z"), title="Swept session")
    request_sweep(s, starting_point(s).policy, kind="tokens", scope="session")  # eager: done on commit
    assert TuningSweep.objects.get(session=s).status == "done"
    md = factories.import_messages(project, [
        {"role": "user", "content": [{"type": "text", "text": "Look at **this**:"},
                                     {"type": "image_url", "image_url": {"url": png(40, 30)}}]},
        {"role": "assistant", "content": "## Plan\n\n- [docs](https://example.com)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
                                         "```\ncode\n```"}], title="Markdown")
    found = in_both_themes(page, signed_in, [f"/sessions/{s.pk}/tuning/", f"/sessions/{md.pk}/?start=0"],
                           tuning_ready='[data-sweep-chart][data-chart-ready="true"]')
    assert found == {}, "\n".join(f"{k}: {p}" for k, ps in found.items() for p in ps)
    console.assert_clean()
