"""The fabric extractors in a forked second process: same findings as one process, nothing lost when it fails."""

from __future__ import annotations

import ast
import os
from dataclasses import replace
from pathlib import Path

import pytest

from diagnose import pipeline
from diagnose.evidence import extractors
from diagnose.evidence.context import Context
from diagnose.evidence.extractors import FABRIC_LANE, FABRIC_TABLES, all_extractors, fabric_lane_reads
from diagnose.evidence.frames import build_frames
from diagnose.runtime import ParallelExecutor, SerialExecutor, Stages
from diagnose.stages.find import merged, run_extractors, run_some
from tests.reads import Reads

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# bundles with counters and a topology (the lane's inputs), one with findings of both lanes' extractors
BUNDLES = ["link/bad_cable", "fabric/congestion", "fabric/sm_problem", "fabric/route_imbalance", "link/flapping",
           "healthy/fattree64-clean"]
LANE = ParallelExecutor(lane_min_rows=1)  # the fabric extractors in a forked child wherever it may fork
FORK = ParallelExecutor(lane_min_rows=1, fork=True)  # forks all the same (idle threads other tests left would stop it)

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="no fork or one core")


def _dump(ev: pipeline.Evidence) -> list[str]:
    return [f.model_dump_json() for f in ev.findings]


def _reads_fabric() -> dict[str, bool]:
    """Every registered extractor -> whether it (or a helper of its module it calls) reads ctx.counters/ctx.fabric."""
    out: dict[str, bool] = {}
    pkg = Path(extractors.__file__).parent
    for path in sorted(pkg.glob("*.py")):
        tree = ast.parse(path.read_text())
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        reads = {name: any(isinstance(x, ast.Attribute) and x.attr in ("counters", "fabric")
                           and isinstance(x.value, ast.Name) and x.value.id == "ctx" for x in ast.walk(fn))
                 for name, fn in funcs.items()}
        changed = True
        while changed:  # through the module's own helpers
            changed = False
            for name, fn in funcs.items():
                calls = {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
                if not reads[name] and any(reads.get(c) for c in calls):
                    reads[name] = changed = True
        for name, fn in funcs.items():
            if fn.decorator_list and ast.unparse(fn.decorator_list[0]).startswith("extractor"):
                out[f"diagnose.evidence.extractors.{path.stem}.{name}"] = reads[name]
    return out


def test_the_lane_holds_exactly_the_extractors_that_read_the_counter_table_or_the_fabric() -> None:
    reads = _reads_fabric()
    assert set(reads) == {n for n, _ in all_extractors()}
    assert {n for n, r in reads.items() if r} == FABRIC_LANE  # one left out builds the table twice
    assert len(FABRIC_LANE) >= 5


@needs_fork
@pytest.mark.parametrize("bundle", BUNDLES)
def test_forked_lane_gives_the_same_findings_byte_for_byte(bundle: str) -> None:
    serial = pipeline.gather([FIXTURES / bundle], executor=SerialExecutor())
    forked = pipeline.gather([FIXTURES / bundle], executor=FORK)
    assert serial.findings, bundle
    assert _dump(forked) == _dump(serial)
    assert forked.second_core_peak_mib > 0  # the lane did run in a child
    assert serial.second_core_peak_mib == 0


def _context(bundle: str) -> Context:
    ev = pipeline.gather([FIXTURES / bundle])
    return Context(frames=build_frames(ev.records), formats=ev.formats)


@pytest.mark.slow
@needs_fork
def test_a_child_that_dies_costs_time_not_findings() -> None:
    want = [f.model_dump_json() for f in run_extractors(_context("link/bad_cable"))]
    parent = os.getpid()
    name, fn = next((n, f) for n, f in all_extractors() if n in FABRIC_LANE)

    def dies_in_the_child(ctx: Context) -> list:
        if os.getpid() != parent:
            os._exit(3)
        return fn(ctx)

    dying = Stages(extractors=lambda: [(n, dies_in_the_child if n == name else f) for n, f in all_extractors()])
    got, mib = replace(FORK, stages=dying).run_extractors(_context("link/bad_cable"))
    assert [f.model_dump_json() for f in got] == want
    assert mib == 0.0  # what the child did was thrown away and run here


@needs_fork
def test_an_extractor_that_fails_in_the_child_is_reported_as_in_one_process() -> None:
    name = sorted(FABRIC_LANE)[0]

    def broken(ctx: Context) -> list:
        raise ValueError("bad frame")

    failing = Stages(extractors=lambda: [(n, broken if n == name else f) for n, f in all_extractors()])
    forked, mib = replace(FORK, stages=failing).run_extractors(_context("fabric/congestion"))
    serial = merged(failing.extractors(), run_some(_context("fabric/congestion"), failing.extractors()))
    assert mib > 0
    assert [f.model_dump_json() for f in forked] == [f.model_dump_json() for f in serial]
    failed = [f for f in forked if f.kind == "extractor_failed"]
    assert [f.attrs["extractor"] for f in failed] == [name]
    assert "ValueError: bad frame" in failed[0].summary


@pytest.mark.slow
def test_no_fork_from_a_worker_thread() -> None:
    import threading

    got: list[float] = []
    t = threading.Thread(target=lambda: got.append(LANE.run_extractors(_context("link/bad_cable"))[1]))
    t.start()
    t.join()
    assert got == [0.0]  # a service worker runs every extractor itself


READ_BUNDLES = [*BUNDLES, "fabric/pkey_mismatch", "fabric/adaptive_routing_off", "link/port_down", "link/degraded",
                "roce/pfc_ecn", "nccl/version_mismatch", "gpu/xid_error", "host/gdr_unavailable"]


@pytest.mark.parametrize("bundle", READ_BUNDLES)
def test_the_lanes_read_only_the_tables_declared_for_them(bundle: str) -> None:
    """A process that runs the fabric extractors apart gets FABRIC_TABLES and fabric_lane_reads() only; the other
    extractors never see FABRIC_TABLES. A table read but not declared would be missing there without a sound."""
    ev = pipeline.gather([FIXTURES / bundle])
    frames = build_frames(ev.records)
    for lane in (True, False):
        reads = Reads(frames)
        ctx = Context(frames=reads, formats=ev.formats)
        for name, fn in all_extractors():
            if (name in FABRIC_LANE) == lane:
                fn(ctx)
        if lane:
            assert reads.read <= FABRIC_TABLES | fabric_lane_reads(), reads.read - FABRIC_TABLES - fabric_lane_reads()
        else:
            assert not reads.read & FABRIC_TABLES


@pytest.mark.slow
@needs_fork
def test_no_room_for_the_lane_result_runs_the_extractors_here(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    want = [f.model_dump_json() for f in run_extractors(_context("link/bad_cable"))]

    def no_room(*a: object, **k: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", no_room)
    got, mib = FORK.run_extractors(_context("link/bad_cable"))
    assert [f.model_dump_json() for f in got] == want
    assert mib == 0.0
