"""The fabric model on a simulated 64-host rail-optimized fat tree, and the topology command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from diagnose.evidence.frames import build_frames
from diagnose.pipeline import gather
from diagnose.simulate import Fault, simulate
from diagnose.topology import build_fabric, link_gbps


@pytest.fixture(scope="module")
def degraded_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ft") / "b"
    simulate(out, hosts=64, faults=[Fault("degraded", "gpu-a004/mlx5_1", mode="2x"),
                                    Fault("port_down", "gpu-a006/mlx5_4")], seed=3)
    return out


def test_tiers_names_and_both_ends(degraded_bundle: Path) -> None:
    fab = build_fabric(build_frames(gather([degraded_bundle / "fabric"]).records))
    assert fab is not None
    s = fab.summary()
    # 64 hosts x 8 HCAs, one of them down and absent from the dump; 16 rail leaves; 8 spines
    assert s["nodes"] == {"hca": 511, "leaf": 16, "spine": 8}
    assert s["hosts"] == 64
    guid = fab.hca("gpu-a004", "mlx5_1")
    assert guid is not None and fab.tier(guid) == 0
    (leaf,) = fab.leaf_of(guid)
    assert fab.tier(leaf) == 1 and fab.name(leaf) == "leaf-a-r1"
    far = fab.peer(guid, 1)
    assert far is not None and fab.label(*far).startswith("leaf-a-r1/P")
    assert fab.peer(*far) == (guid, 1)  # a cable has two ends that name each other
    assert s["degraded_links"] == [f"gpu-a004/mlx5_1/P1 <-> {fab.label(*far)}"]
    assert nx.is_connected(fab.graph)


def test_link_rates() -> None:
    assert link_gbps("4X", "NDR") == 425.0
    assert link_gbps("2X", "NDR") == 212.5
    assert link_gbps("4X", "HDR") == 212.5
    assert link_gbps(None, "NDR") is None


@pytest.mark.slow
def test_topology_command_json_and_graphml(degraded_bundle: Path, tmp_path: Path) -> None:
    gml = tmp_path / "fabric.graphml"
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "topology", str(degraded_bundle / "fabric"),
                        "--format", "json", "--graphml", str(gml)], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["cables"] == 1023 and len(summary["degraded_links"]) == 1
    g = nx.read_graphml(gml)
    assert g.number_of_nodes() == 511 + 16 + 8


def test_topology_without_a_topology_source_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "x.log").write_text("gpu-a01:1:1 [0] NCCL INFO Using network IB\n" * 3)
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "topology", str(tmp_path)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "no topology source" in r.stderr
