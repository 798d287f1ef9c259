"""show_gids parser against tests/data/show_gids (see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.parsers import ibv_devinfo, show_gids, sysfs_ib
from diagnose.parsers._host import DevNetMap
from diagnose.parsers._ib import GidEntry
from diagnose.parsers.show_gids import GidTable

DATA = Path(__file__).resolve().parents[1] / "data"
HERE = DATA / "show_gids"


def read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def gids(res: object) -> list[tuple[str | None, str, int, int, str, str | None]]:
    return [(g.host, g.device, g.port, g.index, g.gid, g.gid_type)
            for g in res.records if isinstance(g, GidEntry)]  # type: ignore[attr-defined]


def tables(res: object) -> list[GidTable]:
    return [t for t in res.records if isinstance(t, GidTable)]  # type: ignore[attr-defined]


def test_sparse_pod_table_with_spaces() -> None:
    res = show_gids.parse(read("nccl_pr1587_k8s_pod_sparse_6-9.txt"), "g.txt", host="pod-7")
    assert res.format == "show_gids" and res.problems == []
    assert gids(res) == [
        ("pod-7", "mlx5_0", 1, 6, "0000:0000:0000:0000:0000:ffff:0b00:0401", "RoCE v1"),
        ("pod-7", "mlx5_0", 1, 7, "0000:0000:0000:0000:0000:ffff:0b00:0401", "RoCE v2"),
        ("pod-7", "mlx5_0", 1, 8, "fe80:0000:0000:0000:e4ea:71ff:feb9:4970", "RoCE v1"),
        ("pod-7", "mlx5_0", 1, 9, "fe80:0000:0000:0000:e4ea:71ff:feb9:4970", "RoCE v2"),
    ]
    first = next(r for r in res.records if isinstance(r, GidEntry))
    assert (first.source, first.line) == ("g.txt", 4)
    assert first.text.startswith("mlx5_0  1       6       0000:")
    assert [r for r in res.records if isinstance(r, DevNetMap)] == [
        DevNetMap(source="g.txt", line=4, text=first.text, host="pod-7", device="mlx5_0", port=1, netdev="net1",
                  up=None)]
    # `$ show_gids` names no host and the paste has no n_gids_found line: the last device may continue
    assert tables(res) == [GidTable(source="g.txt", line=2, text=tables(res)[0].text, host="pod-7",
                                    device_filter=None, rows=4, found=None, cut_device="mlx5_0", cut_port=1)]


def test_tab_separated_macvlan_pod_names_its_host() -> None:
    res = show_gids.parse(read("nccl1573_k8s_macvlan_pod_sparse_4-7_cut.txt"), "s", host="hint")
    assert res.problems == []
    got = gids(res)
    assert {h for h, *_ in got} == {"test-macvlan-pod-2"}
    assert [(d, i, t) for _, d, _, i, _, t in got] == [
        ("mlx5_0", 4, "RoCE v1"), ("mlx5_0", 5, "RoCE v2"), ("mlx5_0", 6, "RoCE v1"), ("mlx5_0", 7, "RoCE v2"),
        ("mlx5_1", 4, "RoCE v1"), ("mlx5_1", 5, "RoCE v2"), ("mlx5_1", 6, "RoCE v1"), ("mlx5_1", 7, "RoCE v2"),
        ("mlx5_2", 4, "RoCE v1"),
    ]
    (t,) = tables(res)
    assert (t.line, t.rows, t.found, t.cut_device, t.cut_port) == (2, 9, None, "mlx5_2", 1)
    assert sorted((m.device, m.netdev) for m in res.records if isinstance(m, DevNetMap)) == [
        ("mlx5_0", "net1"), ("mlx5_1", "net2"), ("mlx5_2", "net3")]


def test_complete_table_localhost_prompt_and_device_argument() -> None:
    res = show_gids.parse(read("spectrumscale_pr4_cx6_show_gids_mlx5_0.txt"), "s", host="node-a")
    assert res.problems == []
    assert [(i, g[-9:], t) for _, _, _, i, g, t in gids(res)] == [
        (0, "fe5d:4db8", "RoCE v1"), (1, "fe5d:4db8", "RoCE v2"), (2, "3f0b:c441", "RoCE v1"),
        (3, "3f0b:c441", "RoCE v2"), (4, "ac13:003c", "RoCE v1"), (5, "ac13:003c", "RoCE v2"),
    ]
    assert {h for h, *_ in gids(res)} == {"node-a"}  # `[root@localhost ~]#` names no host: the hint stays
    (t,) = tables(res)
    assert (t.device_filter, t.rows, t.found, t.cut_device) == ("mlx5_0", 6, 6, None)


def test_indented_paste_cut_inside_a_row() -> None:
    res = show_gids.parse(read("nccl_tests192_h100_indented_cut.txt"), "s")
    assert res.problems == ["line 12: GID row cut short ('mlx5_2  1       0       fe80:0000:0000:0000:a288:c2ff')"]
    assert [(h, d, i) for h, d, _, i, _, _ in gids(res)] == [
        ("loving-insect", d, i) for d in ("mlx5_0", "mlx5_1") for i in range(4)]
    (t,) = tables(res)
    assert (t.rows, t.found, t.cut_device) == (8, None, "mlx5_1")


def test_bond_devices_and_a_cut_row() -> None:
    res = show_gids.parse(read("ucx10420_roce_bond_client_cut.txt"), "s")
    assert res.problems == ["line 11: GID row cut short ('mlx5_bond_1     1       3')"]
    assert [(d, i) for _, d, _, i, _, _ in gids(res)][-3:] == [("mlx5_bond_1", 0), ("mlx5_bond_1", 1),
                                                               ("mlx5_bond_1", 2)]
    assert sorted({m.netdev for m in res.records if isinstance(m, DevNetMap)}) == ["bond0", "bond1"]


def test_ipv6_global_gids_without_ipv4() -> None:
    res = show_gids.parse(read("mooncake1617_mi355_ipv6_global_cut.txt"), "s")
    assert res.problems == []
    got = gids(res)
    assert got[1] == ("mi355-gpu-17", "rocep105s0", 1, 1, "fd93:16d3:59b6:010d:0690:81ff:fe39:e3e8", "RoCE v2")
    assert len(got) == 10 and tables(res)[0].cut_device == "rocep193s0f0"


def test_empty_table_is_a_table() -> None:
    res = show_gids.parse(read("k8s_rdma_sriov30_calico_pod_empty.txt"), "s")
    assert res.problems == [] and gids(res) == []
    (t,) = tables(res)
    assert (t.host, t.line, t.rows, t.found, t.cut_device) == ("rdma-test-wv8kj", 2, 0, 0, None)


def test_first_row_above_zero_and_cut() -> None:
    res = show_gids.parse(read("nccl551_rdma_shared_docker_index12_cut.txt"), "s")
    assert gids(res) == [("gpunodev1", "mlx5_bond_0", 1, 12, "0000:0000:0000:0000:0000:ffff:c0a8:bc16", "RoCE v1")]
    assert res.problems == ["line 5: GID row cut short ('mlx5_bond_0     1')"]


def test_two_pods_in_one_file() -> None:
    res = show_gids.parse(read("var_two_pods_differing_index.txt"), "s")
    assert res.problems == []
    assert [(t.host, t.device_filter, t.rows, t.found) for t in tables(res)] == [
        ("test-macvlan-pod-1", "mlx5_0", 4, 4), ("test-macvlan-pod-2", "mlx5_0", 4, 4)]
    assert [(h, i) for h, _, _, i, _, t in gids(res) if t == "RoCE v2"] == [
        ("test-macvlan-pod-1", 5), ("test-macvlan-pod-1", 7), ("test-macvlan-pod-2", 9), ("test-macvlan-pod-2", 11)]


def test_markdown_table_and_comment_markers() -> None:
    res = show_gids.parse(read("var_markdown_and_comment_marked.txt"), "s")
    assert res.problems == []
    assert [(d, i, t) for _, d, _, i, _, t in gids(res)] == [
        ("mlx5_0", 0, "RoCE v1"), ("mlx5_0", 1, "RoCE v2"), ("mlx5_0", 4, "RoCE v1"), ("mlx5_0", 5, "RoCE v2"),
        ("mlx5_1", 0, "RoCE v1"), ("mlx5_1", 1, "RoCE v2"),
    ]
    assert [(t.line, t.rows, t.found) for t in tables(res)] == [(1, 4, None), (8, 2, 2)]


def test_infiniband_port_header_without_ipv4_and_lexical_order() -> None:
    res = show_gids.parse(read("var_ib_port_no_ipv4_column_link_local_only_lexical.txt"), "s")
    assert res.problems == []
    got = gids(res)
    assert got[0] == (None, "mlx5_0", 1, 0, "fe80:0000:0000:0000:ec0d:9a03:00ca:2f4c", "IB")
    assert [i for _, d, _, i, _, _ in got if d == "mlx5_3"] == [0, 1, 10, 11, 2, 3]
    assert [(t.device_filter, t.rows, t.found) for t in tables(res)] == [("mlx5_0", 1, 1), ("mlx5_2", 2, 2),
                                                                          ("mlx5_3", 6, 6)]
    assert sorted({(m.device, m.netdev) for m in res.records if isinstance(m, DevNetMap)}) == [
        ("mlx5_2", "ens5np0"), ("mlx5_3", "ens6np0"), ("mlx5_3", "ens6np0.100")]


def test_count_mismatch_crlf_and_garbage() -> None:
    text = read("spectrumscale_pr4_cx6_show_gids_mlx5_0.txt").replace("n_gids_found=6", "n_gids_found=8")
    res = show_gids.parse(text.replace("\n", "\r\n"), "s")
    assert res.problems == ["line 2: n_gids_found=8 but 6 GID row(s) shown"]
    assert len(gids(res)) == 6
    assert show_gids.parse("\x00\x01 not a table\n|||\n", "s").records == []


@pytest.mark.parametrize("name", sorted(p.name for p in HERE.glob("*.txt")))
def test_sniff_claims_every_sample(name: str) -> None:
    assert show_gids.sniff(read(name)) >= 80


@pytest.mark.parametrize("fmt", ["ibv_devinfo", "sysfs_infiniband", "ibdev2netdev", "ibstat", "nccl_log"])
def test_sniff_leaves_other_formats(fmt: str) -> None:
    for f in sorted((DATA / fmt).glob("*")):
        if f.is_file() and f.name != "README.md":
            assert show_gids.sniff(f.read_text(encoding="utf-8", errors="replace")[:65536]) == 0, f.name


def test_other_gid_parsers_do_not_claim_show_gids() -> None:
    for name in sorted(p.name for p in HERE.glob("*.txt")):
        assert ibv_devinfo.sniff(read(name)) == 0 and sysfs_ib.sniff(read(name)) < 40, name
