"""ethtool -S (ethtool_stats) parser against tests/data/ethtool_stats (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.records import ParseResult
from diagnose.parsers import ethtool
from diagnose.parsers._host import NicStat
from diagnose.parsers._ib import ToolError

DATA = Path(__file__).resolve().parents[1] / "data" / "ethtool_stats"
OLD = "ethq_tests_mlx5_core@6331e03c_old_driver.txt"
NEW = "var_ethq_mlx5_core@f76f228_restored_header_indent.txt"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def stats(res: ParseResult) -> list[NicStat]:
    return [r for r in res.records if isinstance(r, NicStat)]


def test_ethq_old_mlx5_driver_headerless() -> None:
    res = ethtool.parse(read(OLD), "ethtool.txt", host="node-a")
    assert res.format == "ethtool_stats" and res.problems == []
    s = stats(res)
    assert len(s) == 309
    assert s[0] == NicStat(
        source="ethtool.txt",
        line=1,
        text="     rx_packets: 5487361",
        host="node-a",
        netdev=None,
        counter="rx_packets",
        value=5487361,
    )
    by = {x.counter: x for x in s}
    assert (by["octets_tx"].value, by["octets_tx"].line) == (5834192580, 37)
    assert by["tx15_0_nop"].value == 7392


def test_ethq_kernel_415_dump_with_phy_and_prio_counters() -> None:
    res = ethtool.parse(read(NEW), "e")
    assert res.problems == []
    by = {x.counter: x for x in stats(res)}
    assert len(stats(res)) == 751
    assert (by["rx_packets"].value, by["rx_packets"].line) == (845320277, 2)
    assert (by["link_down_events_phy"].value, by["link_down_events_phy"].line) == (0, 39)
    assert by["rx_bytes_phy"].value == 2202570777997
    assert by["rx_8192_to_10239_bytes_phy"].value == 141701654
    assert by["rx_prio0_packets"].value == 845715962
    assert by["tx_vport_rdma_unicast_bytes"].value == 0
    assert {x.netdev for x in stats(res)} == {None}


def test_grep_prio_with_command_in_backticks() -> None:
    res = ethtool.parse(read("byteps_issue179_ethtool_S_grep_prio_before.txt"), "e")
    assert res.problems == []
    s = stats(res)
    assert len(s) == 32 and {x.netdev for x in s} == {"enp178s0f0"}
    assert (s[0].counter, s[0].value, s[0].line) == ("rx_prio0_bytes", 88034564921216, 3)
    assert next(x for x in s if x.counter == "tx_prio0_packets").value == 40177770079


def test_capture_loop_headers_and_tool_error() -> None:
    res = ethtool.parse(read("var_capture_loop_three_netdevs_headers_error.txt"), "e")
    assert res.problems == []
    s = stats(res)
    assert {x.host for x in s} == {"gpu-node-07"}
    assert sorted({x.netdev for x in s}) == ["ens1f0np0", "ens3f0np0"]
    third = {x.counter: x.value for x in s if x.netdev == "ens3f0np0"}
    assert (third["rx_prio3_pause"], third["tx_prio3_pause_duration"], third["rx_discards_phy"]) == (1523, 91104, 17)
    assert third["link_down_events_phy"] == 2
    assert {x.counter: x.value for x in s if x.netdev == "ens1f0np0"}["link_down_events_phy"] == 0
    (err,) = [r for r in res.records if isinstance(r, ToolError)]
    assert (err.tool, err.message, err.line) == ("ethtool", "no stats available", 17)


def test_truncated_crlf_and_nested_names() -> None:
    res = ethtool.parse(read("var_truncated_mid_line.txt"), "e")
    assert len(stats(res)) == 99
    assert res.problems == ["truncated: dump ends early (line 101: 'outbound_pci_stalled_wr')"]
    text = read(NEW)
    crlf = ethtool.parse(text.replace("\n", "\r\n"), "e")
    assert crlf.problems == [] and [(x.counter, x.value) for x in stats(crlf)] == [
        (x.counter, x.value) for x in stats(ethtool.parse(text, "e"))
    ]
    nested = ethtool.parse("NIC statistics:\n     rxq0: rx_bytes: 176801830924270\n     [1]: rx_bytes: 7\n", "e")
    assert [(x.counter, x.value) for x in stats(nested)] == [("rxq0: rx_bytes", 176801830924270), ("[1]: rx_bytes", 7)]


def test_sniff_does_not_take_key_value_files() -> None:
    meminfo = "MemTotal:       16384 kB\nMemFree:         8192 kB\nBuffers:          100 kB\n"
    devinfo = "hca_id:\tmlx5_0\n\t\tport_lid:\t\t75\n\t\tsm_lid:\t\t\t1\n\t\tmax_mtu:\t\t4096 (5)\n"
    assert ethtool.sniff(meminfo) == 0 and ethtool.sniff(devinfo) == 0
