"""The import graph stays layered: no import cycles in the engine or the service, and the
engine imports nothing of Django or the service.

Imports inside functions count (grimp reads them): a function-level import that closes a
cycle still makes the modules depend on each other, it only moves the failure to run time."""
from __future__ import annotations

from functools import cache

import grimp
import pytest

PACKAGES = ("compaction", "dashboard")


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)


def strongly_connected(package: str) -> list[list[str]]:
    """Import cycles among the modules of ``package``: each strongly connected component of
    more than one module, and each module that imports itself (Tarjan, iterative)."""
    g = graph()
    modules = sorted(m for m in g.modules if m == package or m.startswith(package + "."))
    inside = set(modules)

    def successors(m: str) -> list[str]:
        # Importing ``a.b.c`` first runs ``a/b/__init__.py``: an import of a submodule is
        # also an edge to every subpackage above it, unless the importer sits inside that
        # package already (then it is being initialised, not run again; a package importing its own modules is no cycle either). The top-level
        # package, which everything sits under and which only re-exports, is left aside.
        own = {".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 2)}
        out = set()
        for n in g.find_modules_directly_imported_by(m):
            parts = n.split(".")
            out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
        return sorted((out - own) & inside)

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(successors(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors(child))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1 or node in successors(node):
                    cycles.append(sorted(component))
    return cycles


def describe(component: list[str]) -> str:
    """The component's modules and one cycle through its first module, as import lines."""
    g = graph()
    first = component[0]
    members = set(component)
    loop = None
    for nxt in sorted(members & set(g.find_modules_directly_imported_by(first))):  # direct edges only
        if nxt == first:
            loop = (first, first)
            break
        chain = g.find_shortest_chain(importer=nxt, imported=first)
        if chain is not None and set(chain) <= members:
            loop = (first, *chain)
            break
    path = " -> ".join(loop) if loop else "?"
    return f"{len(component)} modules: {', '.join(component)}\n    e.g. {path}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package):
    cycles = strongly_connected(package)
    assert not cycles, f"import cycles in {package}:\n  " + "\n  ".join(describe(c) for c in cycles)


def test_importing_a_submodule_counts_as_importing_its_package(tmp_path, monkeypatch):
    # policy -> summarizer.prompts runs summarizer/__init__, which may import policy back.
    pkg = tmp_path / "layering_probe2"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from layering_probe2 import top\n")
    (pkg / "sub" / "leaf.py").write_text("")
    (pkg / "top.py").write_text("from layering_probe2.sub import leaf\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(grimp, "build_graph", _probe_graph(grimp.build_graph))
    graph.cache_clear()
    try:
        assert strongly_connected("layering_probe2") == [["layering_probe2.sub", "layering_probe2.top"]]
    finally:
        graph.cache_clear()


def _probe_graph(build):
    return lambda *packages, **kw: build("layering_probe2", cache_dir=None)


def test_the_engine_imports_nothing_of_django_or_the_service():
    g = graph()
    offending = sorted(
        f"{m} imports {n}"
        for m in g.modules if m == "compaction" or m.startswith("compaction.")
        for n in g.find_modules_directly_imported_by(m)
        if n.split(".")[0] in ("django", "dashboard"))
    assert not offending, "the engine must stay a library without Django:\n  " + "\n  ".join(offending)


def test_the_graph_counts_imports_inside_functions(tmp_path, monkeypatch):
    # The cycle check is only worth anything if an import hidden in a function is an edge.
    pkg = tmp_path / "layering_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from layering_probe import high\n    return high\n")
    (pkg / "high.py").write_text("from layering_probe import low\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = grimp.build_graph("layering_probe", cache_dir=None)
    assert probe.direct_import_exists(importer="layering_probe.low", imported="layering_probe.high")
