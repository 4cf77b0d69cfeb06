"""Every shell and Python block of README.md and docs/*.md runs as written, against one live
test server (pytest-django's ``live_server``), or says in its first line why it cannot.

The blocks are the fences tagged ``sh``, ``bash``, ``shell``, ``console``, ``python`` or ``py``.
A block that cannot run offline (it serves forever, runs the whole suite, replays the whole
corpus for minutes...) starts with ``# not run in tests: <the reason>``; that line is the
marker, shown in the block on GitHub and on the dashboard's Docs page alike. An untagged
fence is output or a listing: one whose first line is a command must be tagged.

What a block runs with, and the only changes made to its text:

- ``http://127.0.0.1:8000`` (the address of ``make run``) becomes the live server's address;
- the line ``KEY=...`` becomes ``KEY=<a project key>``, and ``YOUR_PROJECT_KEY`` that key;
- ``.venv/bin/python`` becomes the interpreter running the tests (the project's virtualenv:
  a checkout's ``.venv`` may not be where the tests run);
- the environment: ``PYTHONPATH`` = the repository, ``OPENAI_API_KEY`` = a test key and
  ``OPENAI_API_BASE`` = the scripted upstream (tests/support/llm_server.py) for a snippet that
  calls a provider itself through litellm, as the snippet says to set, and
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (a snippet that imports litellm before the engine,
  which sets it, would otherwise try to download litellm's price table, retrying for
  seconds offline); the gateway's upstream
  (``GATEWAY_API_BASE``) is the same scripted server, answering every model call;
- the working directory: a scratch copy of the repository's root (a temporary folder of
  symlinks to its top-level entries, beside a ``shared`` link so ``../shared/corpus``
  resolves), so files a block writes (``archive/``, ``out/``) stay out of the checkout;
- a ``console`` block is a transcript: its commands are the lines after a ``$ `` prompt;
- shell blocks run under bash with ``set -euo pipefail``, curl with ``--fail-with-body`` (a
  request answered with an error status fails the block and prints the error); Python blocks
  run as a file with that interpreter.

After a block ran, what it promised is checked where it is visible in the database: the
import, append and forced run of the curl examples, the compaction the Anthropic example asks
for, the turns of the Agents SDK example."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dashboard.models import ApiKey, CompactionRun, GatewayCall, Project, Session
from dashboard.services.keys import create_api_key, get_or_create_project
from tests.support.llm_server import ok

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MAKE_RUN_ADDRESS = "http://127.0.0.1:8000"
KEY_LINE = re.compile(r"^KEY=\.\.\..*$", re.M)
KEY_PLACEHOLDER = "YOUR_PROJECT_KEY"
VENV_PYTHON = ".venv/bin/python"
SHELL, PYTHON = {"sh", "bash", "shell", "console"}, {"python", "py"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"^# not run in tests:(.*)$")
COMMAND = re.compile(r"^\s*(\$ )?(make|python3?|\.venv/|curl|pip|celery|gunicorn|DATABASE_URL=|KEY=)\b")
BLOCK_TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    doc: str      # the file, relative to the repository's root
    line: int     # the line of its opening fence
    lang: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}-{self.lang}"

    @property
    def reason_not_run(self) -> str | None:
        """The marker's reason ("" for a marker without one), None when the block runs."""
        first = self.code.split("\n", 1)[0]
        found = MARKER.match(first)
        return found.group(1).strip() if found else None


def fenced_blocks() -> list[Block]:
    """Every fenced block of the documents, tagged or not, in file order."""
    out = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for found in FENCE.finditer(text):
            lang = found.group(1).strip().split(" ")[0].lower()
            line = text.count("\n", 0, found.start()) + 1
            out.append(Block(str(path.relative_to(REPO)), line, lang, found.group(2)))
    return out


BLOCKS = fenced_blocks()  # parsed once, at collection
RUNNABLE = [b for b in BLOCKS if b.lang in SHELL | PYTHON and b.reason_not_run is None]


