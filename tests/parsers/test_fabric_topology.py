"""iblinkinfo / ibnetdiscover / ibqueryerrors against the samples in tests/data (see each folder's README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import iblinkinfo, ibnetdiscover, ibqueryerrors
from diagnose.parsers._fabric import FabricLink, FabricNode, FabricPortState, ToolMessage
from diagnose.parsers._ib import ToolError
from diagnose.parsers.perfquery import PortCounter

DATA = Path(__file__).resolve().parents[1] / "data"


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_bytes().decode("utf-8")


def of(res, cls):
    return [r for r in res.records if isinstance(r, cls)]


# ----------------------------------------------------------------------------------------------- iblinkinfo

EDR = "824380210_Linpack_edr76_linpack_WI_md_lines31-54_edr_sb7700.txt"


def test_iblinkinfo_edr_sb7700_blocks() -> None:
    res = iblinkinfo.parse(read("iblinkinfo", EDR), "iblinkinfo.txt")
    assert res.format == "iblinkinfo"
    nodes = of(res, FabricNode)
    assert [(n.line, n.node_type, n.guid, n.description, n.lid) for n in nodes] == [
        (2, "CA", "0xec0d9a03003d62be", "n02 HCA-1", 4),
        (4, "CA", "0x248a070300928186", "mgt mlx5_0", 3),
        (6, "SW", "0x506b4b0300820910", "MF0;SB7700:MSB7700/U1", 2),
    ]
    assert all(n.host == "n01" for n in nodes)  # from the `[root@n01 HPL]# iblinkinfo` prompt
    links = of(res, FabricLink)
    assert [(lk.line, lk.guid, lk.port, lk.peer_guid, lk.peer_port) for lk in links] == [
        (3, "0xec0d9a03003d62be", 1, "0x506b4b0300820910", 17),
        (5, "0x248a070300928186", 1, "0x506b4b0300820910", 36),
        (23, "0x506b4b0300820910", 17, "0xec0d9a03003d62be", 1),
    ]
    first = links[0]
    assert (first.width, first.speed, first.state, first.phys_state, first.lid, first.peer_lid) == (
        "4X",
        "EDR",
        "Active",
        "LinkUp",
        4,
        2,
    )
    assert (first.description, first.peer_description) == ("n02 HCA-1", "MF0;SB7700:MSB7700/U1")
    down = [p for p in of(res, FabricPortState) if p.state == "Down"]
    assert [p.port for p in down] == list(range(1, 17))
    assert {(p.phys_state, p.width, p.speed, p.lid, p.guid) for p in down} == {
        ("Polling", None, None, 2, "0x506b4b0300820910")
    }
    # switch port 18 goes to "n01 HCA-1" (LID 1), whose CA block is missing from the original output
    (p18,) = [p for p in of(res, FabricPortState) if p.port == 18]
    assert (p18.line, p18.state, p18.speed) == (24, "Active", "EDR")
    assert res.problems == ["line 24: peer LID 1 of 0x506b4b0300820910 port 18 is not in this output; kept as a port state"]


def test_iblinkinfo_legoos_qdr_partial() -> None:
    res = iblinkinfo.parse(read("iblinkinfo", "legoos_README_iblinkinfo_snippet.txt"), "s")
    assert [(n.description, n.guid, n.lid) for n in of(res, FabricNode)] == [
        ("wuklab00 mlx4_0", "0xe41d2d0300309251", 8),
        ("wuklab01 mlx4_0", "0xe41d2d0300309301", 27),
        ("wuklab02 mlx4_0", "0xe41d2d03003092d1", 24),
    ]
    # the switch (LID 22) is not in the snippet: no GUID for the peer, the ports are kept as states
    assert of(res, FabricLink) == []
    states = [(p.line, p.port, p.speed, p.width, p.state, p.lid) for p in of(res, FabricPortState)]
    assert states == [
        (4, 1, "QDR", "4X", "Active", 8),
        (6, 1, "QDR", "4X", "Active", 27),
        (8, 1, "QDR", "4X", "Active", 24),
    ]
    assert len(res.problems) == 3 and all("peer LID 22" in p for p in res.problems)


def test_iblinkinfo_line_mode_could_be() -> None:
    res = iblinkinfo.parse(read("iblinkinfo", "var_line_mode_could_be_hdr.txt"), "s")
    assert res.problems == [] and of(res, FabricNode) == []
    links = {lk.port: lk for lk in of(res, FabricLink)}
    assert sorted(links) == [1, 2, 3, 7, 41]
    assert (links[1].guid, links[1].peer_guid, links[1].speed, links[1].description) == (
        "0x0c42a103008982a4",
        "0x043f720300f744e2",
        "HDR",
        "Quantum Mellanox Technologies",
    )
    assert (links[2].speed, links[3].width, links[7].state, links[7].speed) == ("EDR", "1X", "Init", "QDR")
    hints = {p.port: p.could_be for p in of(res, FabricPortState) if p.could_be}
    assert hints == {2: "Could be 53.125 Gbps", 3: "Could be 4X"}
    downs = {p.port: p.phys_state for p in of(res, FabricPortState) if p.state == "Down"}
    assert downs == {5: "Polling", 6: "Disabled"}
    assert {r.host for r in res.records} == {"mgmt01"}


def test_iblinkinfo_crlf_truncated() -> None:
    res = iblinkinfo.parse(read("iblinkinfo", "var_crlf_truncated_edr_sb7700.txt"), "s")
    assert len(of(res, FabricLink)) == 3 and len(of(res, FabricNode)) == 3
    assert res.problems == [
        "truncated: last line 24: unparseable port line '2   18[  ] ==( 4X      25.78125 Gbps Active/  Lin'"
    ]
    # the peer LID 4 of switch port 17 resolves through n02's block
    assert [lk.peer_guid for lk in of(res, FabricLink) if lk.port == 17] == ["0xec0d9a03003d62be"]


# ----------------------------------------------------------------------------------------------- ibnetdiscover


def test_ibnetdiscover_ports_report() -> None:
    res = ibnetdiscover.parse(read("ibnetdiscover", "ibnetdiscover_ports_test.out"), "p.out")
    assert res.format == "ibnetdiscover" and res.problems == []
    links = of(res, FabricLink)
    assert len(links) == 7
    ca = links[0]
    assert (ca.guid, ca.port, ca.lid, ca.peer_guid, ca.peer_port, ca.peer_lid) == (
        "0x7cfe9003003b4bde",
        1,
        134,
        "0x7cfe9003009ce5b0",
        10,
        1719,
    )
    assert (ca.width, ca.speed, ca.state, ca.description, ca.peer_description) == (
        "4X",
        "EDR",
        None,
        "o0001 HCA-1",
        "ib-i1l1s01",
    )
    # both directions of the o0001 cable are listed
    assert any(lk.guid == "0x7cfe9003009ce5b0" and lk.port == 10 and lk.peer_guid == ca.guid for lk in links)
    alone = of(res, FabricPortState)
    assert [(p.line, p.guid, p.port, p.lid, p.width, p.speed, p.description) for p in alone] == [
        (8, "0x506b4b03005c2740", 37, 2052, "4X", None, "ib-i4l1s01"),
        (9, "0x08c0eb0300add20e", 80, 1781, "4X", "SDR", "ib-i7l2s01"),
    ]


def test_ibnetdiscover_ports_report_odd_quoting() -> None:
    res2 = ibnetdiscover.parse(read("ibnetdiscover", "ibnetdiscover_ports_test2.out"), "s")
    assert res2.problems == []
    links = of(res2, FabricLink)
    assert [(lk.line, lk.description, lk.peer_description, lk.speed) for lk in links] == [
        (1, "Mellanox Technologies Aggregation Node", "5FB0405-leaf-IB01", "HDR"),
        (2, "worker20 mlx5_3", "5FB0405-leaf-IB01", "HDR"),
        (5, "5FB0406-spine-IB03", "Mellanox Technologies Aggregation Node", "HDR"),
    ]
    states = of(res2, FabricPortState)
    assert [(p.line, p.description, p.speed) for p in states] == [
        (3, "5FB0406-spine-IB01", "SDR"),
        (4, "5FB0406-spine-IB02", "SDR"),
        (6, "Infiniscale-IV Mellanox Technologies", "QDR"),
    ]
    res3 = ibnetdiscover.parse(read("ibnetdiscover", "ibnetdiscover_ports_test3.out"), "s")
    (p,) = res3.records
    assert isinstance(p, FabricPortState)
    assert (p.guid, p.port, p.lid, p.description) == (
        "0x0002c9020040f161",
        22,
        479,
        "Infiniscale-IV Mellanox Technologies",
    )


def test_ibnetdiscover_topology_file_manpage() -> None:
    res = ibnetdiscover.parse(read("ibnetdiscover", "topology_file_example_manpage.txt"), "topo")
    assert res.problems == []
    nodes = {n.guid: n for n in of(res, FabricNode)}
    assert len(nodes) == 6
    sw = nodes["0x005442ba00003080"]
    assert (sw.node_type, sw.description, sw.ports, sw.lid, sw.line) == ("SW", "ISR9024 Voltaire", 24, 6, 13)
    ca = nodes["0x0008f10403960984"]
    assert (ca.node_type, ca.ports, ca.lid) == ("CA", 2, 16)
    links = of(res, FabricLink)
    assert len(links) == 14
    lk = next(x for x in links if x.guid == "0x005442ba00003080" and x.port == 22)
    assert (lk.peer_guid, lk.peer_port, lk.peer_lid, lk.width, lk.speed, lk.peer_description) == (
        "0x0008f10403961354",
        1,
        4,
        "4X",
        "SDR",
        "MT23108 InfiniHost Mellanox Technologies",
    )
    # 1x link between the two switches, seen from both ends
    one_x = [(x.guid, x.port) for x in links if x.width == "1X"]
    assert ("0x0008f10400410015", 1) in one_x and ("0x0008f10403960558", 1) in one_x
    back = next(x for x in links if x.guid == "0x0008f10403960558" and x.port == 2)
    assert (back.lid, back.peer_guid, back.peer_port, back.peer_lid) == (14, "0x005442ba00003080", 8, 6)


def test_ibnetdiscover_ndr_tabs_truncated() -> None:
    res = ibnetdiscover.parse(read("ibnetdiscover", "var_ndr_topology_tabs_truncated.txt"), "s")
    assert [(n.guid, n.lid) for n in of(res, FabricNode)] == [
        ("0xfc6a1c0300a1b2c0", 1),
        ("0x946dae0300cde72c", 5),
        ("0x946dae0300cde7a4", None),
    ]
    widths = {(lk.guid, lk.port): (lk.width, lk.speed) for lk in of(res, FabricLink)}
    assert widths[("0xfc6a1c0300a1b2c0", 2)] == ("2X", "NDR")
    assert widths[("0xfc6a1c0300a1b2c0", 33)] == ("4X", "NDR")
    assert len(res.problems) == 1 and res.problems[0].startswith("truncated: last line 27")


# ----------------------------------------------------------------------------------------------- ibqueryerrors

MAIL = "linux-rdma_2021-03-16_opensm_ceph_rdma_down_osds_ibqueryerrors.txt"


def test_ibqueryerrors_mailing_list_sample() -> None:
    res = ibqueryerrors.parse(read("ibqueryerrors", MAIL), "ibqueryerrors.txt", host="sm01")
    assert res.format == "ibqueryerrors" and res.problems == []
    ctr = of(res, PortCounter)
    assert len(ctr) == 44  # counted by hand: 2+1+1+6+1+3+4+4+3+6+4+4+3+1+1
    sw = "0x0002c903006e29b0"
    agg = {c.counter: c.value for c in ctr if c.guid == sw and c.port is None}
    assert agg == {
        "link_error_recovery": 15,
        "link_downed": 48,
        "port_rcv_switch_relay_errors": 2461,
        "port_xmit_discards": 15854,
        "vl15_dropped": 5,
        "port_xmit_wait": 4294967295,
    }
    p5 = {c.counter: c.value for c in ctr if c.guid == sw and c.port == 5}
    assert p5["symbol_error"] == 65535 and p5["port_xmit_wait"] == 84704351
    assert [c.value for c in ctr if c.guid == sw and c.port == 0] == [76959324]
    ca = [c for c in ctr if c.line == 3]
    assert [(c.guid, c.port, c.counter, c.value, c.extended, c.lid) for c in ca] == [
        ("0x7cfe900300179b31", 1, "vl15_dropped", 14, False, None),
        ("0x7cfe900300179b31", 1, "port_xmit_wait", 4294967295, False, None),
    ]
    assert {c.host for c in ctr} == {"sm01"} and {c.snapshot for c in ctr} == {0}
    msgs = of(res, ToolMessage)
    assert [(m.line, m.message) for m in msgs][:2] == [
        (22, "Summary: 4 nodes checked, 4 bad nodes found"),
        (23, "43 ports checked, 14 ports have errors beyond threshold"),
    ]


def test_ibqueryerrors_report_port_and_data() -> None:
    res = ibqueryerrors.parse(read("ibqueryerrors", "var_report_port_and_data_counters.txt"), "s")
    assert res.problems == []
    links = of(res, FabricLink)
    assert [(lk.guid, lk.port, lk.peer_guid, lk.peer_port, lk.speed, lk.lid, lk.peer_lid) for lk in links] == [
        ("0x0002c903006e29b0", 5, "0xe41d2d0300e0bae1", 1, "FDR", 2, 6),
        ("0x0002c903006e29b0", 7, "0x7cfe900300179b31", 1, "QDR", 2, 3),
        ("0x946dae0300cde72c", 1, "0xfc6a1c0300a1b2c0", 33, "NDR", 75, 12),
    ]
    states = [(p.port, p.state, p.phys_state, p.could_be) for p in of(res, FabricPortState)]
    assert states == [(7, "Active", "LinkUp", "Could be 14.0625 Gbps"), (9, "Down", "Polling", None)]
    ext = [(c.counter, c.value, c.extended, c.lid) for c in of(res, PortCounter) if c.line == 10]
    assert ext == [
        ("symbol_error", 1187, True, 75),
        ("link_error_recovery", 3, True, 75),
        ("port_rcv_errors", 17, True, 75),
    ]
    data = {c.counter: c.value for c in of(res, PortCounter) if c.line == 13}
    assert data == {"port_xmit_data": 36298026860928, "port_rcv_data": 35012219834624}
    assert [e.line for e in of(res, ToolError)] == [14]
    assert of(res, ToolMessage)[-1].message == "1 PMA query failures"


def test_ibqueryerrors_truncated() -> None:
    res = ibqueryerrors.parse(read("ibqueryerrors", "var_truncated_in_port6.txt"), "s")
    assert res.problems == ["truncated: line 15: counter list cut off ('[PortRcvSwitc')"]
    assert [(c.counter, c.value) for c in of(res, PortCounter) if c.line == 15] == [("link_downed", 9)]


def test_ibqueryerrors_crlf_and_ansi_same_records() -> None:
    text = read("ibqueryerrors", MAIL)
    plain = ibqueryerrors.parse(text, "s")
    crlf = ibqueryerrors.parse(text.replace("\n", "\r\n"), "s")
    ansi = ibqueryerrors.parse(text.replace("port 5:", "port 5:\x1b[31m").replace("65535]", "65535]\x1b[0m"), "s")
    key = [(r.line, getattr(r, "counter", None), getattr(r, "value", None)) for r in plain.records]
    assert key == [(r.line, getattr(r, "counter", None), getattr(r, "value", None)) for r in crlf.records]
    assert key == [(r.line, getattr(r, "counter", None), getattr(r, "value", None)) for r in ansi.records]
