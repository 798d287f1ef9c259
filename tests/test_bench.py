"""The accuracy benchmark scores rankings against expect.yaml (no timing is asserted anywhere)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnose.bench import bench_accuracy, bench_sweep, exact_location, sweep_pairs, write_mixed_bundle
from diagnose.models.diagnosis import Location
from diagnose.simulate import compatible

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


# ------------------------------------------------------------------------------------------------ simulator sweep


def _cause(**loc: object) -> SimpleNamespace:
    return SimpleNamespace(location=Location(**loc))  # type: ignore[arg-type]


def test_exact_location_by_scope() -> None:
    cable = {"scope": "cable", "location": {"host": "gpu-a003", "device": "mlx5_2", "port": 1},
             "peer": {"switch": "leaf-a-r2", "port": 3, "guid": "0xfc6a1c0300000001"}}
    assert exact_location(cable, _cause(host="gpu-a003", device="mlx5_2", port=1))
    assert exact_location(cable, _cause(device="leaf-a-r2", port=3, peer="gpu-a003/mlx5_2/P1"))  # switch end
    assert not exact_location(cable, _cause(host="gpu-a003", device="mlx5_3", port=1))  # the wrong HCA
    ports = {"scope": "ports", "location": {"switch": "leaf-b-r0"},
             "ports": [{"switch": "leaf-b-r0", "port": 35, "guid": "0xfc6a1c0300000002"}]}
    assert exact_location(ports, _cause(device="leaf-b-r0", port=35))
    assert exact_location(ports, _cause(device="0xfc6a1c0300000002", port=35))  # named by GUID
    assert not exact_location(ports, _cause(device="leaf-b-r0", port=36))
    hca = {"scope": "hca", "location": {"host": "gpu-a001", "device": "mlx5_4", "pci": "0000:9b:00.0",
                                        "netdev": "enp155s0np0"}}
    assert exact_location(hca, _cause(host="gpu-a001", device="0000:9b:00.0"))
    assert exact_location(hca, _cause(host="gpu-a001", device="enp155s0np0"))
    assert not exact_location(hca, _cause(host="gpu-a001"))  # the host alone is not the HCA
    gpu = {"scope": "gpu", "location": {"host": "gpu-a002", "gpu": 3, "pci": "0000:5d:00.0", "rank": 11}}
    assert exact_location(gpu, _cause(host="gpu-a002", gpu="0000:5d:00"))
    assert exact_location(gpu, _cause(rank=11))
    assert not exact_location(gpu, _cause(host="gpu-a002", gpu="0000:18:00"))
    job = {"scope": "job", "location": {"job": True, "hosts": ["gpu-a001", "gpu-a002"]}}
    assert exact_location(job, _cause()) and exact_location(job, _cause(host="gpu-a002"))
    assert not exact_location(job, _cause(host="gpu-b007"))
    host = {"scope": "host", "location": {"host": "gpu-a004"}}
    assert exact_location(host, _cause(host="gpu-a004", device="0000:17:01.0"))
    assert not exact_location(host, _cause(host="gpu-a003"))


def test_sweep_pairs_are_distinct_compatible_and_seeded() -> None:
    causes = ["link.bad_cable", "roce.pfc_ecn", "host.gdr_unavailable", "nccl.socket_fallback", "gpu.xid_error"]
    pairs = sweep_pairs(causes, 2, seed=4)
    assert pairs == sweep_pairs(causes, 2, seed=4)
    assert len({frozenset(p) for p in pairs}) == len(pairs)
    assert all(compatible(a, b) for a, b in pairs)
    assert ("link.bad_cable", "roce.pfc_ecn") not in pairs and ("roce.pfc_ecn", "link.bad_cable") not in pairs
    assert {c for p in pairs for c in p} <= set(causes)


@pytest.mark.slow
def test_sweep_scores_singles_pairs_and_healthy(tmp_path: Path) -> None:
    res = bench_sweep(hosts=8, runs=1, pairs=True, seed=2, causes=["bad_cable", "host.gdr_unavailable"],
                      keep=tmp_path / "misses")
    rows = {r.cause: r for r in res.rows}
    assert set(rows) == {"link.bad_cable", "host.gdr_unavailable"}  # the alias is read as its cause id
    for r in rows.values():
        assert (r.runs, r.top1, r.top3, r.exact) == (1, 1, 1, 1), r
    assert (res.pair_runs, res.pair_hits) == (1, 1)
    assert res.healthy_runs == 1 and res.healthy_confirmed == []
    assert not (tmp_path / "misses").exists()  # nothing missed, nothing kept
    d = json.loads(res.to_json())
    assert d["single"] == {"runs": 2, "top1": 2, "top3": 2, "exact": 2}
    assert d["pairs"]["both_top3"] == 1
    table = str(res)
    assert "single faults                     2  100%  100%      100%" in table
    assert "pairs: both in the top 3 in 1/1 (100%)" in table


@pytest.mark.slow
def test_scale_bench_row_measures_a_real_triage(tmp_path) -> None:
    """One small size end to end: the bundle is simulated and triaged in child processes, and the row says so."""
    from diagnose.bench import bench_scale, scale_table

    (row,) = bench_scale((16,), seed=3, workdir=tmp_path)
    assert row.hosts == 16 and row.gpus == 128
    assert row.files > 16 * 2  # ibstat and dmesg of every host, the fabric files, the job log
    assert row.ports > 16 * 8  # HCA ports and the switch ports
    assert row.wall_s > row.floor_s > 0 and row.peak_mib > 50 and row.rss_bound_mib > 50
    assert row.top_cause == "link.bad_cable" and row.located
    assert "link.bad_cable (yes)" in scale_table([row])
    assert not any(tmp_path.iterdir())  # the bundles are removed


@pytest.mark.slow
def test_scale_bench_repeats_give_medians_and_keep_every_run(tmp_path) -> None:
    import statistics

    from diagnose.bench import bench_scale, scale_table

    (row,) = bench_scale((16,), seed=3, workdir=tmp_path, repeat=3)
    assert len(row.wall_runs) == len(row.floor_runs) == 3 and all(w > 0 for w in row.wall_runs)
    assert row.wall_s == statistics.median(row.wall_runs) and row.floor_s == statistics.median(row.floor_runs)
    assert "16 hosts, medians of 3 runs: triage" in scale_table([row])
