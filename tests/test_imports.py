"""The import graph of kernelforms: the layers import one way (no cycle through the method
registry, the conic dispatch, process isolation or the shared helpers), and the modules
that every layer uses import nothing of kernelforms."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kernelforms"

#: modules no import cycle may run through
ACYCLIC = {"kernelforms.methods", "kernelforms.registry", "kernelforms.solvers.conic",
           "kernelforms.isolation", "kernelforms.processes", "kernelforms.compare",
           "kernelforms.report", "kernelforms.result", "kernelforms.util", "kernelforms.recipes",
           "kernelforms.testing", "kernelforms.grid", "kernelforms.cli", "kernelforms.plots"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module -> the kernelforms modules it imports, at the top level or inside functions
    (the package ``kernelforms`` itself left out)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
                wanted = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            for w in wanted:
                parts = w.split(".")
                for i in range(len(parts), 0, -1):  # the longest known module prefix
                    if ".".join(parts[:i]) in mods:
                        targets.add(".".join(parts[:i]))
                        break
        graph[name] = targets - {name, "kernelforms"}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(group)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_runs_through_the_registry_dispatch_or_reports():
    graph = import_graph()
    assert {"kernelforms.methods", "kernelforms.solvers.conic"} <= set(graph)
    # a package on the list (report/, cli/, verify/ ...) brings its submodules
    acyclic = ACYCLIC | {m for m in graph if m.rpartition(".")[0] in ACYCLIC}
    bad = [sorted(c) for c in cycles(graph) if c & acyclic]
    assert bad == [], bad


def test_the_shared_modules_import_nothing_of_kernelforms():
    graph = import_graph()
    for name in ("kernelforms.registry", "kernelforms.processes", "kernelforms.util"):
        assert graph[name] <= {"kernelforms.errors"}, (name, graph[name])
    # the conic dispatch reads the registry; it never imports methods (which imports it)
    assert "kernelforms.methods" not in graph["kernelforms.solvers.conic"]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


#: import cycles known and not yet removed (each must still be a cycle: remove it here when it
#: is gone).  None: the last one (formulations.full_sdp <-> dual_sdp) went when pair_operator
#: moved to formulations.base.
KNOWN_CYCLES: list = []


def _walk(path: Path, prefix: str) -> list[str]:
    """Every module and package under ``path`` by :func:`pkgutil.iter_modules` (nothing is
    imported; ``__main__`` left out: importing it runs the command line), and the namespace
    packages pkgutil does not list (a directory of modules without ``__init__.py``, e.g.
    ``kernelforms.solvers``)."""
    import pkgutil

    out = []
    for info in pkgutil.iter_modules([str(path)], prefix):
        if info.name.endswith(".__main__"):
            continue
        out.append(info.name)
        if info.ispkg:
            out += _walk(path / info.name.rsplit(".", 1)[1], info.name + ".")
    for sub in sorted(path.iterdir()):
        if sub.is_dir() and not (sub / "__init__.py").exists() and any(sub.glob("*.py")):
            out += _walk(sub, prefix + sub.name + ".")
    return out


def test_the_import_graph_covers_every_module_and_has_no_cycle():
    """Every module of the package (walked by pkgutil, not a fixed list) is in the graph, and
    no group of modules imports each other, at the top level or inside functions."""
    graph = import_graph()
    walked = set(_walk(PACKAGE, "kernelforms."))
    assert {"kernelforms.certificate.eigen", "kernelforms.solvers.rank"} <= walked
    assert walked <= set(graph), sorted(walked - set(graph))
    found = cycles(graph)
    for known in KNOWN_CYCLES:
        assert known in found, f"{sorted(known)} is no longer a cycle: drop it from KNOWN_CYCLES"
    bad = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert bad == [], bad


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    """A cycle closed by an import inside a function counts (it is one at run time)."""
    import textwrap

    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("")
    (tmp_path / "p" / "a.py").write_text("from .b import g\n")
    (tmp_path / "p" / "b.py").write_text(textwrap.dedent("""
        def g():
            from .a import g as h
            return h
    """))
    global PACKAGE
    old = PACKAGE
    try:
        PACKAGE = tmp_path / "p"
        import_graph.cache_clear()
        graph = import_graph()
    finally:
        PACKAGE = old
        import_graph.cache_clear()
    assert cycles(graph) == [{"p.a", "p.b"}]
    assert set(_walk(tmp_path / "p", "p.")) == {"p.a", "p.b"}


@pytest.mark.slow
def test_every_module_imports():
    """Each module walked by pkgutil imports (an optional dependency that is not installed is
    named in the skip list, not a failure)."""
    import importlib

    failed, missing = [], []
    for name in sorted(_walk(PACKAGE, "kernelforms.")):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and not exc.name.startswith("kernelforms"):
                missing.append((name, exc.name))
            else:
                failed.append((name, repr(exc)))
        except Exception as exc:  # noqa: BLE001 - any failure to import is reported
            failed.append((name, repr(exc)))
    assert failed == [], failed
