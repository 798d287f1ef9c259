"""The import graph of ``diagnose/``: no module imports another's private (``_name``) names, and no import cycle but
the runtime's two, named below so that a new one fails here and so does their removal (the runtime split of the
one-readable-path issue takes them out: then the list goes)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
# pipeline calls the parallel parse (forked, pooled), which calls the pipeline's stages back: one seam to cut
KNOWN_CYCLES = {frozenset({"diagnose.pipeline", "diagnose.forked"}), frozenset({"diagnose.pipeline", "diagnose.pooled"})}


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
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("diagnose") and \
                    node.module != name:
                found += [f"{name}: from {node.module} import {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__") and
                          f"{node.module}.{a.name}" not in mods]  # (a private module is a module, not a name)
    assert found == []


def test_the_module_level_import_graph_has_no_cycle_but_the_runtimes() -> None:
    mods = _modules()
    graph = nx.DiGraph()
    for name, py in mods.items():
        graph.add_node(name)
        for node in ast.parse(py.read_text()).body:  # what importing the module runs (not imports inside functions)
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [node.module, *subs]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in mods and t != name)
    cycles = {frozenset(c) for c in nx.simple_cycles(graph)}
    assert cycles == KNOWN_CYCLES
