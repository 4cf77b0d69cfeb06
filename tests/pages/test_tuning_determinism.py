"""Same history, same policy, same figures: the tuning preview and the threshold sweep of two
sessions holding the same messages agree to the token, whatever their database keys. (The
replays used to run under "preview-<key>"; archive entry ids hash the session id and the
summaries quote them, so the recommendation's "N% cheaper" changed with the key from one
test run to the next.)"""
from __future__ import annotations

import re

from django.urls import reverse

from dashboard.models import TuningSweep
from dashboard.selectors.tuning import starting_point
from dashboard.selectors.tuning_sweeps import sweep_recommendation
from dashboard.services.tuning_sweeps import request_sweep
from tests.pages import factories
from tests.pages.tuning_form import posted_form


def twins(project):
    """Two sessions with the same messages; a third session between them moves the second's
    key further from the first's (keys of different lengths tokenize differently)."""
    messages = factories.agent_messages(30, tag="twin")
    first = factories.import_messages(project, messages, title="first")
    for n in range(3):
        factories.import_messages(project, factories.agent_messages(1, tag=f"gap{n}"), title=f"gap {n}")
    second = factories.import_messages(project, messages, title="second")
    assert first.pk != second.pk
    return first, second


def preview_table(web, session) -> str:
    html = web.post(reverse("pages:tuning-preview", args=[session.pk]), posted_form(session, trigger_value="1900"),
                    HTTP_HX_REQUEST="true").content.decode()
    table = html.split('data-testid="preview-table"', 1)[1].split("</table>", 1)[0]
    return re.sub(r"\s+", " ", table)


def test_two_sessions_with_the_same_history_preview_the_same(web, project):
    first, second = twins(project)
    assert preview_table(web, first) == preview_table(web, second)


def test_two_sessions_with_the_same_history_sweep_to_the_same_points_and_answer(project, django_capture_on_commit_callbacks):
    first, second = twins(project)
    sweeps = []
    for session in (first, second):
        with django_capture_on_commit_callbacks(execute=True):
            sweep = request_sweep(session, starting_point(session).policy, kind="tokens", scope="session")
        sweeps.append(TuningSweep.objects.get(pk=sweep.pk))
    assert sweeps[0].status == sweeps[1].status == "done"
    assert [(p["value"], p["tokens_sent"], p["cost_usd"]) for p in sweeps[0].points] == \
        [(p["value"], p["tokens_sent"], p["cost_usd"]) for p in sweeps[1].points]
    assert sweep_recommendation(sweeps[0]).sentence == sweep_recommendation(sweeps[1]).sentence