def test_every_block_runs_or_says_why_not_and_commands_are_in_tagged_blocks():
    tagged = [b for b in BLOCKS if b.lang in SHELL | PYTHON]
    assert any(b.lang in SHELL for b in RUNNABLE) and any(b.lang in PYTHON for b in RUNNABLE)
    assert any("curl " in b.code for b in RUNNABLE), "the README's curl examples run"
    for b in tagged:
        assert b.reason_not_run != "", f"{b.name}: '# not run in tests:' needs a reason after it"
    for b in BLOCKS:
        first = next((ln for ln in b.code.splitlines() if ln.strip()), "")
        assert b.lang or not COMMAND.match(first), \
            f"{b.name}: an untagged block of commands; tag it ```sh (and mark it if it cannot run here)"
    for b in RUNNABLE:
        if "$KEY" in b.code:
            assert KEY_LINE.search(b.code), f"{b.name}: a block using $KEY defines it with a KEY=... line"


# -- what a block promised, visible in the database ------------------------------------------------

def _curl_examples(project: Project, key_row: ApiKey) -> None:
    session = Session.objects.get(project=project)
    assert session.metadata["license"] and session.metadata["meta"]["agent"]
    assert session.message_count == 28                      # the import and the append
    assert CompactionRun.objects.filter(session=session, force=True, trigger="api").exists()
    assert ApiKey.objects.get(pk=key_row.pk).last_used_at is not None


def _anthropic_compacts(project: Project, key_row: ApiKey) -> None:
    runs = CompactionRun.objects.filter(session__project=project, status="succeeded")
    assert runs.exists(), "the Anthropic example compacted"


def _agents_turns(project: Project, key_row: ApiKey) -> None:
    stored = Session.objects.get(project=project, title="run-42")
    assert stored.message_count == 4, "both turns (each with its own asyncio.run) are in the service session"
    endpoints = set(GatewayCall.objects.filter(session__project=project).values_list("endpoint", "status_code"))
    assert endpoints == {("responses", 200)}, "the SDK's model calls went to the gateway's Responses API"


CHECKS: list[tuple[str, Callable[[Project, ApiKey], None]]] = [
    ("-X POST http://127.0.0.1:8000/api/sessions/$SID/compactions", _curl_examples),
    ("from anthropic import Anthropic", _anthropic_compacts),
    ("CompactionServiceSession(", _agents_turns),
]


# -- running them ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scratch_root(tmp_path_factory) -> Path:
    """A folder that looks like the repository's root (symlinks) with a ``shared`` beside it."""
    base = tmp_path_factory.mktemp("docs-blocks")
    root = base / REPO.name
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".data", ".venv", "archive", "out"}:
            (root / entry.name).symlink_to(entry)
    if (REPO.parent / "shared").exists():
        (base / "shared").symlink_to(REPO.parent / "shared")
    return root


def _script(block: Block, address: str, key: str) -> str:
    code = block.code.replace(MAKE_RUN_ADDRESS, address).replace(KEY_PLACEHOLDER, key)
    code = KEY_LINE.sub(f"KEY={key}", code).replace(VENV_PYTHON, sys.executable)
    if block.lang == "console":  # a transcript: the commands are the lines after a "$ " prompt
        code = "\n".join(line[2:] for line in code.splitlines() if line.startswith("$ ")) + "\n"
    if block.lang in SHELL:
        return 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n' + code
    return code


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_the_block_runs_as_written(block, live_server, transactional_db, llm_server, settings, scratch_root):
    if block.lang in SHELL and "curl " in block.code and shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    settings.GATEWAY_API_BASE = llm_server.api_base
    settings.GATEWAY_API_KEY = "operator-upstream-key"
    llm_server.script(*[ok("Done.") for _ in range(100)])  # whatever model calls the block makes
    project, _ = get_or_create_project("docs")
    row, key = create_api_key(project, "docs")

    script = _script(block, live_server.url, key)
    path = scratch_root / f".block-{block.line}.{'py' if block.lang in PYTHON else 'sh'}"
    path.write_text(script, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENAI_API_KEY="test-key", OPENAI_API_BASE=llm_server.api_base,
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    cmd = [sys.executable, str(path)] if block.lang in PYTHON else ["bash", str(path)]
    done = subprocess.run(cmd, cwd=scratch_root, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    assert done.returncode == 0, f"{block.name} failed ({done.returncode}):\n{block.code}\n--- stdout\n" \
                                 f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    for needle, check in CHECKS:
        if needle in block.code:
            check(project, row)
