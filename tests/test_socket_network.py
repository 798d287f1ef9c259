"""Sockets are a fallback only where there was an RDMA NIC to fall back from."""

from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import gather

LOG = ("vm-1:101707:101889 [0] NCCL INFO NET/IB : No device found.\n"
       "vm-1:101707:101889 [0] NCCL INFO NET/Socket : Using [0]ens4:10.128.0.5<0>\n"
       "vm-1:101707:101889 [0] NCCL INFO Using network Socket\n"
       "vm-1:101707:101889 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n")
IBSTAT = ("CA 'mlx5_0'\n\tCA type: MT4123\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Polling\n"
          "\t\tRate: 10\n\t\tLink layer: InfiniBand\n")


def _kinds(tmp_path: Path, symptom: str) -> set[str]:
    return {f.kind for f in gather([tmp_path], symptom).findings}


def test_sockets_with_no_rdma_nic_anywhere_are_the_clusters_network(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text(LOG)
    kinds = _kinds(tmp_path, "two cloud VMs fail at NCCL init")
    assert {"nccl_net_socket", "socket_only_network"} <= kinds


def test_an_hca_in_the_bundle_makes_sockets_a_fallback(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text(LOG)
    (tmp_path / "vm-1").mkdir()
    (tmp_path / "vm-1" / "ibstat.txt").write_text(IBSTAT)
    kinds = _kinds(tmp_path, "two nodes fail at NCCL init")
    assert "nccl_net_socket" in kinds and "socket_only_network" not in kinds


def test_a_report_naming_infiniband_or_a_container_makes_sockets_a_fallback(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text(LOG)
    assert "socket_only_network" not in _kinds(tmp_path, "two HDR InfiniBand nodes: all_reduce is slow")
    assert "socket_only_network" not in _kinds(tmp_path, "two nodes, each job in a Docker container, slow all_reduce")
