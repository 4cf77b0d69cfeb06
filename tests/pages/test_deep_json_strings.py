"""A session whose tool call ``arguments`` (and a JSON tool result) nest 3,000 brackets deep
inside their strings, as a model can emit: every page that shows the session renders, the
run over it succeeds, and the raw text is what they show."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from dashboard.models import CompactionRun, RunStatus, Session, StoredArchiveEntry
from tests.pages import factories

DEEP = {
    "arrays": "[" * 3000 + "]" * 3000,
    "objects": '{"a": ' * 3000 + "1" + "}" * 3000,
}


def deep_messages(deep: str) -> list[dict]:
    """An agent session whose first tool call carries ``deep`` as its arguments and whose
    first tool result is ``deep`` too; the rest is ordinary."""
    messages = factories.agent_messages(12)
    messages[2]["tool_calls"][0]["function"]["arguments"] = deep
    messages[3]["content"] = deep
    return messages


@pytest.fixture(params=list(DEEP))
def deep(request):
    return DEEP[request.param]


@pytest.fixture
def deep_session(project, deep):
    return factories.import_messages(project, deep_messages(deep), title="deep arguments")


def _shows(response, deep: str) -> bool:
    # a page clips long text; what it shows of the arguments is their raw start
    return escape(deep[:200]) in response.content.decode()


def test_every_page_of_a_session_with_deep_arguments_renders_and_shows_the_raw_text(
        web, deep_session, deep, django_capture_on_commit_callbacks):
    pk = deep_session.pk
    for name, args in (("pages:session", [pk]), ("pages:transcript", [pk]), ("pages:message", [pk, 3]),
                       ("pages:session-overview", [pk])):
        r = web.get(reverse(name, args=args))
        assert r.status_code == 200, (name, r.status_code)
        if name != "pages:session-overview":
            assert _shows(r, deep), name
    # the tool call's whole arguments, shown and downloaded as a text file (the export)
    call = reverse("pages:message", args=[pk, 2]) + "?part=call&call=0"
    r = web.get(call)
    assert r.status_code == 200 and _shows(r, deep)
    r = web.get(call + "&download=1")
    assert r.status_code == 200 and r["Content-Disposition"].startswith("attachment")
    assert r.content.decode() == deep, "the download is the raw arguments"
    run = factories.force(deep_session, capture=django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.error)
    for name, args in (("pages:run", [run.pk]), ("pages:before-after", [run.pk]), ("pages:archive", [pk]),
                       ("pages:session", [pk]), ("pages:transcript", [pk]), ("pages:tuning", [pk])):
        r = web.get(reverse(name, args=args))
        assert r.status_code == 200, (name, r.status_code)
    shown = []
    for entry_id in StoredArchiveEntry.objects.filter(session=deep_session).values_list("entry_id", flat=True):
        r = web.get(reverse("pages:archive-entry", args=[pk, entry_id]) + "?limit=200", HTTP_HX_REQUEST="true")
        assert r.status_code == 200, entry_id
        shown.append(_shows(r, deep))
        r = web.get(reverse("pages:archive", args=[pk]) + f"?entry={entry_id}&q=module_0")
        assert r.status_code == 200, entry_id
    assert any(shown), "the archived call and result show their raw text"


def test_a_compaction_over_deep_arguments_summarizes_and_scores_retention(deep_session, deep,
                                                                         django_capture_on_commit_callbacks):
    run = factories.force(deep_session, capture=django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.error)
    run = CompactionRun.objects.get(pk=run.pk)
    assert "module" in run.summary
    assert run.retention is not None, "the retention score was written"


def test_an_upload_holding_nan_is_a_400_page_naming_file_line_and_field(web, project):
    text = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "x", "score": NaN}\n'
    r = web.post(reverse("pages:upload"), {"text": text, "format": "openai_jsonl"})
    assert r.status_code == 400
    page = r.content.decode()
    assert "line 2" in page and "score: NaN is not a number JSON allows" in page
    assert not Session.objects.exists()
