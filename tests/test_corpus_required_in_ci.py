"""Under CI=true a missing corpus fails the corpus-dependent tests (with the reason) instead
of skipping them: a CI checkout that lost the corpus must not pass its integrity checks by
not running them. Runs pytest itself, in a subprocess, on one such test."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = ["tests/engine/test_determinism.py::test_another_process_with_another_hash_seed_gives_the_same_bytes",
           "tests/engine/test_cli.py::test_replay_json_reports_compactions_and_integrity",
           # parametrized by corpus file: without a corpus its one parameter is the placeholder
           "tests/reduction/test_corpus_sessions.py::test_passes_by_round_keep_every_original_recoverable",
           # a loop over the corpus files, which would pass having checked nothing
           "tests/summarizer/test_summarizer_extractive.py::test_every_corpus_session_gets_a_labelled_summary_within_budget"]


# plugins the two target tests do not use; loading them (schemathesis imports hypothesis)
# is half of each run's CPU time
UNUSED_PLUGINS = ["-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:playwright", "-p", "no:base_url"]


def _pytest(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider", *UNUSED_PLUGINS,
                           *TARGETS],
                          cwd=REPO, env=clean | {"CORPUS_DIR": str(tmp_path / "no-corpus"), **env},
                          capture_output=True, text=True, timeout=300)


def test_a_missing_corpus_fails_under_ci_and_skips_with_the_reason_elsewhere(tmp_path):
    in_ci = _pytest(tmp_path, CI="true")
    assert in_ci.returncode != 0, in_ci.stdout
    assert "under CI=true the corpus-dependent tests must run" in in_ci.stdout
    assert "skipped" not in in_ci.stdout.splitlines()[-1]
    # each target fails, in its body or in a fixture that needs the corpus (an error)
    tally = {word: int(n) for n, word in re.findall(r"(\d+) (failed|errors?)", in_ci.stdout.splitlines()[-1])}
    assert sum(tally.values()) == len(TARGETS), in_ci.stdout
    local = _pytest(tmp_path)
    assert local.returncode == 0, local.stdout
    assert f"{len(TARGETS)} skipped" in local.stdout and "no-corpus" in local.stdout
