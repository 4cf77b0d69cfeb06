"""Access to the shared corpus of real agent transcripts (../shared/corpus)."""
from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(os.environ.get("CORPUS_DIR", REPO.parent / "shared" / "corpus"))


def corpus_files() -> list[Path]:
    return sorted(CORPUS_DIR.glob("*.json")) if CORPUS_DIR.is_dir() else []


def corpus_missing(what: str) -> NoReturn:
    """A test that needs the corpus did not find it. On a developer's machine it is skipped
    with the reason; under ``CI=true`` (where the corpus is part of the checkout) it fails
    instead, so a CI run that lost the corpus cannot pass by skipping its integrity checks."""
    reason = f"{what} not found in {CORPUS_DIR} (set CORPUS_DIR)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; under CI=true the corpus-dependent tests must run", pytrace=False)
    pytest.skip(reason)


def require_corpus(*names: str) -> None:
    """Go on only when the corpus (or, with ``names``, each of those files in it) is present;
    otherwise :func:`corpus_missing`."""
    files = {p.name for p in corpus_files()}
    if not files:
        corpus_missing("the shared corpus")
    absent = [n for n in names if n not in files]
    if absent:
        corpus_missing(f"corpus file(s) {', '.join(absent)}")


# The one parameter of a corpus-parametrized test when the corpus is missing: an empty
# parameter set would be skipped without a word, even under CI=true; this one reaches
# :func:`corpus_missing` when the test loads it.
MISSING = "(shared corpus not found)"


def corpus_names() -> list[str]:
    """The corpus files' names, for ``pytest.mark.parametrize``; ``[MISSING]`` without a corpus."""
    return [p.name for p in corpus_files()] or [MISSING]


@cache
def load(name: str) -> dict:
    if name == MISSING:
        corpus_missing("the shared corpus")
    path = CORPUS_DIR / name if not name.endswith(".json") or "/" not in name else Path(name)
    if not path.suffix:
        path = path.with_suffix(".json")
    return json.loads(path.read_text(encoding="utf-8"))


def session(prefix: str) -> dict:
    """First corpus session whose file name starts with ``prefix``."""
    for p in corpus_files():
        if p.name.startswith(prefix):
            return load(p.name)
    raise FileNotFoundError(prefix)
