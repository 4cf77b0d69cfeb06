"""Mutation testing of the security- and integrity-critical modules with mutmut, one module at
a time, each against the tests that exercise it (so a module takes minutes to hours, not the
whole suite per mutant). ``make mutate`` runs it; it is not part of ``make test``.

    .venv/bin/python scripts/mutate.py                 # every module below, in order
    .venv/bin/python scripts/mutate.py cut access      # some of them
    .venv/bin/python scripts/mutate.py --list

Each module runs in its own scratch directory ``.mutmut/<name>/`` (links to the sources, a
``setup.cfg`` with its mutmut settings, mutmut's ``mutants/`` state), so runs are resumable
and do not touch the checkout. mutmut runs one test process at a time (``MUTATE_CHILDREN``
to change it). The surviving mutants of each module are written to
``.mutmut/<name>/survivors.txt`` and a summary line per module is printed at the end: the
figures reported in bench/README.md ("Mutation testing")."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRATCH = REPO / ".mutmut"
# What a test run needs besides the packages mutmut copies itself.
LINKED = ["compaction", "dashboard", "tests", "templates", "static", "manage.py", "gunicorn.conf.py",
          "pyproject.toml", "scripts", "docs", "README.md", "bench"]


@dataclass(frozen=True)
class Target:
    module: str            # the file mutated
    tests: tuple[str, ...]  # the tests that exercise it (pytest node ids or files)


# Smallest and most critical first.
TARGETS: dict[str, Target] = {
    "cut": Target("compaction/cut.py", (
        "tests/engine/test_cut.py", "tests/engine/test_cut_rules.py", "tests/engine/test_landing_target.py",
        "tests/engine/test_overflow_guard.py", "tests/engine/test_latest_round.py")),
    # the selector's own tests (seconds) and a slice of the page routes: the whole route table
    # (tests/pages/test_access_control.py) takes 12 minutes per mutant on the shared machine
    "access": Target("dashboard/selectors/access.py", (
        "tests/pages/test_access_selectors.py",
        "tests/pages/test_access_control.py::test_a_viewer_cannot_upload_into_the_project",
        "tests/pages/test_access_control.py::test_creating_a_project_makes_the_creator_its_owner")),
    # the rules on their own (seconds); test_connections.py shows them through live servers
    "connections": Target("dashboard/services/connections.py", (
        "tests/service/test_connection_rules.py",)),
    "landing": Target("compaction/landing.py", (
        "tests/engine/test_landing_target.py", "tests/engine/test_landing_numbers.py",
        "tests/engine/test_overflow_guard.py")),
    # test_textsize.py counts with a counter made per test: mutmut runs each mutant in a fork
    # of the process that ran the clean tests, where the cached tiktoken counters already
    # hold the counts of test_tokens.py's hostile texts, so those alone kill nothing
    "textsize": Target("compaction/textsize.py", (
        "tests/engine/test_textsize.py", "tests/engine/test_tokens.py")),
    "text_repair": Target("dashboard/text_repair.py", (
        "tests/pages/test_text_repair.py", "tests/pages/test_stored_surrogates.py")),
    "archive": Target("compaction/archive.py", (
        "tests/engine/test_archive.py", "tests/engine/test_archive_handles.py", "tests/reduction/test_archive_tools.py",
        "tests/engine/test_history_runs.py",
        "tests/engine/test_token_tailoring.py")),
    # the routing and both kinds of call against the scripted server (a minute); test_gateway.py
    # (every endpoint through the SDKs) takes far longer per mutant
    "upstream": Target("dashboard/gateway/upstream.py", (
        "tests/service/test_upstream_rules.py",)),
    "responses_body": Target("dashboard/gateway/responses_body.py", (
        "tests/service/test_responses_body.py",)),
    # placement on its own, requests parsed from bytes and placed without a server (seconds);
    # test_gateway*.py show the same through the live endpoints, minutes per mutant
    "identity": Target("dashboard/gateway/identity.py", (
        "tests/service/test_identity_rules.py",)),
    "compactor": Target("compaction/compactor.py", (
        "tests/engine/test_overflow_guard.py", "tests/engine/test_compactor.py", "tests/engine/test_landing_target.py")),
}

# timeout_constant: mutmut's wall limit is (the tests' measured time + timeout_constant) * 15.
# With its default of 1 s a mutant whose tests take milliseconds gets 15 s, which a forked
# pytest on a loaded shared machine can exceed without hanging (a false "timeout", counted as
# killed).
SETUP_CFG = """[mutmut]
source_paths =
    compaction
    dashboard
only_mutate =
    {module}
