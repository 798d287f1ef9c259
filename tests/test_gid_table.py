"""The gid_table extractor on the real show_gids samples (tests/data/show_gids, see its README), each run as a user
would: the sample as the bundle, the settings and failures as the report states them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diagnose.models.diagnosis import Finding
from diagnose.pipeline import gather

DATA = Path(__file__).resolve().parent / "data" / "show_gids"
KINDS = ("gid_table_sparse", "gid_table_link_local_only", "gid_table_empty", "gid_index_differs",
         "gid_index_partial", "gid_auto_choice", "gid_table_ok", "gid_index_bad", "gid_index_ok")


def run(tmp_path: Path, *samples: str, symptom: str | None = None) -> dict[str, list[Finding]]:
    for s in samples:
        shutil.copy(DATA / s, tmp_path / s)
    ev = gather([tmp_path], symptom=symptom)
    out: dict[str, list[Finding]] = {}
    for f in ev.findings:
        if f.kind in KINDS:
            out.setdefault(f.kind, []).append(f)
    return out


def test_macvlan_pod_sparse_table_with_the_roce_version_read_failure(tmp_path: Path) -> None:
    got = run(tmp_path, "nccl1573_k8s_macvlan_pod_sparse_4-7_cut.txt",
              symptom="NCCL between two pods aborts: WARN NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid argument")
    (f,) = got["gid_table_sparse"]
    assert f.attrs == {"starts_above_zero": True, "holes": False, "first_index": 4, "tables": 3, "failure": True,
                       "exercised": True, "nccl_fixed_sparse": False, "nccl_version": None, "routable_v2": "7"}
    assert f.location.host == "test-macvlan-pod-2" and f.location.device is None
    assert "mlx5_2 4 (cut)" in f.summary
    assert [(e.file, e.line) for e in f.evidence][:3] == [
        ("nccl1573_k8s_macvlan_pod_sparse_4-7_cut.txt", 4), ("nccl1573_k8s_macvlan_pod_sparse_4-7_cut.txt", 8),
        ("nccl1573_k8s_macvlan_pod_sparse_4-7_cut.txt", 12)]
    assert any(e.file == "<symptom>" for e in f.evidence)
    # the cut device (mlx5_2 shows only its link-local index 4) is not read as link-local only
    assert "gid_table_link_local_only" not in got and "gid_table_ok" not in got


def test_pod_sparse_table_and_the_roce_version_setting(tmp_path: Path) -> None:
    got = run(tmp_path, "nccl1538_k8s_pod_sparse_4-7_cut.txt",
              symptom="NCCL 2.23.4 job in a pod hangs when NCCL_IB_ROCE_VERSION_NUM=2 is set.")
    (s,) = got["gid_table_sparse"]
    assert (s.attrs["failure"], s.attrs["exercised"], s.attrs["nccl_version"], s.attrs["tables"]) == (
        False, True, "2.23.4", 4)
    (a,) = got["gid_auto_choice"]
    # NCCL's own search ends on index 7 (v2, IPv4) in every whole table; the cut mlx5_3 (at 6, v1, so far) is not judged
    assert a.attrs == {"routable": True, "sparse": True, "tables": 3, "unroutable": 0,
                       "settings": "NCCL_IB_ROCE_VERSION_NUM=2"}
    assert "mlx5_0 7, mlx5_1 7, mlx5_2 7, mlx5_3 6 so far (cut)" in a.summary


def test_fixed_index_3_is_link_local_on_a_table_with_two_link_local_pairs(tmp_path: Path) -> None:
    got = run(tmp_path, "spectrumscale_pr4_cx6_show_gids_mlx5_0.txt",
              symptom="RoCE job fails with ibv_modify_qp failed with error Connection timed out; NCCL_IB_GID_INDEX=3")
    (bad,) = got["gid_index_bad"]
    assert bad.attrs == {"value": "3", "tables": 1, "from_table": True}
    assert "index 3 is link-local" in bad.summary
    assert "gid_index_ok" not in got
    ok = run(tmp_path, symptom="NCCL_IB_GID_INDEX=5 on RoCE")
    assert [f.attrs for f in ok["gid_index_ok"]] == [{"value": "5", "tables": 1, "from_table": True}]
    (t,) = ok["gid_table_ok"]
    assert t.attrs == {"index": 5, "tables": 1, "failure": False}


def test_index_3_fits_the_h100_tables(tmp_path: Path) -> None:
    got = run(tmp_path, "nccl_tests192_h100_indented_cut.txt", symptom="all_reduce_perf with NCCL_IB_GID_INDEX=3")
    assert [f.attrs for f in got["gid_index_ok"]] == [{"value": "3", "tables": 2, "from_table": True}]
    assert "gid_table_ok" not in got  # mlx5_1's table was cut: not every table was read whole
    assert "gid_table_sparse" not in got and "gid_index_differs" not in got


def test_two_pods_whose_routable_index_differs(tmp_path: Path) -> None:
    got = run(tmp_path, "var_two_pods_differing_index.txt", symptom="RoCE job between two pods, NCCL_IB_GID_INDEX=7")
    (d,) = got["gid_index_differs"]
    assert d.attrs == {"indices": "7,11", "across_hosts": True, "tables": 2, "pinned": True}
    (p,) = got["gid_index_partial"]
    assert p.attrs == {"value": "7", "fits": 1, "misses": 1}
    assert p.location.host == "test-macvlan-pod-2"
    assert "test-macvlan-pod-2: mlx5_0 (no entry at index 7)" in p.summary
    (s,) = got["gid_table_sparse"]
    assert (s.attrs["first_index"], s.attrs["tables"], s.attrs["routable_v2"]) == (4, 2, "7,11")
    assert "gid_index_bad" not in got and "gid_index_ok" not in got


def test_auto_selection_on_an_ipv4_only_table_asked_for_ipv6(tmp_path: Path) -> None:
    got = run(tmp_path, "var_two_pods_differing_index.txt", symptom="RoCE hang with NCCL_IB_ADDR_FAMILY=AF_INET6")
    (a,) = got["gid_auto_choice"]
    assert (a.attrs["routable"], a.attrs["sparse"], a.attrs["tables"], a.attrs["unroutable"]) == (False, True, 2, 2)
    # nothing of the wanted family: the search stays on the unconfigured index 0 of both pods
    assert "test-macvlan-pod-1: mlx5_0 0; test-macvlan-pod-2: mlx5_0 0" in a.summary


def test_auto_selection_on_a_cut_sparse_table(tmp_path: Path) -> None:
    got = run(tmp_path, "nccl_pr1587_k8s_pod_sparse_6-9.txt", symptom="NCCL 2.21.5 on RoCE in a pod")
    (a,) = got["gid_auto_choice"]
    assert (a.attrs["routable"], a.attrs["sparse"], a.attrs["tables"]) == (True, True, 1)
    assert "mlx5_0 7 so far (cut)" in a.summary
    # asked for IPv6, the cut table has no answer yet (its later entries are not shown): no verdict
    v6 = run(tmp_path, symptom="NCCL 2.21.5, NCCL_IB_ADDR_FAMILY=AF_INET6")
    assert "gid_auto_choice" not in v6


def test_ipv6_only_tables_and_the_default_ipv4_family(tmp_path: Path) -> None:
    got = run(tmp_path, "mooncake1617_mi355_ipv6_global_cut.txt", symptom="NCCL 2.27.3 on RoCE fails to connect")
    (a,) = got["gid_auto_choice"]
    assert (a.attrs["routable"], a.attrs["unroutable"], a.attrs["tables"]) == (False, 4, 4)
    v6 = run(tmp_path, symptom="NCCL 2.27.3 on RoCE, NCCL_IB_ADDR_FAMILY=AF_INET6")
    assert [f.attrs["routable"] for f in v6["gid_auto_choice"]] == [True]


def test_link_local_only_port_holes_and_an_infiniband_port(tmp_path: Path) -> None:
    got = run(tmp_path, "var_ib_port_no_ipv4_column_link_local_only_lexical.txt",
              symptom="ibv_modify_qp failed with error Connection timed out on RoCE")
    (ll,) = got["gid_table_link_local_only"]
    assert ll.attrs == {"tables": 1, "all_tables": False, "failure": True, "exercised": True}
    assert ll.location.device == "mlx5_2"
    (s,) = got["gid_table_sparse"]
    assert (s.attrs["starts_above_zero"], s.attrs["holes"], s.attrs["tables"]) == (False, True, 1)
    assert "mlx5_3 0,1,2,3,10,11" in s.summary
    assert all("mlx5_0" not in f.summary for fs in got.values() for f in fs)  # the InfiniBand port is no RoCE table


def test_empty_table_in_a_pod(tmp_path: Path) -> None:
    got = run(tmp_path, "k8s_rdma_sriov30_calico_pod_empty.txt")
    (e,) = got["gid_table_empty"]
    assert e.attrs == {"hosts": 1, "failure": False} and e.location.host == "rdma-test-wv8kj"
    assert set(got) == {"gid_table_empty"}


@pytest.mark.parametrize("sample", ["nccl_pr1587_k8s_pod_sparse_6-9.txt", "nccl551_rdma_shared_docker_index12_cut.txt"])
def test_container_tables_that_start_above_zero(tmp_path: Path, sample: str) -> None:
    got = run(tmp_path, sample)
    (s,) = got["gid_table_sparse"]
    assert s.attrs["starts_above_zero"] is True and s.attrs["exercised"] is False


def test_the_rule_weighs_the_table(tmp_path: Path) -> None:
    from diagnose.pipeline import triage

    for s in ("nccl1573_k8s_macvlan_pod_sparse_4-7_cut.txt",):
        shutil.copy(DATA / s, tmp_path / s)
    dx = triage([tmp_path], symptom="NCCL between two Kubernetes pods aborts at connection setup: NET/IB: read"
                " failed in ncclIbRoceGetVersionNum: Invalid argument")
    top = dx.causes[0]
    assert top.id == "roce.gid_index" and top.verdict == "confirmed"
    assert any(e.finding == "gid_table_sparse" for e in top.evidence)


def test_a_pinned_index_that_fits_every_table_does_not_exercise_the_sparse_table(tmp_path: Path) -> None:
    # NVIDIA/nccl#1538's fix: NCCL_IB_GID_INDEX=7, the v2 IPv4 entry of every (whole) table in the pod
    got = run(tmp_path, "nccl1538_k8s_pod_sparse_4-7_cut.txt", symptom="RoCE job in a pod with NCCL_IB_GID_INDEX=7")
    assert [f.attrs for f in got["gid_index_ok"]] == [{"value": "7", "tables": 3, "from_table": True}]
    (s,) = got["gid_table_sparse"]
    assert (s.attrs["exercised"], s.attrs["failure"]) == (False, False)
    assert "gid_auto_choice" not in got
    auto = run(tmp_path, symptom="RoCE job, NCCL 2.23.4, NCCL_IB_GID_INDEX=-1")
    assert "gid_index_ok" not in auto and [f.attrs["routable"] for f in auto["gid_auto_choice"]] == [True]


def test_a_link_local_gid_whose_packets_reached_the_peer_is_not_the_unroutable_kind(tmp_path) -> None:
    from diagnose.pipeline import gather

    line = ("srv-2:94639:94652 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 192.168.1.2<57888>"
            " with status={st} opcode=1 len=0 vendor err 249 (Recv) localGid fe80::e61d:2dff:fef2:9c94"
            " remoteGidsfe80::e61d:2dff:fef2:9fa0\n")
    (tmp_path / "nccl.log").write_text(line.format(st=5))
    ll = [f.attrs for f in gather([tmp_path], "RoCE job fails").findings if f.kind == "roce_link_local_gid"]
    assert [a["unreachable"] for a in ll] == [False]
    (tmp_path / "nccl.log").write_text(line.format(st=12))
    ll = [f.attrs for f in gather([tmp_path], "RoCE job fails").findings if f.kind == "roce_link_local_gid"]
    assert [a["unreachable"] for a in ll] == [True]
