"""Run page: ledger, summary, prompt, model, attempts, retention, tokens by category."""
import re

from django.urls import reverse

from dashboard.models import CompactionRun
from tests.pages import factories
from tests.support.llm_server import ScriptedLLMServer, error, ok


def test_a_finished_run_shows_everything_it_did(web, last_run):
    html = web.get(reverse("pages:run", args=[last_run.pk])).content.decode()
    assert 'data-testid="ledger"' in html
    assert 'data-testid="run-summary"' in html and last_run.summary.splitlines()[0][:40] in html
    assert "Prompt sent to the summarizer" in html
    assert 'data-testid="attempts"' in html and "ok" in html
    assert 'data-testid="categories"' in html and "tool results" in html
    assert 'data-testid="retention"' in html
    assert last_run.model in html
    assert "run-progress" not in html  # finished: no polling
    assert f"{last_run.tokens_before['total']:,} → {last_run.tokens_after['total']:,}" in html


def test_the_ledger_is_grouped_by_fate_with_counts_and_filters_by_fate(web, last_run):
    html = web.get(reverse("pages:run", args=[last_run.pk])).content.decode()
    groups = html.split('data-testid="ledger-groups"', 1)[1].split("</article>", 1)[0]
    counts = {}
    for r in last_run.ledger:
        counts[r["fate"]] = counts.get(r["fate"], 0) + 1
    for fate, n in counts.items():
        assert f'<details data-fate="{fate}"' in groups
        assert re.search(rf"<strong>{fate}</strong> · {n} messages?", groups), fate
    assert len(re.findall(r"<tr><td>", groups)) == len(last_run.ledger)
    kept = counts["kept"]
    html = web.get(reverse("pages:run", args=[last_run.pk]), {"fate": "kept"}).content.decode()
    ledger = html.split('data-testid="ledger"', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(r"<tr><td>", ledger)) == kept
    assert len(re.findall(r"<strong>kept</strong>", ledger)) == kept


def test_events_read_as_a_list_not_json(web, last_run):
    html = web.get(reverse("pages:run", args=[last_run.pk])).content.decode()
    events = html.split('data-testid="events"', 1)[1].split("</ol>", 1)[0]
    assert "<strong>started</strong>" in events and "<dt>snapshot messages</dt>" in events
    assert "{&quot;" not in events and '{"' not in events


def test_missing_identifiers_are_listed(web, project, django_capture_on_commit_callbacks):
    msgs = factories.agent_messages(12, tag="r", extra_user=["Remember the ticket id 9f1c2ab7e4d3 and /etc/app/secret.conf"])
    msgs += factories.agent_messages(6, tag="s")[1:]
    s = factories.import_messages(project, msgs)
    run = factories.force(s, capture=django_capture_on_commit_callbacks, overrides={"cut.keep_messages": 2})
    html = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    missing = run.retention["missing"]
    if missing:
        assert 'data-testid="missing-identifiers"' in html
        for ident in missing[:5]:
            assert ident.replace("&", "&amp;") in html
    else:
        assert "Every referenced identifier survived" in html


def test_a_running_run_polls_and_reloads_when_done(web, small, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        web.post(reverse("pages:force", args=[small.pk]), {}, HTTP_HX_REQUEST="true")
    run = CompactionRun.objects.get(session=small)
    html = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert f"/runs/{run.pk}/progress/?poll=1&amp;context=run" in html and "every 1s" in html


def test_a_failed_run_shows_its_error(web, small, django_capture_on_commit_callbacks):
    run = factories.force(small, capture=django_capture_on_commit_callbacks,
                          overrides={"cut.keep_messages": 0, "cut.min_evicted_messages": 10_000})
    assert run.status in ("skipped", "failed")
    html = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert run.error[:40] in html.replace("&#x27;", "'").replace("&quot;", '"')
    assert CompactionRun.objects.count() == 1


def test_attempts_show_the_failed_one_with_its_error_and_every_latency(web, small, django_capture_on_commit_callbacks,
                                                                        monkeypatch, settings):
    monkeypatch.setenv("CS_TEST_LLM_KEY", "test-key")
    with ScriptedLLMServer() as server:
        settings.COMPACTION_CONNECTIONS = [{"name": "scripted", "models": ["openai/scripted"],
                                            "api_base": server.api_base, "api_key_env": "CS_TEST_LLM_KEY",
                                            "allow_private_network": True}]
        server.script(error(503, "overloaded, try later"), ok("Goal: inspect modules. Done: modules 0-9 read."))
        run = factories.force(small, capture=django_capture_on_commit_callbacks, overrides={
            "summarizer.model": "openai/scripted", "summarizer.connection": "scripted",
            "summarizer.retry": {"max_retries": 1, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}})
    assert run.status == "succeeded", run.error
    html = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    table = html.split('data-testid="attempts"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr><td>") == 2
    assert "overloaded, try later" in table or "503" in table
    assert '<span class="ok">ok</span>' in table
    assert len(re.findall(r"\d+ ms</td>", table)) == 2
    assert "openai/scripted" in table
    assert "Goal: inspect modules." in html
