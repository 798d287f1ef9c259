"""The import graph of ``diagnose/``: no module imports another's private (``_name``) names, no import cycle, and the
stages never import the runtime (processes, forks and the collector are the executor's: ``diagnose.runtime``)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _tree(py: Path) -> ast.Module:
    """A module's syntax tree, parsed once for the tests here."""
    return ast.parse(py.read_text())


@functools.cache
def _graph_of(everywhere: bool) -> nx.DiGraph:
    return _graph(everywhere)


def _modules() -> dict[str, Path]:
    out = {}
    for py in sorted((ROOT / "diagnose").rglob("*.py")):
        parts = list(py.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = py
    return out


def test_no_module_imports_another_modules_private_names() -> None:
    mods = _modules()
    found = []
    for name, py in mods.items():
        for node in ast.walk(_tree(py)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("diagnose") and \
                    node.module != name:
                found += [f"{name}: from {node.module} import {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__") and
                          f"{node.module}.{a.name}" not in mods]  # (a private module is a module, not a name)
    assert found == []


def _graph(everywhere: bool = False) -> nx.DiGraph:
    """Module -> the modules it imports (``everywhere``: imports inside functions too, not only those that importing
    the module runs)."""
    mods = _modules()
    graph = nx.DiGraph()
    for name, py in mods.items():
        graph.add_node(name)
        tree = _tree(py)
        for node in (ast.walk(tree) if everywhere else tree.body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [node.module, *subs]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return graph


def test_the_module_level_import_graph_has_no_cycle() -> None:
    assert [sorted(c) for c in nx.simple_cycles(_graph_of(False))] == []


def test_the_stages_never_reach_the_runtime() -> None:
    """What a stage imports (at any depth, inside functions too) holds no process, fork or spill code: whichever
    executor calls a stage, the stage is the same."""
    graph = _graph_of(True)
    for stage in ("diagnose.stages.parse", "diagnose.stages.find"):
        reached = nx.descendants(graph, stage)
        assert not {m for m in reached if m.startswith("diagnose.runtime") or m == "diagnose.pipeline"}, stage


def test_the_pipeline_holds_no_process_pipe_fork_or_collector_code() -> None:
    tree = _tree(ROOT / "diagnose/pipeline.py")
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"gc", "multiprocessing", "threading", "signal", "mmap", "select", "concurrent", "atexit"}
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not {c for c in calls if c.startswith(("os.", "gc.", "_"))}, calls
