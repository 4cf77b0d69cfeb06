"""The extractive summary and the retention score agree on what a path or a URL is."""
from __future__ import annotations

import pytest

from compaction.identifiers import find_paths
from compaction.retention import extract_identifiers
from compaction.summarizer.extractive.sections import build_sections
from compaction.summarizer.extractive.transcript import parse_transcript

TRICKY = [
    "see https://docs.example.com/api/v2/users?id=7, then edit src/app/models.py.",
    "the JSON held \"https://www.sqlite.org/inmemorydb.html\\n\" and C:\\\\repo\\\\billing.ini",
    "read and/or write text/html at 5 req/s on 2024/01/02; e.g. os.path.join or django.db",
    "见src/app.py，然后 ./run.sh 和 ~/notes/todo.md",
    "PATH=/usr/bin:/usr/local/bin and </output> then /srv/data/ and a/",
    "logs in /runs/123e4567-e89b-12d3-a456-426614174000/out.log, see Makefile and setup.cfg",
    "ftp://files.example.org/pub/x.tar.gz (mirror) and ------file.py and self.map",
]


def summarizer_paths(text: str) -> set[str]:
    """Paths and URLs the summary's path sections list for an agent's message."""
    sections = build_sections(parse_transcript(f"[assistant]: {text}"), None, None)
    items = sections["Files edited"] + sections["Files read"] + sections["Other paths"]
    return {item.text.rsplit(" (", 1)[0] for item in items}


def retention_paths(text: str) -> set[str]:
    ids = extract_identifiers([{"role": "user", "content": text}])
    return ids.by_kind["path"] | ids.by_kind["url"]


@pytest.mark.parametrize("text", TRICKY)
def test_the_summary_and_the_retention_score_find_the_same_paths_and_urls(text):
    assert summarizer_paths(text) == retention_paths(text) == set(find_paths(text))


def test_the_shared_rule_on_the_tricky_cases():
    found = set().union(*(find_paths(t) for t in TRICKY))
    assert {"https://www.sqlite.org/inmemorydb.html", "C:\\repo\\billing.ini", "src/app.py", "./run.sh",
            "/usr/bin", "/usr/local/bin", "/srv/data/", "Makefile", "setup.cfg",
            "/runs/123e4567-e89b-12d3-a456-426614174000/out.log", "ftp://files.example.org/pub/x.tar.gz"} <= found
    for word in ("and/or", "text/html", "req/s", "2024/01/02", "os.path.join", "django.db", "/output", "a/",
                 "------file.py", "self.map"):
        assert word not in found
