"""Run page, look-ahead: did the context a run produced still hold what the agent used next?"""
import re

from django.urls import reverse

from dashboard.models import Session
from dashboard.services.sessions import append_messages
from tests.pages import factories


def section(html: str) -> str:
    return html.split('data-testid="lookahead"', 1)[1].split("</article>", 1)[0]


def test_without_a_later_assistant_message_there_is_nothing_to_check(web, small, django_capture_on_commit_callbacks):
    run = factories.force(small, capture=django_capture_on_commit_callbacks, overrides={"cut.keep_messages": 4})
    html = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "No assistant message was recorded after this run yet" in section(html)


def test_the_next_assistant_message_is_checked_against_the_runs_result(web, project, django_capture_on_commit_callbacks):
    msgs = factories.agent_messages(12, tag="la")
    s = factories.import_messages(project, msgs)
    run = factories.force(s, capture=django_capture_on_commit_callbacks, overrides={"cut.keep_messages": 4})
    append_messages(Session.objects.get(pk=s.pk), [
        {"role": "user", "content": "Now compare two modules."},
        {"role": "assistant", "content": "Comparing src/module_11.py with src/module_0.py and src/new_module.py."},
    ])
    html = web.get(reverse("pages:run", args=[run.pk])).content.decode()
    part = section(html)
    at = len(msgs) + 1
    assert f"#{at}</a>" in part
    # src/new_module.py is new in that message: only the two seen before count
    assert "used 2 identifiers from the history this run saw" in part
    recall = re.search(r'data-testid="lookahead-recall">([^<]+)<', part).group(1)
    missing = re.findall(r"<li><code>([^<]+)</code></li>", part)
    assert recall == {0: "100%", 1: "50%", 2: "0%"}[len(missing)]
    for ident in missing:                       # what is listed as lost is really absent from the summary
        assert ident.lower() not in run.summary.lower()
    assert "src/module_11.py" not in missing    # in the kept tail
