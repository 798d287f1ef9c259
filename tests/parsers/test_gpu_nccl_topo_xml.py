"""NCCL topology / graph XML parser against the samples in tests/data/nccl_topo_xml (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import nccl_topo_xml
from diagnose.parsers._gpu import NcclTopoNode

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_topo_xml"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def nodes(text: str) -> list[NcclTopoNode]:
    return [r for r in nccl_topo_xml.parse(text, "x").records if isinstance(r, NcclTopoNode)]


def attr(n: NcclTopoNode, key: str) -> str | None:
    return dict(n.attrs).get(key)


def test_ncv4_full_dump() -> None:
    res = nccl_topo_xml.parse(read("nvidia_nccl_ncv4_topo.xml"), "topo.xml", host="vm1")
    assert res.format == "nccl_topo_xml" and res.problems == []
    ns = [r for r in res.records if isinstance(r, NcclTopoNode)]
    assert [n.kind for n in ns].count("cpu") == 4
    gpus = [n for n in ns if n.kind == "gpu"]
    assert [(attr(g, "dev"), attr(g, "rank"), attr(g, "sm"), g.parent_busid) for g in gpus] == [
        ("0", "0", "80", "0001:00:00.0"),
        ("1", "1", "80", "0002:00:00.0"),
        ("2", "2", "80", "0003:00:00.0"),
        ("3", "3", "80", "0004:00:00.0"),
    ]
    links = [n for n in ns if n.kind == "nvlink"]
    assert [(attr(n, "target"), attr(n, "count"), n.parent_busid, n.line) for n in links][:2] == [
        ("0002:00:00.0", "12", "0001:00:00.0", 5),
        ("0001:00:00.0", "12", "0002:00:00.0", 15),
    ]
    (net,) = [n for n in ns if n.kind == "net"]
    assert net.attrs == (
        ("dev", "0"), ("gdr", "0"), ("guid", "0x0"), ("latency", "0.000000"), ("maxconn", "65536"), ("name", "eth0"),
        ("port", "0"), ("speed", "100000"),
    )
    assert (net.parent_busid, net.line, net.host) == (None, 9, "vm1")  # the nic hangs off the cpu, not a pci
    assert net.text == '      <net name="eth0" dev="0" speed="100000" port="0" latency="0.000000" guid="0x0" maxconn="65536" gdr="0"/>'


def test_simai_dump_nics_under_pci_switches() -> None:
    ns = nodes(read("aliyun_simai_topo_2A100_1CX6.xml"))
    nets = [n for n in ns if n.kind == "net"]
    assert [(attr(n, "name"), attr(n, "speed"), attr(n, "gdr"), n.parent_busid) for n in nets] == [
        ("mlx5_bond_0", "200000", "1", "0000:06:00.0"),
        ("mlx5_bond_1", "200000", "1", "0000:1a:00.0"),
    ]
    gpus = [n for n in ns if n.kind == "gpu"]
    assert [(attr(g, "dev"), g.parent_busid) for g in gpus] == [("0", "0000:13:00.0"), ("1", "0000:19:00.0")]
    # the NVSwitch links: 6 per GPU, class 0x068000
    assert {attr(n, "tclass") for n in ns if n.kind == "nvlink"} == {"0x068000"}
    assert len([n for n in ns if n.kind == "nvlink"]) == 12
    pcis = {attr(n, "busid"): n.parent_busid for n in ns if n.kind == "pci"}
    assert pcis["0000:1a:00.0"] == "0000:15:00.0" and pcis["0000:0c:00.0"] is None


def test_hand_written_topo_files() -> None:
    for name, pairs in (("azure_azhpc-images_ndv4-topo.xml", 8), ("nvidia_nccl_ndv5_ndv5-topo-new.xml", 8)):
        ns = nodes(read(name))
        leaves = [n for n in ns if n.kind == "pci" and n.parent_busid is not None]
        assert len([n for n in leaves if attr(n, "class") == "0x030200"]) == pairs
        assert len([n for n in leaves if attr(n, "class") == "0x020700"]) == pairs
    ndv5 = nodes(read("azure_azhpc-images_ndv5-topo.xml"))
    first_gpu = [n for n in ndv5 if attr(n, "class") == "0x030200"][0]
    assert (attr(first_gpu, "busid"), first_gpu.parent_busid, attr(first_gpu, "link_speed")) == (
        "0001:00:00.0",
        "ffff:ff:01.0",
        "32.0 GT/s PCIe",
    )


def test_graph_file_channels_in_order() -> None:
    ns = nodes(read("nvidia_nccl_ncv4_graph.xml"))
    graphs = [n for n in ns if n.kind == "graph"]
    assert [(attr(g, "id"), attr(g, "pattern"), attr(g, "nchannels"), g.graph_id) for g in graphs] == [
        ("0", "4", "2", "0"),
        ("1", "1", "4", "1"),
        ("2", "3", "4", "2"),
    ]
    ring0 = [attr(n, "dev") for n in ns if n.kind == "gpu" and n.graph_id == "0" and n.channel == 1]
    assert ring0 == ["0", "3", "2", "1"]
    assert len([n for n in ns if n.kind == "gpu"]) == 2 * 4 + 4 * 4 + 4 * 4


def test_truncated_dump_keeps_what_was_read() -> None:
    text = read("aliyun_simai_topo_2A100_1CX6.xml")
    cut = "\n".join(text.split("\n")[:14])  # ends inside the first GPU's nvlink list
    res = nccl_topo_xml.parse(cut, "x")
    assert [n.kind for n in res.records if isinstance(n, NcclTopoNode)].count("nvlink") == 2
    assert len(res.problems) == 1 and res.problems[0].startswith("truncated: XML ends before </system>")


def test_doctype_and_entities_are_rejected_without_expansion() -> None:
    bomb = (
        '<?xml version="1.0"?>\n<!DOCTYPE system [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>\n'
        '<system version="1"><cpu numaid="&b;"/></system>\n'
    )
    res = nccl_topo_xml.parse(bomb, "x")
    assert res.records == [] and res.problems == ["rejected: DOCTYPE/ENTITY declarations are not allowed"]
    external = '<!DOCTYPE system SYSTEM "http://example.invalid/x.dtd">\n<system version="1"/>\n'
    res = nccl_topo_xml.parse(external, "x")
    assert res.records == [] and res.problems == ["rejected: DOCTYPE/ENTITY declarations are not allowed"]


def test_leading_prompt_crlf_and_trailing_text() -> None:
    text = read("nvidia_nccl_ncv4_topo.xml")
    plain = [(n.kind, n.line, n.attrs) for n in nodes(text)]
    wrapped = "$ cat /tmp/topo.xml\r\n" + text.replace("\n", "\r\n") + "[root@gpu-node-07 ~]# \r\n"
    res = nccl_topo_xml.parse(wrapped, "x")
    assert res.problems == []
    assert [(n.kind, n.line - 1, n.attrs) for n in res.records if isinstance(n, NcclTopoNode)] == plain
