"""Every extractor declares what it reads and what it emits (``@extractor(reads=..., emits=...)``), and the
declarations hold: against the code (every finding kind named in an extractor or the module helpers and tables it
uses is declared by it), against what it does (run on the fixture bundles, each reads and emits only what it
declares), and against the vocabulary (every declared kind is a kind; every kind is emitted by something)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from diagnose.evidence import vocabulary
from diagnose.evidence.context import VIEW_READS, Context
from diagnose.evidence.extractors import DECLARED, FABRIC_LANE, all_extractors
from diagnose.evidence.frames import build_frames
from diagnose.models.records import Record
from diagnose.pipeline import gather
from diagnose.stages.find import EMITS as STAGE_EMITS
from tests.reads import Reads

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "diagnose/evidence/extractors"
FIXTURES = ROOT / "fixtures"
EXTRACTORS = all_extractors()


def named() -> dict[str, tuple[set[str], set[str]]]:
    """Extractor -> the kinds its code makes findings of (the string constants of a ``finding(...)`` call's first
    argument, in its body or the module's functions it calls, transitively: a kind chosen from a variable is found
    by the run over the fixtures instead) and the context's views it reads (``ctx.fabric``, ``ctx.counters``,
    ``ctx.messages``)."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for path in sorted(PKG.glob("*.py")):
        tree = ast.parse(path.read_text())
        defs: dict[str, ast.AST] = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                defs[node.name] = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Name):
                        defs[t.id] = node
        kinds = {n: {c.value for call in ast.walk(d) if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                     and call.func.id == "finding" and call.args
                     for c in ast.walk(call.args[0]) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
                 for n, d in defs.items()}
        views = {n: {x.attr for x in ast.walk(d) if isinstance(x, ast.Attribute) and x.attr in VIEW_READS and
                     isinstance(x.value, ast.Name) and x.value.id == "ctx"} for n, d in defs.items()}
        uses = {n: {x.id for x in ast.walk(d) if isinstance(x, ast.Name) and x.id in defs and x.id != n}
                for n, d in defs.items()}
        changed = True
        while changed:
            changed = False
            for n in defs:
                for u in uses[n]:
                    if not (kinds[u] <= kinds[n] and views[u] <= views[n]):
                        kinds[n] |= kinds[u]
                        views[n] |= views[u]
                        changed = True
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(ast.unparse(d).startswith("extractor")
                                                          for d in node.decorator_list):
                out[f"diagnose.evidence.extractors.{path.stem}.{node.name}"] = kinds[node.name], views[node.name]
    return out


def _record_tables() -> set[str]:
    def subclasses(c: type) -> set[type]:
        return {s for d in c.__subclasses__() for s in {d, *subclasses(d)}}

    from diagnose import parsers

    parsers.registry()
    return {c.__name__ for c in subclasses(Record)} | {"PortCounterWide"}  # (a column batch's table of its own)


def test_every_extractor_declares_and_its_declarations_are_of_the_vocabulary() -> None:
    assert {n for n, _ in EXTRACTORS} == set(DECLARED)
    tables = _record_tables()
    for name, d in DECLARED.items():
        assert d.kinds(), f"{name} declares no finding kind"
        assert d.kinds() <= set(vocabulary.KINDS), (name, d.kinds() - set(vocabulary.KINDS))
        assert d.reads <= tables, (name, d.reads - tables)
        if name in FABRIC_LANE:
            assert d.reads & {"PortCounter", "FabricLink", "FabricNode", "FabricPortState"}, name


def test_every_kind_an_extractor_names_and_every_view_it_reads_is_declared_by_it() -> None:
    found = named()
    assert set(found) == set(DECLARED)
    missing = {n: sorted(k - DECLARED[n].kinds()) for n, (k, _) in found.items() if k - DECLARED[n].kinds()}
    assert missing == {}
    unread = {n: sorted(frozenset().union(*(VIEW_READS[v] for v in vs)) - DECLARED[n].reads)
              for n, (_, vs) in found.items() if vs}
    assert {n: t for n, t in unread.items() if t} == {}
    # a fabric-lane extractor is one that reads the counter table or the fabric graph
    assert {n for n, (_, vs) in found.items() if vs & {"fabric", "counters"}} == FABRIC_LANE


@pytest.mark.parametrize("view", sorted(VIEW_READS))
def test_each_view_is_built_from_the_frames_declared_for_it(view: str) -> None:
    from diagnose.evidence.context import message_frame
    from diagnose.evidence.counters import build_counter_table
    from diagnose.topology import build_fabric

    build = {"fabric": build_fabric, "counters": build_counter_table, "messages": message_frame}[view]
    seen: set[str] = set()
    for frames in _view_frames():
        reads = Reads(frames)
        build(reads)
        seen |= reads.read
    assert seen == VIEW_READS[view]


@functools.lru_cache(maxsize=1)
def _view_frames() -> list[dict]:  # type: ignore[type-arg]
    """The frames of bundles with topologies, counters and NCCL logs (built once for the three views)."""
    return [build_frames(gather([b]).records)
            for bundle in ["link/bad_cable", "fabric/sm_problem", "nccl/socket_fallback", "healthy/fattree64-clean"]
            for b in sorted((FIXTURES / bundle).iterdir()) if (b / "expect.yaml").exists()]


def test_every_kind_of_the_vocabulary_is_emitted_by_something() -> None:
    emitted = set().union(*(d.kinds() for d in DECLARED.values())) | STAGE_EMITS
    assert set(vocabulary.KINDS) - emitted == set()


def _bundles() -> list[object]:
    """Every bundle; in the default run the first constructed bundle of each domain (the rest, and the field corpus,
    in the slow run)."""
    out: list[object] = []
    seen: set[str] = set()
    for b in sorted(p.parent for p in FIXTURES.rglob("expect.yaml")):
        rel = b.relative_to(FIXTURES).parts
        first = rel[0] != "field" and rel[0] not in seen
        seen.add(rel[0])
        out.append(b if first else pytest.param(b, marks=pytest.mark.slow))
    return out


@pytest.mark.parametrize("bundle", _bundles(), ids=lambda p: str(p.relative_to(FIXTURES)))  # type: ignore[attr-defined]
def test_each_extractor_reads_and_emits_only_what_it_declares(bundle: Path) -> None:
    """Each on a context of its own (the counter table, the fabric graph and the message frame are built from the
    frames it may read, so their inputs count as its reads)."""
    ev = gather([bundle])
    frames = build_frames(ev.records)
    wrong = []
    for name, fn in EXTRACTORS:
        reads = Reads(frames)
        found = fn(Context(frames=reads, formats=ev.formats))  # type: ignore[arg-type]
        d = DECLARED[name]
        if reads.read - d.reads:
            wrong.append((name, "reads", sorted(reads.read - d.reads)))
        if {f.kind for f in found} - d.kinds():
            wrong.append((name, "emits", sorted({f.kind for f in found} - d.kinds())))
    assert wrong == []