also_copy =
{also_copy}
timeout_constant = 4
pytest_add_cli_args =
    -p
    no:cacheprovider
    -q
{reuse}pytest_add_cli_args_test_selection =
{tests}
"""


def _indent(items: list[str]) -> str:
    return "\n".join(f"    {i}" for i in items)


def prepare(name: str, target: Target, reuse_db: bool = False) -> Path:
    """The scratch directory of one module: links to the checkout and its mutmut settings."""
    work = SCRATCH / name
    work.mkdir(parents=True, exist_ok=True)
    for item in LINKED:
        link = work / item
        if not link.exists() and (REPO / item).exists():
            link.symlink_to(REPO / item)
    also = [i for i in LINKED if i not in ("compaction", "dashboard") and (REPO / i).exists()]
    (work / "setup.cfg").write_text(SETUP_CFG.format(module=target.module, also_copy=_indent(also),
                                                     tests=_indent(list(target.tests)),
                                                     reuse="    --reuse-db\n" if reuse_db else ""))
    return work


SUMMARY = re.compile(r"^\s*(?P<name>\S+): (?P<status>[a-z ]+)$")


def results(work: Path) -> dict[str, list[str]]:
    """mutmut's verdicts of this module's mutants, by status."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work,
                         capture_output=True, text=True, check=True).stdout
    by: dict[str, list[str]] = {}
    for line in out.splitlines():
        m = SUMMARY.match(line)
        if m:
            by.setdefault(m["status"].strip(), []).append(m["name"])
    return by


def run(name: str, target: Target, children: int, survivors_only: bool = False) -> str:
    # One test process at a time: the mutants share one SQLite test database, made once and kept
    # (--reuse-db; each test rolls back or flushes what it wrote). Made anew for every mutant,
    # its migrations took most of a mutant's time (12 of 15 s on the shared machine).
    work = prepare(name, target, reuse_db=children == 1)
    again = []
    if survivors_only and (work / "mutants").is_dir():
        # timeouts too: on a loaded machine a timeout may be slowness rather than a hang
        again = [m for status in ("survived", "no tests", "timeout") for m in results(work).get(status, [])]
    env = dict(os.environ, CORPUS_DIR=os.environ.get("CORPUS_DIR", str(REPO.parent / "shared" / "corpus")))
    env.pop("PYTEST_ADDOPTS", None)
    env["TEST_SQLITE_PATH"] = str(work / "test_db.sqlite3")
    print(f"== {name}: {target.module} against {len(target.tests)} test file(s)/node(s)", flush=True)
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *again], cwd=work,
                   env=env, check=False)
    by = results(work)
    survivors = by.get("survived", []) + by.get("no tests", [])
    lines = []
    for mutant in survivors:
        diff = subprocess.run([sys.executable, "-m", "mutmut", "show", mutant], cwd=work, capture_output=True,
                              text=True).stdout
        lines.append(diff)
    (work / "survivors.txt").write_text("\n".join(lines))
    if again:
        # mutmut forgets earlier verdicts when the test selection changes: only the re-run counts
        fates = {status: sum(1 for m in again if m in names) for status, names in by.items()}
        return (f"{name:12} {target.module:36} re-ran {len(again)} survivor(s): "
                + ", ".join(f"{k} {v}" for k, v in sorted(fates.items()) if v))
    total = sum(len(v) for v in by.values())
    killed = len(by.get("killed", [])) + len(by.get("timeout", [])) + len(by.get("caught by type check", []))
    score = f"{100 * killed / total:.1f}%" if total else "n/a"
    counts = ", ".join(f"{k} {len(v)}" for k, v in sorted(by.items()))
    return f"{name:12} {target.module:36} mutants {total:4}  score {score:>6}  ({counts})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"modules to mutate (default: all of {', '.join(TARGETS)})")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--fresh", action="store_true", help="forget earlier verdicts of these modules")
    parser.add_argument("--survivors", action="store_true",
                        help="run only the mutants that survived or timed out in the previous run (after adding tests)")
    args = parser.parse_args()
    if args.list:
        for name, t in TARGETS.items():
            print(f"{name:12} {t.module}\n{'':12} " + "\n{'':12} ".join(t.tests))
        return 0
    unknown = [n for n in args.names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    children = int(os.environ.get("MUTATE_CHILDREN", "1"))
    summary = []
    for name in args.names or list(TARGETS):
        if args.fresh:
            shutil.rmtree(SCRATCH / name / "mutants", ignore_errors=True)
        summary.append(run(name, TARGETS[name], children, survivors_only=args.survivors))
    print("\n".join(["", "== mutation score (killed / all; survivors in .mutmut/<name>/survivors.txt)", *summary]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
