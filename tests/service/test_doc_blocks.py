"""The README's API examples work exactly as written: every shell block of README.md that
calls curl runs against a live server, with only the address (http://127.0.0.1:8000) and
the key variable (the README's ``KEY=...`` line) replaced, from the repository's root as the
README says. A request answered with an error status fails the block (curl runs with
``--fail-with-body`` added, so the error is printed)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dashboard.models import ApiKey, CompactionRun, Session
from dashboard.services.keys import create_api_key, get_or_create_project

REPO = Path(__file__).resolve().parents[2]
README_ADDRESS = "http://127.0.0.1:8000"
KEY_LINE = re.compile(r"^KEY=\.\.\..*$", re.M)


def curl_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S)
    return [b for b in blocks if re.search(r"^\s*(\w+=\$\()?curl\s", b, re.M)]


def test_the_readme_has_curl_examples_and_defines_the_key_they_use():
    blocks = curl_blocks()
    assert blocks, "README.md has no shell block calling curl"
    for block in blocks:
        assert README_ADDRESS in block
        if "$KEY" in block:
            assert KEY_LINE.search(block), "a block using $KEY defines it with a KEY=... line"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_every_curl_of_the_readme_runs_against_a_live_server(live_server, transactional_db):
    project, _ = get_or_create_project("readme")
    row, key = create_api_key(project, "readme")
    for block in curl_blocks():
        script = KEY_LINE.sub(f"KEY={key}", block).replace(README_ADDRESS, live_server.url)
        wrapper = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n'
        done = subprocess.run(["bash", "-c", wrapper + script], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"README block failed ({done.returncode}):\n{block}\n--- stdout\n" \
                                     f"{done.stdout[-2000:]}\n--- stderr\n{done.stderr[-2000:]}"
    # what the examples did is on record: an import with its metadata, an append, a forced run
    session = Session.objects.get(project=project)
    assert session.metadata["license"] and session.metadata["meta"]["agent"]
    assert session.message_count == 28
    assert CompactionRun.objects.filter(session=session, force=True, trigger="api").exists()
    assert ApiKey.objects.get(pk=row.pk).last_used_at is not None
