"""Retention score: identifiers of an evicted span and their presence in the new context."""
from __future__ import annotations

import base64
import json

import pytest

from compaction.messages import wrap_originals
from compaction.retention import (
    KINDS,
    MISSING_LIMIT,
    Identifiers,
    compression,
    extract_identifiers,
    retention,
)
from tests.corpus import CORPUS_DIR as CORPUS
from tests.corpus import require_corpus


def user(text):
    return {"role": "user", "content": text}


def assistant(text=None, calls=None):
    msg = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = [{"id": f"c{i}", "type": "function",
                              "function": {"name": name, "arguments": json.dumps(args)}}
                             for i, (name, args) in enumerate(calls)]
    return msg


def tool(text, cid="c0"):
    return {"role": "tool", "tool_call_id": cid, "content": text}


def kinds_of(text, role="user"):
    ids = extract_identifiers([{"role": role, "content": text}])
    return {k: v for k, v in ids.by_kind.items() if v}


# -- extraction per kind ----------------------------------------------------------------------

def test_paths():
    found = kinds_of("Edit /srv/app/config.yaml, then ./run.sh and ~/notes/todo.md; also src/app/models.py, "
                     "setup.cfg, Makefile and C:\\Users\\me\\report.docx.")["path"]
    assert found == {"/srv/app/config.yaml", "./run.sh", "~/notes/todo.md", "src/app/models.py", "setup.cfg",
                     "Makefile", "C:\\Users\\me\\report.docx"}


def test_path_lookalikes_are_not_paths():
    found = kinds_of("read and/or write at 5 req/s, I/O on 2024/01/02, e.g. 3.5 or os.path.join").get("path", set())
    assert found == set()


def test_urls_are_not_also_paths():
    k = kinds_of("Docs at https://docs.example.com/api/v2/users?id=7, mirror ftp://files.example.org/pub/x.tar.gz.")
    assert k["url"] == {"https://docs.example.com/api/v2/users?id=7", "ftp://files.example.org/pub/x.tar.gz"}
    assert "path" not in k


def test_hex_ids_and_uuids():
    k = kinds_of("commit 3f9a2b1c fixed run 123E4567-E89B-12D3-A456-426614174000; deadbeef (no digit), "
                 "1234567 (no letter), 0x1f2e3d4c")
    assert k["uuid"] == {"123e4567-e89b-12d3-a456-426614174000"}
    assert k["hex_id"] == {"3f9a2b1c", "0x1f2e3d4c"}


def test_numbers_with_units():
    k = kinds_of("p99 went from 200 ms to 1.5s, disk 3.5GB, 404 errors, 95% done, 2x faster, $20, "
                 "1,024 rows; not 3 apples")
    assert k["number_unit"] == {"200 ms", "1.5 s", "3.5 GB", "404 errors", "95%", "2x", "$20", "1,024 rows"}


def test_code_identifiers_and_errors():
    k = kinds_of("load_settings() calls os.path.join and parseConfig, served by HTTPServer; "
                 "it raised ValueError then a DeprecationWarning. Plain words and URLs, IDs, Error are not.")
    assert k["code"] == {"load_settings", "os.path.join", "parseConfig", "HTTPServer"}
    assert k["error"] == {"ValueError", "DeprecationWarning"}


def test_quoted_strings_only_from_user_messages():
    text = 'Rename it to "fast path", keep \'legacy mode\' and run `make check`; don\'t touch it\'s tests. "ab"'
    assert kinds_of(text)["quoted"] == {"fast path", "legacy mode", "make check"}
    assert "quoted" not in kinds_of(text, role="assistant")
    assert "quoted" not in kinds_of(text, role="tool")


def test_cjk_text_does_not_crash_and_keeps_ascii_identifiers():
    text = "请修改config_file文件里的超时为200ms，然后运行「make test」。ファイル /etc/app.conf を確認して。한국어 텍스트"
    k = kinds_of(text)
    assert "config_file" in k["code"]
    assert "/etc/app.conf" in k["path"]
    assert "200 ms" in k["number_unit"]
    assert "make test" in k["quoted"]
    r = retention([user(text)], [user("要点：config_file, /etc/app.conf")])
    assert r["referenced"]["kept"] >= 2


def test_base64_blobs_are_ignored():
    blob = base64.b64encode(bytes(range(256)) * 40).decode()
    ids = extract_identifiers([tool(f"data:image/png;base64,{blob} end")])
    assert not any(len(i) > 50 for i in ids.all)
    assert ids.by_kind["path"] == set()


# -- referenced versus all ---------------------------------------------------------------------

def test_referenced_comes_from_user_assistant_and_arguments():
    span = [
        user("Fix the crash in billing/invoice.py"),
        assistant("Reading it now.", calls=[("read_file", {"path": "/repo/billing/tax_rules.py",
                                                           "win": "C:\\repo\\billing.ini"})]),
        tool("Traceback: KeyError in compute_total at /repo/billing/invoice.py:42"),
    ]
    ids = extract_identifiers(span)
    assert isinstance(ids, Identifiers)
    assert {"billing/invoice.py", "/repo/billing/tax_rules.py", "C:\\repo\\billing.ini"} <= ids.referenced
    # only the tool result mentions these: they count in "all" but are not referenced
    assert {"KeyError", "compute_total", "/repo/billing/invoice.py"} <= ids.all - ids.referenced
    assert ids.referenced <= ids.all
    # tool names are not identifiers the agent "wrote"
    assert "read_file" not in ids.all


