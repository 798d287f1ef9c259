"""Sockets are a fallback only where there was an RDMA NIC to fall back from."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_a_bare_nccl_info_line_pasted_without_its_prefix_is_read(tmp_path) -> None:
    # verbatim from areal-project/AReaL#639 (fixtures/field/350-*): the host:pid:tid [rank] prefix was not pasted
    from diagnose.pipeline import gather, triage

    (tmp_path / "nccl.log").write_text("NCCL INFO NET/Socket : Using [0]bond0:200.8.184.2<0>\n")
    ev = gather([tmp_path], "cross-node allreduce on a RoCE cluster is 4-5x slower than expected")
    assert [f.format for f in ev.files] == ["nccl_log"]
    d = triage([tmp_path], "cross-node allreduce on a RoCE cluster is 4-5x slower than expected")
    assert d.causes[0].id == "nccl.socket_fallback"
    # a sentence that starts with the words is not a log line
    (tmp_path / "nccl.log").write_text("I looked for NCCL INFO lines but there are none in the output we have.\n")
    assert [f.format for f in gather([tmp_path], "").files] != ["nccl_log"]


@pytest.mark.parametrize(("value", "defects"), [
    ("'^=mlx5_8,^=mlx5_14'", 1), ("^=mlx5_8,mlx5_14", 0), ("=mlx5_0:1,mlx5_1:1", 0), ("mlx5_0, mlx5_1", 1),
    ("^docker,lo", 0), ("eth0,,eth1", 1)])
def test_a_device_list_is_read_the_way_nccl_reads_it(tmp_path, value: str, defects: int) -> None:
    # the first value verbatim from NVIDIA/nccl-tests#150 (fixtures/field/352-*): '^=' repeated on the second entry
    from diagnose.pipeline import gather

    name = "NCCL_SOCKET_IFNAME" if "docker" in value or "eth" in value else "NCCL_IB_HCA"
    (tmp_path / "cmd.txt").write_text(f"NCCL_DEBUG=INFO {name}={value} srun --mpi=pmix all_reduce_perf -g 1\n")
    got = [f.attrs for f in gather([tmp_path], "fails on 2 nodes").findings if f.kind == "nccl_device_list_malformed"]
    assert [a["defects"] for a in got] == ([defects] if defects else [])
