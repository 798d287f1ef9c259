"""The executor contract: the parallel executor's diagnosis is the serial one's, byte for byte, on every fixture
bundle, every field case and a simulated 1,024-host fabric. The parallel executor is pushed to use its second
process wherever it can (every large file offered to it, the fabric extractors forked from the first row), and the
files are counted as large from 16 KiB, so that the fixtures' dumps and topologies do cross between processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from diagnose.bundle import LoadLimits
from diagnose.engine import infer
from diagnose.pipeline import gather
from diagnose.render import render_json
from diagnose.runtime import ParallelExecutor, SerialExecutor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LIMITS = LoadLimits(stream_bytes=16 * 1024, chunk_bytes=4096)
# every bulk file to the second process, small files handed in batches of 8, the fabric lane from one row; it forks
# even though idle threads other tests leave would stop it (a service's threads are tests/test_small_files.py's)
PARALLEL = ParallelExecutor(min_bytes=1, lane_min_rows=1, hand_over=8, fork=True)

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="no fork or one core")


def _bundles() -> list[Path]:
    return sorted(p.parent for p in FIXTURES.rglob("expect.yaml"))


def _large(bundle: Path) -> bool:
    """A bundle with a file the second process takes at these limits (a counter dump or topology past 16 KiB)."""
    return any(f.stat().st_size > LIMITS.stream_bytes for f in bundle.rglob("*") if f.is_file())


def _sampled(bundles: list[Path]) -> list[Any]:
    """Every bundle; in the default run every third field case and, of each domain's constructed bundles, the first
    with a large file; the others are marked slow (CI runs them: the contract holds on all)."""
    seen: set[str] = set()
    out = []
    for k, b in enumerate(bundles):
        rel = b.relative_to(FIXTURES).parts
        first = rel[0] != "field" and _large(b) and rel[0] not in seen
        if first:
            seen.add(rel[0])
        out.append(b if (rel[0] == "field" and k % 3 == 0) or first else pytest.param(b, marks=pytest.mark.slow))
    return out


def _symptom(bundle: Path) -> str | None:
    import yaml

    return (yaml.safe_load((bundle / "expect.yaml").read_text()) or {}).get("symptom")


def _diagnosis(paths: list[Path], symptom: str | None, catalog, limits: LoadLimits, executor) -> tuple[str, float]:  # type: ignore[no-untyped-def]
    """The diagnosis's JSON as triage makes it (the catalog's thresholds), and the MiB a second process added."""
    ev = gather(paths, symptom, limits=limits, keep_records=False, executor=executor)
    return render_json(infer(catalog, ev.findings, ev.symptoms, ev.formats, ev.files, {}, {})), ev.second_core_peak_mib


def _both(paths: list[Path], symptom: str | None, catalog, limits: LoadLimits = LIMITS) -> tuple[str, str, float]:  # type: ignore[no-untyped-def]
    serial, none = _diagnosis(paths, symptom, catalog, limits, SerialExecutor())
    assert none == 0
    parallel, mib = _diagnosis(paths, symptom, catalog, limits, PARALLEL)
    return serial, parallel, mib


@needs_fork
@pytest.mark.parametrize("bundle", _sampled(_bundles()), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_parallel_equals_serial_byte_for_byte(bundle: Path, catalog) -> None:  # type: ignore[no-untyped-def]
    serial, parallel, _ = _both([bundle], _symptom(bundle), catalog)
    assert parallel == serial


def test_the_contract_covers_the_field_corpus_and_bundles_with_a_second_process() -> None:
    bundles = _bundles()
    assert sum(p.relative_to(FIXTURES).parts[0] == "field" for p in bundles) >= 100
    assert sum(p.relative_to(FIXTURES).parts[0] != "field" for p in bundles) >= 80
    assert sum(map(_large, bundles)) >= 20  # bundles with files the second process takes at these limits


@pytest.mark.slow
@needs_fork
def test_parallel_equals_serial_on_a_1024_host_fabric(tmp_path: Path, catalog) -> None:  # type: ignore[no-untyped-def]
    from diagnose.simulate import simulate

    out = simulate(tmp_path / "fabric", hosts=1024, faults=["link.bad_cable"], seed=7)
    serial, parallel, mib = _both([out], "AllReduce slow on 1024 nodes", catalog, LoadLimits())
    assert parallel == serial
    assert mib > 0  # the dumps and the fabric extractors were the child's
    assert '"link.bad_cable"' in serial