def test_messages_objects_are_accepted():
    raws = [user("see /tmp/a.txt"), assistant("ok")]
    assert extract_identifiers(wrap_originals(raws)).referenced == {"/tmp/a.txt"}


# -- the score ----------------------------------------------------------------------------------

SPAN = [
    user("The deploy of api_gateway fails with TimeoutError after 300 ms; config in deploy/prod.yaml"),
    assistant("Checking.", calls=[("run", {"cmd": "kubectl logs api_gateway --since=10m"})]),
    tool("ERROR upstream 10.0.0.12 refused; see https://status.example.com/incidents/42"),
    assistant("The upstream refuses connections; I will raise the timeout in deploy/prod.yaml."),
]


def test_summary_that_keeps_a_path_scores_higher():
    tail = [user("go on")]
    keeps = [user("Summary: api_gateway times out (TimeoutError, 300ms); fix in deploy/prod.yaml.")] + tail
    drops = [user("Summary: api_gateway times out (TimeoutError, 300ms); fix the config.")] + tail
    good, bad = retention(SPAN, keeps), retention(SPAN, drops)
    assert good["referenced"]["score"] > bad["referenced"]["score"]
    assert "deploy/prod.yaml" in bad["missing"] and "deploy/prod.yaml" not in good["missing"]
    assert good["by_kind"]["path"]["referenced"] == {"total": 1, "kept": 1, "score": 1.0}
    assert bad["by_kind"]["path"]["referenced"] == {"total": 1, "kept": 0, "score": 0.0}
    # "300 ms" is found as "300ms"
    assert "300 ms" not in good["missing"]


def test_result_shape_and_all_figure():
    r = retention(SPAN, [user("nothing useful")])
    assert set(r) == {"referenced", "all", "missing", "by_kind"}
    assert r["referenced"]["kept"] == 0 and r["referenced"]["score"] == 0.0
    assert r["all"]["total"] > r["referenced"]["total"]
    assert set(r["by_kind"]) == set(KINDS)
    assert r["missing"] == sorted(r["missing"])
    full = retention(SPAN, SPAN)
    assert full["referenced"]["score"] == 1.0 and full["all"]["score"] == 1.0 and full["missing"] == []
    json.dumps(full)  # JSON-safe


def test_presence_is_case_insensitive_and_reads_tool_arguments():
    span = [user("open /Data/Report_Final.CSV")]
    ctx = [assistant(calls=[("read", {"path": "/data/report_final.csv"})])]
    assert retention(span, ctx)["referenced"]["score"] == 1.0
    assert retention(span, "as text: /DATA/report_final.csv")["referenced"]["score"] == 1.0


def test_empty_span_has_no_score():
    r = retention([], [user("x")])
    assert r["referenced"] == {"total": 0, "kept": 0, "score": None}
    assert r["missing"] == []


def test_missing_is_capped():
    span = [user(" ".join(f"/srv/file_{i:03d}.txt" for i in range(120)))]
    r = retention(span, [user("none")])
    assert r["referenced"]["total"] == 120
    assert len(r["missing"]) == MISSING_LIMIT
    assert r["missing"][0] == "/srv/file_000.txt"


def test_large_span_is_handled():
    # a few MB of tool output with many repeats (no timing asserted)
    chunk = "\n".join(f"line {i}: value_{i % 500} at /var/log/app_{i % 50}.log took {i % 900} ms" for i in range(20000))
    span = [user("tail the logs"), assistant(calls=[("sh", {"cmd": "cat /var/log/*.log"})])] + \
        [tool(chunk, "c0")]
    r = retention(span, [user("summary: looked at /var/log/app_1.log")])
    assert r["all"]["total"] >= 500 + 50
    assert r["referenced"]["total"] >= 1


def test_corpus_session_runs():
    require_corpus()
    files = sorted(CORPUS.glob("*.json"))
    for n, path in enumerate(files):
        messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
        cut = len(messages) * 3 // 4
        r = retention(messages[:cut], messages[cut:])
        assert r["referenced"]["total"] >= r["referenced"]["kept"] >= 0
        json.dumps(r)
        if n % 3 == 0:
            # every identifier is found in the text it was extracted from
            whole = retention(messages, messages)
            assert whole["all"]["kept"] == whole["all"]["total"], (path.name, whole["missing"])


def test_presence_in_a_large_context_is_exact():
    # contexts over 20,000 characters go through the 4-gram shortcut: results must not change
    filler = "lorem ipsum dolor sit amet " * 2000
    span = [user("check /srv/data/input_v2.csv, parse_rows, 0xdeadbeef1 and /srv/other/gone.txt")]
    ctx = [user(filler + "glued:/srv/data/input_v2.csv;parse_rows()" + filler + "0XDEADBEEF1")]
    r = retention(span, ctx)
    assert r["missing"] == ["/srv/other/gone.txt"]
    assert r["referenced"] == {"total": 4, "kept": 3, "score": 0.75}


# -- compression --------------------------------------------------------------------------------

def test_compression():
    assert compression(10000, 800) == 12.5
    assert compression(0, 100) is None
    assert compression(100, 0) is None
    with pytest.raises(ValueError):
        compression(-1, 5)
