"""The product's import graph: strict layers and no import circle.

Layers import downwards only: models <- inference <- validation <- reports. Every import
counts, at module level or inside a function (an import inside a function is still a
dependency; it only hides it from a reader). ``from package import submodule`` depends on
the submodule, not on the package's ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("models", "inference", "validation", "reports")


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for top in LAYERS:
        for p in (ROOT / top).rglob("*.py"):
            if "__pycache__" in p.parts:
                continue
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            mods["crowdrank." + ".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return mods


def _targets(mods, name: str, is_pkg: bool, node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = name.split(".") if is_pkg else name.split(".")[:-1]
        pkg = pkg[:len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([base] if base else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
    names = [a for a in node.names if f"{base}.{a.name}" not in mods]
    return subs + ([base] if names else [])


def import_graph() -> dict[str, set[str]]:
    """Module -> the product modules it imports (anywhere in its body)."""
    mods = _modules()
    graph = {m: set() for m in mods}
    for m, (path, is_pkg) in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[m].update(t for t in _targets(mods, m, is_pkg, node)
                                if t in mods and t != m)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_between_product_modules():
    assert circles(import_graph()) == []


def test_layers_import_downwards_only():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    up = sorted(f"{m} -> {t}" for m, ts in import_graph().items() for t in ts
                if rank[t.split(".")[1]] > rank[m.split(".")[1]])
    assert up == []


def test_the_checker_sees_a_planted_circle_and_a_function_level_import():
    graph = {"crowdrank.models.a": {"crowdrank.models.b"},
             "crowdrank.models.b": {"crowdrank.models.c"},
             "crowdrank.models.c": {"crowdrank.models.a"}, "crowdrank.models.d": set()}
    assert circles(graph) == [["crowdrank.models.a", "crowdrank.models.b",
                               "crowdrank.models.c"]]
    mods = {"crowdrank.models.x": None, "crowdrank.models.y": None}
    tree = ast.parse("def f():\n    from . import y\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert _targets(mods, "crowdrank.models.x", False, node) == ["crowdrank.models.y"]
