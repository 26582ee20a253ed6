"""The module structure: no import circle in epfuzz, no oversized module or function.

The import graph is read from the source (every `import`, at module level, inside
functions, or under TYPE_CHECKING), so a lazy import cannot hide a circle. Importing
`a.b.c` also runs the package `a.b`'s __init__, so it counts as an edge to that
package unless the importer lives inside it. Run this file as a script to print
the graph's cycles and the oversized code.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "epfuzz"
MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 80


def module_name(path: Path, pkg: Path = PKG) -> str:
    parts = path.relative_to(pkg.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(pkg: Path = PKG) -> dict[str, Path]:
    return {module_name(p, pkg): p for p in sorted(pkg.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_pkg: bool, known: set[str]) -> list[str]:
    """epfuzz modules one import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:  # relative: resolve against this module's package
        pkg = here if is_pkg else here.rpartition(".")[0]
        for _ in range(node.level - 1):
            pkg = pkg.rpartition(".")[0]
        base = f"{pkg}.{base}" if base else pkg
    # `from pkg import mod` names the submodule when there is one, else an attribute of pkg
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    mods = modules(pkg)
    known = set(mods)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, mod, path.name == "__init__.py", known):
                # importing a.b.c runs a.b's __init__ first (unless we are already inside a.b)
                parts = target.split(".")
                for i in range(2, len(parts) + 1):
                    dep = ".".join(parts[:i])
                    if dep in known and dep != mod and not mod.startswith(dep + "."):
                        graph[mod].add(dep)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def cycle_path(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete circle inside a component, for a readable failure message."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [start]
                    while v != start:
                        path.append(v)
                        v = prev[v]
                    return [start, *reversed(path[1:]), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def oversized() -> list[str]:
    out = []
    for path in modules().values():
        text = path.read_text()
        n = len(text.splitlines())
        if n > MAX_MODULE_LINES:
            out.append(f"module {path.relative_to(PKG.parent)}: {n} lines (max {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"function {path.relative_to(PKG.parent)}:{node.lineno} {node.name}: "
                               f"{length} lines (max {MAX_FUNCTION_LINES})")
    return out


def test_graph_sees_lazy_relative_and_package_imports(tmp_path):
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from demo.sub import leaf\n")
    (pkg / "sub" / "leaf.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import demo.top\n")
    (pkg / "sub" / "sibling.py").write_text("from .leaf import x\n")
    (pkg / "top.py").write_text("def f():\n    from demo.sub.leaf import y\n    import json\n")
    graph = import_graph(pkg)
    assert graph["demo.top"] == {"demo.sub", "demo.sub.leaf"}  # lazy import, and the package __init__ it runs
    assert graph["demo.sub.sibling"] == {"demo.sub.leaf"}      # relative; no edge to its own package
    assert graph["demo.sub"] == {"demo.sub.leaf"}               # `from pkg import mod` names the module
    assert graph["demo.sub.leaf"] == {"demo.top"}               # TYPE_CHECKING imports count
    assert cycles(graph) == [["demo.sub", "demo.sub.leaf", "demo.top"]]


def test_the_ir_is_below_the_protocol_registry():
    graph = import_graph()
    assert "epfuzz.protocols" not in graph["epfuzz.ir.scenario"]
    assert "epfuzz.ir.presets" not in graph["epfuzz.ir.scenario"]


def test_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycle_path({"a": {"b"}, "b": {"a"}}, ["a", "b"]) == ["a", "b", "a"]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = import_graph()
    found = [" -> ".join(cycle_path(graph, c)) + f"   (component: {', '.join(c)})" for c in cycles(graph)]
    assert not found, "import cycles in epfuzz:\n  " + "\n  ".join(found)


def test_no_oversized_module_or_function():
    found = oversized()
    assert not found, "too large:\n  " + "\n  ".join(found)



#: the packages of epfuzz from the bottom up: a module imports its own package and those below it
#: only, so the drawing of the packages from the imports has no upward arrow and no cycle. Only
#: epfuzz/__init__.py and __main__.py sit outside a package (they may import anything).
LAYERS = (
    'infra', 'core', 'ir', 'protocols', 'encoding', 'model', 'sim', 'guest', 'backends', 'cases',
    'triage', 'search', 'repair', 'continuous', 'campaign', 'cli',
)
TOP = ("epfuzz", "epfuzz.__main__")


def package_of(module: str) -> str:
    return module.split(".")[1]


def test_every_module_sits_in_a_package_of_the_layers():
    mods = [m for m in import_graph() if m not in TOP]
    stray = sorted(m for m in mods if m.count(".") == 1 and not (PKG / package_of(m)).is_dir())
    unknown = sorted({package_of(m) for m in mods} - set(LAYERS) - {package_of(m) for m in stray})
    assert not stray, f"modules outside any package (put each in one, and the package in LAYERS): {stray}"
    assert not unknown, f"packages missing from LAYERS (place each in the order): {unknown}"


def test_packages_import_only_themselves_and_the_layers_below():
    rank = {p: i for i, p in enumerate(LAYERS)}
    upward = sorted(f"{m} -> {d}" for m, deps in import_graph().items() if m not in TOP for d in deps
                    if d not in TOP and rank.get(package_of(d), -1) > rank.get(package_of(m), len(LAYERS)))
    assert not upward, "imports that point up the layers (LAYERS):\n  " + "\n  ".join(upward)


def test_the_package_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for m, deps in import_graph().items():
        if m not in TOP:
            graph.setdefault(package_of(m), set()).update(package_of(d) for d in deps if d not in TOP)
    for p in graph:
        graph[p].discard(p)
    for p in {q for deps in graph.values() for q in deps} - set(graph):
        graph[p] = set()
    assert cycles(graph) == []


if __name__ == "__main__":
    g = import_graph()
    for comp in cycles(g):
        print("cycle:", " -> ".join(cycle_path(g, comp)), f"  (component: {', '.join(comp)})")
    for line in oversized():
        print(line)
    sys.exit(0)
