"""The accuracy benchmark scores rankings against expect.yaml (no timing is asserted anywhere)."""

from __future__ import annotations

import shutil
from pathlib import Path

from diagnose.bench import bench_accuracy, write_mixed_bundle

ROOT = Path(__file__).resolve().parent.parent / "fixtures"


def test_accuracy_counts_hits_misses_and_healthy(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "link/bad_cable/positive-symbol-errors-rising", tmp_path / "pos")
    shutil.copytree(ROOT / "healthy/h100-ib-2node-allreduce", tmp_path / "healthy")
    # a wrong expectation must be counted as a miss, not silently pass
    shutil.copytree(ROOT / "host/shm_too_small/positive-docker-default-shm", tmp_path / "wrong")
    (tmp_path / "wrong" / "expect.yaml").write_text("top: link.port_down\n")
    res = bench_accuracy(tmp_path)
    assert (res.bundles, res.positives, res.healthy) == (3, 2, 1)
    assert res.top1 == 1 and res.top3 == 1
    rows = {r.cause: r for r in res.rows}
    assert rows["link.bad_cable"].top1 == 1
    assert rows["link.port_down"].positives == 1 and rows["link.port_down"].top1 == 0
    assert rows["host.shm_too_small"].confirmed_elsewhere == 1  # confirmed where another cause was expected
    assert res.healthy_confirmed == []
    assert "top-1 50% (1/2)" in res.table()


def test_synthetic_log_bundle_has_the_requested_size(tmp_path: Path) -> None:
    written = write_mixed_bundle(tmp_path, mib=2, files=2)
    assert abs(written - 2 * 1024 * 1024) < 4096
    assert len(list(tmp_path.iterdir())) == 2
