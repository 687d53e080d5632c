"""The packages form a layered import graph: no module imports itself back through others, and
``hdl`` (the RTL) never imports the simulation or the compiler.

Every module under the first-party packages is parsed (not imported) and its imports, including
those inside functions, are resolved to first-party modules.
"""

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("arch", "hdl", "models", "sim", "compiler", "bench")


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for pkg in PACKAGES if (ROOT / pkg).is_dir()
            for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(name, path, known):
    """First-party modules ``name`` imports (``from pkg import mod`` resolves to ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


@cache
def _graph():
    """``{module: modules it imports}`` (parsed once per test process; read only)."""
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_graph_is_not_empty():
    graph = _graph()
    assert "models.memoryx.store" in graph["models.memoryx"]
    assert "models.memoryx.checkpoint" in graph["models.memoryx.store"]


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_detector_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("lower, upper", [("hdl", "sim"), ("hdl", "compiler"), ("hdl", "bench"),
                                          ("models", "sim"), ("models", "compiler"), ("models", "bench"),
                                          ("arch", "hdl"), ("arch", "models"), ("arch", "sim")])
def test_layering(lower, upper):
    bad = sorted(f"{m} -> {t}" for m, ts in _graph().items() if m.split(".")[0] == lower
                 for t in ts if t.split(".")[0] == upper)
    assert not bad, f"{lower} must not import {upper}: {bad}"
