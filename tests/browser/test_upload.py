"""The upload form in a real browser: errors appear inline, a good file lands in the list."""
from pathlib import Path

import pytest

from tests.browser.conftest import shot

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).resolve().parents[1] / "formats" / "fixtures"


def test_upload_shows_errors_inline_then_imports(page, signed_in, console, project):
    page.goto(signed_in("/sessions/"))
    page.set_input_files("#upload-file", str(FIXTURES / "bad_json.jsonl"))
    page.click('[data-testid="upload-form"] button[type=submit]')
    errors = page.locator('[data-testid="upload-errors"]')
    errors.wait_for()
    assert "bad_json.jsonl" in errors.inner_text() and "Nothing was imported" in errors.inner_text()
    shot(page, "upload-error")
    page.set_input_files("#upload-file", str(FIXTURES / "anthropic.json"))
    page.select_option("#upload-format", "anthropic")
    page.fill("#upload-title-input", "Imported from Anthropic format")
    page.click('[data-testid="upload-form"] button[type=submit]')
    page.locator('[data-testid="upload-ok"]').wait_for()
    # the list refreshes itself (HX-Trigger: sessions-changed)
    page.locator('[data-testid="sessions-table"] >> text=Imported from Anthropic format').wait_for()
    console.assert_clean()
