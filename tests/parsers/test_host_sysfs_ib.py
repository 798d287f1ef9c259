"""sysfs_infiniband parser against the real samples in tests/data/sysfs_infiniband (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.records import ParseResult
from diagnose.parsers import sysfs_ib
from diagnose.parsers._host import DevNetMap, RdmaHwCounter
from diagnose.parsers._ib import GidEntry, IbPort, ToolError
from diagnose.parsers.perfquery import PortCounter

DATA = Path(__file__).resolve().parents[1] / "data" / "sysfs_infiniband"
GPUD = "gpud_sys-class-infiniband-h100.0_3devs_folded.txt"
PROCFS = "procfs_fixtures_ttar_sys_class_infiniband_folded.txt"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def of(res: ParseResult, cls: type) -> list:
    return [r for r in res.records if isinstance(r, cls)]


def counters(res: ParseResult) -> dict[tuple[str, int | None, str], PortCounter]:
    return {(c.device, c.port, c.counter): c for c in of(res, PortCounter)}


def test_gpud_h100_tree() -> None:
    res = sysfs_ib.parse(read(GPUD), "sys (sysfs tree)", host="node-a")
    assert res.format == "sysfs_infiniband" and res.problems == []
    ports = {(p.device, p.port): p for p in of(res, IbPort)}
    assert sorted(ports) == [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_bond_0", 1)]
    p = ports[("mlx5_0", 1)]
    assert p == IbPort(
        source="sys (sysfs tree)",
        line=54,
        text="/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE",
        host="node-a",
        device="mlx5_0",
        port=1,
        state="Active",
        phys_state="LinkUp",
        rate_gbps=400.0,
        width="4X",
        speed="NDR",
        link_layer="InfiniBand",
        lid=None,
        sm_lid=None,
        port_guid=None,
        node_guid=None,
        ca_type="MT4129",
        firmware="28.41.1000",
    )
    bond = ports[("mlx5_bond_0", 1)]
    assert (bond.link_layer, bond.rate_gbps, bond.width, bond.speed, bond.ca_type, bond.firmware, bond.line) == (
        "Ethernet",
        200.0,
        "2X",
        "NDR",
        "MT41692",
        "32.38.3056",
        162,
    )
    c = counters(res)
    assert len(of(res, PortCounter)) == 3 * 21  # 21 counters/ files per port, all in the vocabulary
    ebo = c[("mlx5_bond_0", 1, "excessive_buffer_overrun_errors")]
    assert (ebo.value, ebo.line, ebo.extended, ebo.snapshot, ebo.lid, ebo.guid) == (15, 113, True, 0, None, None)
    assert c[("mlx5_bond_0", 1, "port_rcv_errors")].value == 14
    assert c[("mlx5_bond_0", 1, "port_rcv_switch_relay_errors")].value == 1
    assert c[("mlx5_0", 1, "port_xmit_wait")].value == 2489603687
    assert c[("mlx5_0", 1, "vl15_dropped")].value == 0  # `VL15_dropped` file name
    xmit = c[("mlx5_bond_0", 1, "port_xmit_data")]
    assert (xmit.value, xmit.line) == (230442669431839, 126)  # raw 4-octet words, as sysfs prints
    hw = {(h.device, h.counter): h for h in of(res, RdmaHwCounter)}
    assert len(of(res, RdmaHwCounter)) == 3 * 26
    assert (hw[("mlx5_bond_0", "roce_adp_retrans")].value, hw[("mlx5_bond_0", "roce_adp_retrans")].line) == (3, 149)
    assert hw[("mlx5_0", "rx_write_requests")].value == 3809045607
    assert hw[("mlx5_1", "rx_dct_connect")].port == 1


def test_procfs_fixture_tree() -> None:
    res = sysfs_ib.parse(read(PROCFS), "t")
    assert res.problems == []
    ports = {(p.device, p.port): p for p in of(res, IbPort)}
    assert sorted(ports) == [("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2), ("mlx5_0", 1)]
    hfi = ports[("hfi1_0", 1)]
    assert (hfi.rate_gbps, hfi.width, hfi.speed, hfi.firmware, hfi.ca_type, hfi.line) == (
        100.0,
        "4X",
        "EDR",
        "1.27.0",
        None,
        23,
    )
    mlx5 = ports[("mlx5_0", 1)]
    # the fixture has `phys_state:4: ACTIVE` (kept as printed) and a colon-grouped node_guid
    assert (mlx5.state, mlx5.phys_state, mlx5.rate_gbps, mlx5.width, mlx5.node_guid, mlx5.ca_type) == (
        "Active",
        "ACTIVE",
        25.0,
        "1X",
        "0x0a7fbc1245efd23b",
        "MT4118",
    )
    assert ports[("mlx4_0", 2)].rate_gbps == 40.0
    c = counters(res)
    assert c[("hfi1_0", 1, "port_rcv_data")].value == 345091702026
    assert c[("mlx5_0", 1, "port_xmit_data")].line == 87
    hw = {h.counter: h.value for h in of(res, RdmaHwCounter) if h.device == "mlx5_0"}
    assert (hw["local_ack_timeout_err"], hw["out_of_sequence"], hw["req_cqe_error"], hw["resp_cqe_error"]) == (
        131,
        1,
        3481,
        8109,
    )


def test_prompt_snapshots_relative_paths_and_path_value_lines() -> None:
    res = sysfs_ib.parse(read("var_prompt_date_two_grep_snapshots_relative_and_echo.txt"), "s")
    assert res.problems == []
    sym = sorted(
        (c.snapshot, c.value, c.timestamp, c.host) for c in of(res, PortCounter) if c.counter == "symbol_error"
    )
    assert sym == [
        (0, 0, "2024-03-26T13:57:26+00:00", "gpu-node-07"),
        (1, 12, "2024-03-26T14:07:26+00:00", "gpu-node-07"),
    ]
    downed = [c for c in of(res, PortCounter) if c.counter == "link_downed"]
    assert [(c.snapshot, c.value) for c in downed] == [(0, 0), (1, 1)]
    hw = of(res, RdmaHwCounter)
    assert len(hw) == 8 and {h.device for h in hw} == {"mlx5_1"}  # `grep -r . mlx5_1/...` relative paths
    (port,) = of(res, IbPort)
    assert (port.device, port.state, port.phys_state, port.rate_gbps, port.line) == (
        "mlx5_0",
        "Down",
        "Disabled",
        400.0,
        59,
    )


def test_lid_gids_gid_types_counters_ext_and_na() -> None:
    res = sysfs_ib.parse(read("var_ib_lid_gids_roce_gid_types_counters_ext.txt"), "s")
    assert res.problems == []  # `N/A (no PMA)` is a kernel quirk, not damage
    ports = {p.device: p for p in of(res, IbPort)}
    ib = ports["mlx5_0"]
    assert (ib.lid, ib.sm_lid, ib.port_guid, ib.node_guid, ib.rate_gbps, ib.speed) == (
        13247,
        1,
        "0x00155dfffd3411eb",
        "0x00155dfffd3411eb",
        200.0,
        "HDR",
    )
    assert (ports["mlx5_bond_0"].lid, ports["mlx5_bond_0"].port_guid) == (0, None)
    gids = [(g.device, g.index, g.gid, g.gid_type) for g in of(res, GidEntry)]
    assert gids == [
        ("mlx5_0", 0, "fe80:0000:0000:0000:0015:5dff:fd34:11eb", "IB/RoCE v1"),
        ("mlx5_bond_0", 0, "fe80:0000:0000:0000:0e42:a1ff:fead:479a", "IB/RoCE v1"),
        ("mlx5_bond_0", 1, "fe80:0000:0000:0000:0e42:a1ff:fead:479a", "RoCE v2"),
        ("mlx5_bond_0", 2, "0000:0000:0000:0000:0000:ffff:0a60:531a", "IB/RoCE v1"),
        ("mlx5_bond_0", 3, "0000:0000:0000:0000:0000:ffff:0a60:531a", "RoCE v2"),
    ]
    assert [(m.device, m.port, m.netdev, m.up, m.line) for m in of(res, DevNetMap)] == [
        ("mlx5_bond_0", 1, "bond0", None, 31)
    ]
    xmit = sorted((c.extended, c.value) for c in of(res, PortCounter) if c.counter == "port_xmit_data")
    assert xmit == [(False, 4294967295), (True, 230442669431839)]  # counters/ is the old 32-bit file here
    assert not any(c.counter == "port_rcv_errors" for c in of(res, PortCounter))
    assert any(c.counter == "unicast_xmit_packets" and c.value == 315487941081 for c in of(res, PortCounter))


def test_truncated_crlf_ansi_and_tool_errors() -> None:
    text = read(GPUD)
    cut = "\n".join(text.split("\n")[:60]) + "\n/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_err"
    res = sysfs_ib.parse(cut, "s")
    assert [p.device for p in of(res, IbPort)] == ["mlx5_0"]
    assert len(res.problems) == 1 and res.problems[0].startswith("truncated: capture ends early (line 61")
    plain = sysfs_ib.parse(text, "s")
    crlf = sysfs_ib.parse(text.replace("\n", "\r\n").replace("4: ACTIVE", "\x1b[32m4: ACTIVE\x1b[0m"), "s")
    assert crlf.problems == []
    assert [(r.line, type(r).__name__) for r in plain.records] == [(r.line, type(r).__name__) for r in crlf.records]
    assert {p.state for p in of(crlf, IbPort)} == {"Active"}
    err = sysfs_ib.parse(
        "grep: /sys/class/infiniband/mlx5_0/ports/1/hw_counters/lifespan: Invalid argument\n"
        "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0\n",
        "s",
    )
    assert [(e.tool, e.line) for e in of(err, ToolError)] == [("sysfs", 1)]
    assert [c.counter for c in of(err, PortCounter)] == ["symbol_error"]
