"""sminfo / smpquery (ibportstate) / opensm_log / ibswinfo against the samples in tests/data."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import ibswinfo, opensm_log, sminfo, smpquery
from diagnose.parsers._fabric import FabricNode, FabricPortState, SmEvent, SmInfo, SwitchInfo
from diagnose.parsers._ib import ToolError
from diagnose.parsers.smpquery import PortInfo

DATA = Path(__file__).resolve().parents[1] / "data"


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_bytes().decode("utf-8")


def of(res, cls):
    return [r for r in res.records if isinstance(r, cls)]


# ----------------------------------------------------------------------------------------------- sminfo


def test_sminfo_pdsh_runs_and_failure() -> None:
    res = sminfo.parse(read("sminfo", "var_pdsh_two_runs_and_iberror.txt"), "sminfo.txt")
    assert res.format == "sminfo" and res.problems == []
    sms = of(res, SmInfo)
    assert [(s.line, s.sm_lid, s.sm_guid, s.activity, s.priority, s.state) for s in sms] == [
        (2, 37, "0x7cfe90030016aef1", 4484381, 14, "MASTER"),
        (3, 37, "0x7cfe90030016aef1", 4484384, 14, "MASTER"),
        (5, 12, "0x946dae0300cde7a4", 0, 10, "STANDBY"),
    ]
    assert [(e.line, e.message) for e in of(res, ToolError)] == [
        (7, "ibwarn: [2314] mad_rpc: _do_madrpc failed; dport (Lid 37)"),
        (8, "sminfo: iberror: failed: query"),
    ]


def test_sminfo_old_layout() -> None:
    res = sminfo.parse(read("sminfo", "var_old_hex_lid_no_state.txt"), "s")
    (s,) = res.records
    assert isinstance(s, SmInfo)
    assert (s.sm_lid, s.sm_guid, s.activity, s.priority, s.state) == (1, "0x0002c9010b7c2ae1", 20, 1, None)


# ----------------------------------------------------------------------------------------------- smpquery


def test_ibportstate_query_dump() -> None:
    res = smpquery.parse(read("smpquery", "heioy_ibportstate_md@ad1bf28_lines183-207_query_lid12_port2.txt"), "s")
    assert res.format == "smpquery" and res.problems == []
    (pi,) = res.records
    assert isinstance(pi, PortInfo)
    assert (pi.line, pi.lid, pi.port, pi.state, pi.phys_state, pi.width, pi.speed, pi.sm_lid, pi.guid) == (
        3,
        12,
        2,
        "Active",
        "LinkUp",
        "4X",
        "FDR",  # LinkSpeedExtActive 14.0625 Gbps wins over LinkSpeedActive 10.0 Gbps
        11,
        None,
    )
    assert (pi.width_supported, pi.speed_supported) == ("1X or 4X", "2.5 Gbps or 5.0 Gbps or 10.0 Gbps")


def test_ibportstate_disable_before_after() -> None:
    res = smpquery.parse(read("smpquery", "heioy_ibportstate_md@ad1bf28_lines75-120_disable_lid3_port1.txt"), "s")
    assert res.problems == []
    assert [(p.line, p.lid, p.port, p.state, p.speed) for p in of(res, PortInfo)] == [
        (3, 3, 1, "Active", "FDR"),
        (29, 3, 1, "Active", "FDR"),  # "LinkSpeedActive: Extended speed" -> the Ext field
    ]
    assert of(res, FabricPortState) == []  # no GUID anywhere in this capture


def test_smpquery_nodeinfo_gives_guid_to_portinfo() -> None:
    res = smpquery.parse(read("smpquery", "var_nodeinfo_portinfo_nodedesc.txt"), "s")
    assert res.problems == []
    (node,) = of(res, FabricNode)
    assert (node.guid, node.node_type, node.ports, node.lid, node.description, node.host) == (
        "0xec0d9a03000c8980",
        "CA",
        2,
        12,
        "node10 HCA-1",
        "node10",
    )
    states = of(res, FabricPortState)
    assert [(p.line, p.guid, p.port, p.state, p.phys_state, p.width, p.speed, p.lid) for p in states] == [
        (18, "0xec0d9a03000c8980", 2, "Down", "Polling", None, None, 12),
        (34, "0xec0d9a03000c8981", 1, "Active", "LinkUp", "4X", "FDR", 10),  # -G port GUID
    ]


# ----------------------------------------------------------------------------------------------- opensm log

OSM = "linux-rdma_2021-03-16_opensm_ceph_rdma_down_osds_opensm_log_excerpt.log"


def test_opensm_log_mailing_list_errors() -> None:
    res = opensm_log.parse(read("opensm_log", OSM), "opensm.log", host="rd240")
    assert res.format == "opensm_log" and res.problems == []
    ev = of(res, SmEvent)
    assert [e.code for e in ev if e.category == "error"] == ["5411", "3113", "3120"] * 3 + ["5411"]
    first = ev[0]
    assert (first.line, first.level, first.timestamp, first.host) == (1, "0x01", "Mar 11 19:32:26.717944", "rd240")
    # the indented continuation line belongs to the message
    assert first.message.endswith("-- dropping Method 0x1, Attr 0x20, TID 0x11f51")
    other = [e for e in ev if e.category == "other"]
    assert [(e.line, e.level) for e in other] == [(3, "0x01"), (8, "0x01"), (13, "0x01")]
    assert other[0].message == "Received SMP on a 2 hop path: Initial path = 0,1,3, Return path  = 0,0,0"


def test_opensm_log_startup_events() -> None:
    res = opensm_log.parse(read("opensm_log", "var_startup_trap128_lid_change.log"), "s")
    assert res.problems == []
    ev = [(e.line, e.category, e.code, e.level) for e in of(res, SmEvent)]
    assert ev == [
        (2, "heavy_sweep", None, "0x02"),  # the message box and "Entering heavy sweep" are one sweep
        (11, "other", None, "0x80"),
        (13, "subnet_up", None, "0x02"),
        (14, "port_state_change", None, "0x01"),
        (15, "lid_change", None, "0x02"),
        (16, "error", "3315", "0x01"),
        (17, "subnet_up", None, "0x02"),
    ]
    sweep = of(res, SmEvent)[0]
    assert sweep.message == "do_sweep: HEAVY SWEEP START"
    assert of(res, SmEvent)[1].message == "Entering MASTER state"


def test_opensm_syslog_lines() -> None:
    text = (
        "Mar 11 19:30:01 sm01 OpenSM[2211]: SUBNET UP\n"
        "Mar 11 19:30:02 sm01 kernel: mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged\n"
        "Mar 11 19:31:09 sm01 OpenSM[2211]: Entering STANDBY state\n"
    )
    assert opensm_log.sniff(text) >= 40
    res = opensm_log.parse(text, "messages")
    assert [(e.line, e.category, e.level, e.timestamp) for e in of(res, SmEvent)] == [
        (1, "subnet_up", None, "Mar 11 19:30:01"),
        (3, "other", None, "Mar 11 19:31:09"),
    ]


# ----------------------------------------------------------------------------------------------- ibswinfo


def test_ibswinfo_table() -> None:
    res = ibswinfo.parse(read("ibswinfo", "ibswinfo_test1.out"), "sw.txt")
    assert res.format == "ibswinfo" and res.problems == []
    rows = of(res, SwitchInfo)
    assert len(rows) == 33
    assert {r.guid for r in rows} == {"0x1c34da0300010540"}
    kv = {r.key: r.value for r in rows}
    assert kv["device"] == "SwitchIB Mellanox Technologies"
    assert (kv["part number"], kv["PSID"], kv["firmware version"]) == ("MSB7790-ES2F", "MT_1880110032", "11.2008.2102")
    assert (kv["PSU0 power (W)"], kv["PSU1 power (W)"], kv["PSU1 S/N"]) == ("72", "71", "MT1944X10555")
    assert (kv["temperature (C)"], kv["max temp (C)"], kv["fan status"], kv["fan#8 (rpm)"]) == (
        "45",
        "57",
        "ERROR",
        "7232",
    )
    assert next(r.line for r in rows if r.key == "fan status") == 31


def test_ibswinfo_vitals() -> None:
    res = ibswinfo.parse(read("ibswinfo", "ibswinfo_vitals1.out"), "s")
    rows = of(res, SwitchInfo)
    assert len(rows) == 14 and {r.guid for r in rows} == {None}
    kv = {r.key: r.value for r in rows}
    assert (kv["uptime (sec)"], kv["cur.temp (C)"], kv["psu1.power (W)"], kv["fan#9.speed (rpm)"]) == (
        "16982312",
        "73",
        "102",
        "6011",
    )
