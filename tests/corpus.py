"""Access to the shared corpus of real agent transcripts (../shared/corpus)."""
from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(os.environ.get("CORPUS_DIR", REPO.parent / "shared" / "corpus"))


def corpus_files() -> list[Path]:
    return sorted(CORPUS_DIR.glob("*.json")) if CORPUS_DIR.is_dir() else []


@cache
def load(name: str) -> dict:
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
