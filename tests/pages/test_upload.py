"""Upload form: every import format, all-or-nothing, errors shown next to the form."""
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.models import Session

FIXTURES = Path(__file__).resolve().parents[1] / "formats" / "fixtures"


def upload(web, *names, htmx=True, **data):
    files = [SimpleUploadedFile(n, (FIXTURES / n).read_bytes()) for n in names]
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return web.post(reverse("pages:upload"), {"file": files, **data}, **extra)


@pytest.mark.parametrize("name, fmt", [("openai_session.json", "openai"), ("openai.jsonl", "openai_jsonl"),
                                       ("anthropic.json", "anthropic"), ("claude_code.jsonl", "claude_code_jsonl")])
def test_each_import_format_uploads(web, project, name, fmt):
    r = upload(web, name)
    assert r.status_code == 200
    assert 'data-testid="upload-ok"' in r.content.decode()
    assert r["HX-Trigger"] == "sessions-changed"
    s = Session.objects.get(project=project)
    assert s.source_format == fmt and s.message_count > 0


@pytest.mark.parametrize("name, fmt", [("traces/langfuse_observations_v2.jsonl", "langfuse"),
                                       ("traces/phoenix_spans.json", "phoenix"),
                                       ("traces/langsmith_runs.jsonl", "langsmith")])
def test_a_trace_export_is_detected_and_uploads_as_its_conversation(web, project, name, fmt):
    r = upload(web, name)
    assert 'data-testid="upload-ok"' in r.content.decode()
    s = Session.objects.get(project=project)
    assert (s.source_format, s.external_id, s.message_count) == (fmt, "lisbon-trip", 7)
    assert s.metadata["trace"]["usage"] == {"input_tokens": 233, "output_tokens": 43}


def test_the_upload_form_offers_the_trace_formats(web, project):
    html = web.get(reverse("pages:sessions")).content.decode()
    for fmt in ("langfuse", "phoenix", "langsmith"):
        assert f'value="{fmt}"' in html


def test_a_trace_export_with_one_bad_span_imports_nothing(web, project):
    page = json.loads((FIXTURES / "traces" / "phoenix_spans.json").read_bytes())
    llm = next(s for s in page["data"] if s["span_kind"] == "LLM")
    llm["attributes"] = {k: v for k, v in llm["attributes"].items()
                         if not k.startswith(("llm.input_messages", "input."))}
    files = [SimpleUploadedFile("good.jsonl", (FIXTURES / "traces" / "langsmith_runs.jsonl").read_bytes()),
             SimpleUploadedFile("spans.json", json.dumps(page).encode())]
    html = web.post(reverse("pages:upload"), {"file": files}, HTTP_HX_REQUEST="true").content.decode()
    assert "Nothing was imported" in html and "spans.json" in html and llm["context"]["span_id"] in html
    assert not Session.objects.exists()


def test_an_explicit_format_and_title_are_used(web, project):
    upload(web, "openai.jsonl", format="openai_jsonl", title="my title")
    assert Session.objects.get(project=project).title == "my title"


def test_a_file_with_several_sessions_imports_them_all(web, project):
    upload(web, "openai_many.json")
    assert Session.objects.filter(project=project).count() > 1


def test_pasted_text_imports(web, project):
    text = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n'
    r = web.post(reverse("pages:upload"), {"text": text}, HTTP_HX_REQUEST="true")
    assert 'data-testid="upload-ok"' in r.content.decode()
    assert Session.objects.get(project=project).message_count == 2


def test_an_invalid_file_imports_nothing_and_names_file_and_line(web, project):
    r = upload(web, "openai_session.json", "bad_json.jsonl")
    html = r.content.decode()
    assert r.status_code == 200  # htmx swaps 200s only: the errors must reach the form
    assert 'data-testid="upload-errors"' in html and "Nothing was imported" in html
    assert "bad_json.jsonl" in html and "line" in html
    assert not Session.objects.exists()


def test_an_unknown_role_is_reported_with_its_position(web, project):
    html = upload(web, "unknown_role.jsonl").content.decode()
    assert "unknown_role.jsonl" in html and "role" in html
    assert not Session.objects.exists()


def test_an_empty_form_says_what_is_missing(web, project):
    html = web.post(reverse("pages:upload"), {}, HTTP_HX_REQUEST="true").content.decode()
    assert "Choose one or more files" in html


def test_without_htmx_a_good_upload_redirects_and_a_bad_one_is_a_400_page(web, project):
    r = upload(web, "openai_session.json", htmx=False)
    assert r.status_code == 302
    r = upload(web, "bad_json.jsonl", htmx=False)
    assert r.status_code == 400 and b"bad_json.jsonl" in r.content and b"<html" in r.content


def test_a_session_over_the_message_limit_is_a_413_page_naming_it_and_nothing_is_imported(web, project, settings):
    settings.IMPORT_MAX_MESSAGES = 3
    text = "\n".join(json.dumps({"role": "user", "content": f"w{i}"}) for i in range(4))
    files = [SimpleUploadedFile("long.jsonl", text.encode())]
    r = web.post(reverse("pages:upload"), {"file": files})
    assert r.status_code == 413 and b"IMPORT_MAX_MESSAGES=3" in r.content and b"long.jsonl" in r.content
    html = web.post(reverse("pages:upload"), {"file": [SimpleUploadedFile("long.jsonl", text.encode())]},
                    HTTP_HX_REQUEST="true").content.decode()
    assert "IMPORT_MAX_MESSAGES=3" in html  # htmx: the form back with the error, to swap in
    assert not Session.objects.filter(project=project).exists()
