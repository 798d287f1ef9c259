"""ibdiagnet2.db_csv and ibdiagnet2.log against the samples in tests/data (see each folder's README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import ibdiagnet, ibdiagnet_log
from diagnose.parsers._fabric import CableInfo, FabricLink, FabricNode, FabricPortState, SmInfo, ToolMessage
from diagnose.parsers.perfquery import PortCounter

DATA = Path(__file__).resolve().parents[1] / "data"
SW, H1, H2 = "0xfc6a1c0300a1b2c0", "0x946dae0300cde72c", "0x946dae0300cde7a4"


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_bytes().decode("utf-8")


def of(res, cls):
    return [r for r in res.records if isinstance(r, cls)]


def test_db_csv_sections_generic() -> None:
    secs = ibdiagnet.sections(read("ibdiagnet_db_csv", "var_constructed_ndr_leaf_two_hcas.db_csv"))
    assert [(s.name, s.start_line, s.end_line, len(s.rows)) for s in secs] == [
        ("NODES", 1, 6, 3),
        ("PORTS", 8, 16, 6),
        ("LINKS", 18, 22, 2),
        ("TEMP_SENSING", 24, 27, 1),
        ("PM_INFO", 29, 35, 4),
        ("SM_INFO", 37, 40, 1),
        ("CABLE_INFO", 42, 46, 2),
    ]
    assert len(secs[1].header) == 54 and secs[1].header[0] == "NodeGuid"


def test_db_csv_topology() -> None:
    res = ibdiagnet.parse(read("ibdiagnet_db_csv", "var_constructed_ndr_leaf_two_hcas.db_csv"), "ibdiagnet2.db_csv")
    assert res.format == "ibdiagnet_db_csv" and res.problems == []
    nodes = {n.guid: n for n in of(res, FabricNode)}
    assert (nodes[SW].node_type, nodes[SW].description, nodes[SW].ports, nodes[SW].lid) == (
        "SW",
        "MF0;leaf07:MQM9700/U1",
        65,
        1,
    )
    assert (nodes[H1].node_type, nodes[H1].lid, nodes[H2].lid) == ("CA", 5, 6)
    links = {(lk.guid, lk.port): lk for lk in of(res, FabricLink)}
    assert len(links) == 4  # two LINKS rows, one record per end
    up = links[(SW, 1)]
    assert (up.peer_guid, up.peer_port, up.width, up.speed, up.state, up.phys_state, up.lid, up.peer_lid) == (
        H1,
        1,
        "4X",
        "NDR",
        "Active",
        "LinkUp",
        1,
        5,
    )
    assert (up.description, up.peer_description, up.line) == ("MF0;leaf07:MQM9700/U1", "gpu-a017 mlx5_0", 20)
    assert links[(H2, 1)].width == "1X" and links[(H2, 1)].peer_port == 2
    (down,) = of(res, FabricPortState)
    assert (down.guid, down.port, down.state, down.phys_state, down.width, down.speed, down.lid) == (
        SW,
        3,
        "Down",
        "Polling",
        None,
        None,
        1,
    )


def test_db_csv_pm_info_counters() -> None:
    res = ibdiagnet.parse(read("ibdiagnet_db_csv", "var_constructed_ndr_leaf_two_hcas.db_csv"), "s")
    ctr = of(res, PortCounter)
    p2 = {c.counter: c for c in ctr if c.guid == SW and c.port == 2}
    assert (p2["symbol_error"].value, p2["link_downed"].value, p2["port_rcv_errors"].value) == (1287, 2, 17)
    assert p2["port_xmit_wait"].value == 912736 and p2["port_xmit_wait"].extended is False
    # the 64-bit column wins over the saturated 32-bit one
    assert (p2["port_xmit_data"].value, p2["port_xmit_data"].extended) == (2212381201920, True)
    assert p2["unicast_xmit_packets"].extended is True
    assert {c.lid for c in p2.values()} == {1} and {c.line for c in p2.values()} == {32}
    assert not [c for c in ctr if c.port == 3]  # the all-N/A row
    assert {c.lid for c in ctr if c.guid == H1} == {5}
    assert len(ctr) == 3 * 21


def test_db_csv_sm_and_cables() -> None:
    res = ibdiagnet.parse(read("ibdiagnet_db_csv", "var_constructed_ndr_leaf_two_hcas.db_csv"), "s")
    (sm,) = of(res, SmInfo)
    assert (sm.sm_lid, sm.sm_guid, sm.activity, sm.priority, sm.state) == (5, H1, 52178, 14, "MASTER")
    cables = of(res, CableInfo)
    assert [(c.guid, c.port, c.vendor, c.pn, c.sn, c.length, c.temperature, c.identifier) for c in cables] == [
        (SW, 1, "NVIDIA", "MCP4Y10-N002", "MT2334FT01234", "2", 47.0, "OSFP"),
        (SW, 2, "NVIDIA", "MCP4Y10-N002", "MT2334FT05678", "2", 48.0, "OSFP"),
    ]


def test_db_csv_truncated() -> None:
    res = ibdiagnet.parse(read("ibdiagnet_db_csv", "var_truncated_in_pm_info.db_csv"), "s")
    assert res.problems == [
        "truncated: section PM_INFO (line 29) has no END_PM_INFO line",
        "truncated: line 32: PM_INFO row has 12 of 28 columns",
    ]
    cut = [(c.counter, c.value) for c in of(res, PortCounter) if c.line == 32]
    # the row is cut right after a comma: 12 cells, the last (empty, possibly cut) one is dropped
    assert cut == [
        ("symbol_error", 1287),
        ("link_error_recovery", 3),
        ("link_downed", 2),
        ("port_rcv_errors", 17),
        ("port_rcv_remote_physical_errors", 0),
        ("port_rcv_switch_relay_errors", 0),
        ("port_xmit_discards", 0),
        ("port_xmit_constraint_errors", 0),
    ]
    assert len(of(res, FabricLink)) == 4


def test_db_csv_quoted_commas_and_crlf() -> None:
    text = (
        "START_NODES\r\n"
        "NodeDesc,NumPorts,NodeType,NodeGUID\r\n"
        '"MF0;leaf,odd:MQM9700/U1",65,2,0xfc6a1c0300a1b2c0\r\n'
        "END_NODES\r\n"
    )
    res = ibdiagnet.parse(text, "s")
    (n,) = of(res, FabricNode)
    assert (n.description, n.ports, n.guid, n.lid) == ("MF0;leaf,odd:MQM9700/U1", 65, SW, None)


# ----------------------------------------------------------------------------------------------- log


def test_ibdiagnet_log_summary_table() -> None:
    res = ibdiagnet_log.parse(
        read("ibdiagnet_log", "kobibar_OpenAI.recipe.md@c314151_lines200-216_ar_validation_summary.log"), "log"
    )
    assert res.format == "ibdiagnet_log" and res.problems == []
    msgs = of(res, ToolMessage)
    assert [(m.line, m.stage, m.message) for m in msgs if m.stage == "Summary"] == [
        (15, "Summary", "Discovery                 3          0"),
        (16, "Summary", "Virtualization            0          0"),
        (17, "Summary", "Routing                   0          0"),
    ]
    fabric = {m.message for m in msgs if m.stage == "Fabric Summary"}
    assert {"Total Nodes: 15", "IB Switches: 3", "IB Channel Adapters: 9", "IB Aggregation Nodes: 3"} <= fabric
    assert {m.tool for m in msgs} == {"ibdiagnet"} and {m.level for m in msgs} == {"info"}


def test_ibdiagnet_log_stage_title() -> None:
    res = ibdiagnet_log.parse(
        read("ibdiagnet_log", "kobibar_OpenAI.recipe.md@c314151_lines237-241_rail_validation.log"), "log"
    )
    (m,) = res.records
    assert isinstance(m, ToolMessage)
    assert (m.line, m.level, m.stage, m.message) == (
        3,
        "info",
        "Rail Optimized Topology Validation",
        "Rail Optimized Topology Validation finished successfully",
    )


def test_ibdiagnet_log_errors_warnings() -> None:
    res = ibdiagnet_log.parse(read("ibdiagnet_log", "var_constructed_stages_errors_warnings.log"), "log")
    msgs = of(res, ToolMessage)
    errors = [(m.line, m.stage) for m in msgs if m.level == "error"]
    assert errors == [(12, "Discovery"), (13, "Discovery")]
    dup = next(m for m in msgs if m.line == 13)
    assert dup.message.endswith("gpu-b112 mlx5_0/U1 with port GUID 0x946dae0300cdf1b0")  # continuation lines
    warns = [m for m in msgs if m.level == "warning"]
    assert [(m.line, m.stage) for m in warns] == [(19, "Port Counters"), (20, "Port Counters")]
    assert warns[0].message.startswith('Sfc6a1c03009be0c0/Nfc6a1c03009be0c0/P1/3/1 - "link_down_counter" increased')
    assert [m.message for m in msgs if m.stage == "Summary"][:3] == [
        "Discovery                 0          2",
        "Port Counters             2          0",
        "Cable Diagnostic (Plugin) 0          0",
    ]
