"""node_exporter (prometheus_infiniband) parser against tests/data/prometheus_infiniband (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.records import ParseResult
from diagnose.parsers import node_exporter
from diagnose.parsers._host import RdmaHwCounter
from diagnose.parsers._ib import IbPort
from diagnose.parsers.perfquery import PortCounter

DATA = Path(__file__).resolve().parents[1] / "data" / "prometheus_infiniband"
E2E = "e2e-output_node_infiniband_excerpt.prom"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def of(res: ParseResult, cls: type) -> list:
    return [r for r in res.records if isinstance(r, cls)]


def test_e2e_fixture() -> None:
    res = node_exporter.parse(read(E2E), "metrics.prom", host="node-a")
    assert res.format == "prometheus_infiniband" and res.problems == []
    c = {(p.device, p.port, p.counter): p for p in of(res, PortCounter)}
    rcv = c[("mlx4_0", 1, "port_rcv_data")]
    assert rcv == PortCounter(
        source="metrics.prom",
        line=66,
        text='node_infiniband_port_data_received_bytes_total{device="mlx4_0",port="1"} 1.8527668e+07',
        host="node-a",
        lid=None,
        guid=None,
        port=1,
        counter="port_rcv_data",
        value=4631917,  # 18527668 octets as exported (procfs multiplies the sysfs words by 4): in words again
        extended=True,
        snapshot=0,
        timestamp=None,
        device="mlx4_0",
    )
    assert c[("mlx4_0", 1, "port_xmit_data")].value == 14933760 // 4
    assert c[("mlx4_0", 1, "port_xmit_discards")].value == 5  # port_discards_transmitted_total
    assert c[("mlx4_0", 1, "port_rcv_packets")].value == 6825908347  # 6.825908347e+09
    assert c[("mlx4_0", 1, "port_xmit_wait")].value == 4294967295
    assert c[("mlx4_0", 1, "multicast_rcv_packets")].value == 93
    assert c[("mlx4_0", 1, "port_rcv_constraint_errors")].line == 60
    assert c[("mlx4_0", 1, "port_xmit_constraint_errors")].line == 63
    # legacy_* (counters_ext) only where the modern metric is missing: port 2 has no port_packets_*_total
    assert (c[("mlx4_0", 2, "port_rcv_packets")].line, c[("mlx4_0", 2, "port_rcv_packets")].value) == (24, 0)
    assert c[("mlx4_0", 2, "multicast_rcv_packets")].value == 0  # modern metric wins over legacy 93
    assert len(of(res, PortCounter)) == 25
    ports = {(p.device, p.port): p for p in of(res, IbPort)}
    assert sorted(ports) == [("i40iw0", 1), ("mlx4_0", 1), ("mlx4_0", 2)]
    m1 = ports[("mlx4_0", 1)]
    assert (m1.state, m1.phys_state, m1.rate_gbps, m1.firmware, m1.ca_type, m1.line, m1.host) == (
        "Active",
        "LinkUp",
        40.0,  # 5e+09 bytes/s
        "2.31.5050",
        "MT4099",
        98,
        "node-a",
    )
    i40 = ports[("i40iw0", 1)]
    assert (i40.rate_gbps, i40.firmware, i40.ca_type) == (10.0, "0.2", "I40IW")
    assert of(res, RdmaHwCounter) == []


def test_instance_label_scrapes_and_hw_counters() -> None:
    res = node_exporter.parse(read("var_two_scrapes_instance_label_hw_counters.prom"), "m", host="ignored")
    assert res.problems == []
    assert {r.host for r in res.records} == {"gpu-node-07"}
    sym = [(p.snapshot, p.value, p.timestamp, p.line) for p in of(res, PortCounter) if p.counter == "symbol_error"]
    assert sym == [(0, 1234, "2024-03-26T13:57:26+00:00", 16), (1, 1300, "2024-03-26T13:58:26+00:00", 27)]
    xmit = next(p for p in of(res, PortCounter) if p.counter == "port_xmit_data")
    assert xmit.value == 921770677727356 // 4  # 9.21770677727356e+14 octets, exact, in words
    hw = {h.counter: h.value for h in of(res, RdmaHwCounter)}
    assert hw == {"np_cnp_sent": 1052612505, "out_of_sequence": 1811101, "roce_slow_restart": 0}
    (port,) = of(res, IbPort)
    assert (port.state, port.phys_state, port.rate_gbps, port.firmware, port.line) == (
        "Down",
        "Polling",
        400.0,
        "28.41.1000",
        7,
    )


def test_truncated_and_crlf() -> None:
    res = node_exporter.parse(read("var_truncated_mid_sample.prom"), "m")
    assert len(res.problems) == 1 and res.problems[0].startswith("truncated: exposition ends early (line 86")
    assert len(of(res, PortCounter)) == 24
    text = read(E2E)
    crlf = node_exporter.parse(text.replace("\n", "\r\n"), "m")
    assert crlf.problems == []
    assert [(r.line, r.text) for r in crlf.records] == [
        (r.line, r.text) for r in node_exporter.parse(text, "m").records
    ]


def test_only_infiniband_metrics_are_read() -> None:
    other = '# TYPE node_load1 gauge\nnode_load1 0.5\nnode_cpu_seconds_total{cpu="0",mode="idle"} 1.2e+06\n'
    assert node_exporter.sniff(other) == 0
    res = node_exporter.parse(other, "m")
    assert res.records == [] and res.problems == []
    bad = 'node_infiniband_link_downed_total{device="mlx5_0",port="1"} NaN\nnode_infiniband_link_downed_total{x} 1\n'
    res = node_exporter.parse(bad, "m")
    assert res.records == [] and len(res.problems) == 1 and "labels" in res.problems[0]


def test_data_counters_in_words_measure_the_congestion_perfquery_measures(tmp_path: Path) -> None:
    """The same port, the same 60 s: perfquery's two snapshots and node_exporter's two scrapes (data in octets,
    x4) give the same share of transmit capacity lost to credit waits. Left in octets, node_exporter's data
    would have looked four times larger and the waits four times smaller."""
    from diagnose.pipeline import gather

    pq = (DATA.parent / "perfquery" / "var_two_snapshots_with_date.txt").read_text()
    waits = iter(("PortXmitWait:....................1000000", "PortXmitWait:....................151000000"))
    pq = "\n".join(next(waits) if line.startswith("PortXmitWait:") else line for line in pq.split("\n"))
    data = [int(line.rsplit(".", 1)[1]) for line in pq.split("\n") if line.startswith("PortXmitData:")]
    assert len(data) == 2 and data[1] > data[0]
    prom = "".join(
        f'node_infiniband_port_data_transmitted_bytes_total{{device="mlx5_0",port="1"}} {4 * d} {ms}\n'
        f'node_infiniband_port_transmit_wait_total{{device="mlx5_0",port="1"}} {w} {ms}\n'
        for d, w, ms in zip(data, (1000000, 151000000), (1711461446000, 1711461506000), strict=True))
    seen = {}
    for name, text in (("perfquery.txt", pq), ("metrics.prom", prom)):
        host = tmp_path / name / "gpu-node-07"
        host.mkdir(parents=True)
        (host / name).write_text(text)
        (found,) = [f for f in gather([tmp_path / name]).findings if f.kind == "port_xmit_wait"]
        seen[name] = {k: found.attrs[k] for k in ("ratio", "xmit_wait", "xmit_data", "basis", "interval_s")}
    assert seen["metrics.prom"] == seen["perfquery.txt"]
    assert seen["perfquery.txt"]["xmit_data"] == data[1] - data[0] and seen["perfquery.txt"]["basis"] == "delta"


def test_only_node_exporters_octet_metrics_are_turned_into_words() -> None:
    """node_exporter's data metrics are octets (divided by 4); a metric named as sysfs names the counter (a textfile
    collector exporting port_xmit_data as read) is in words already, and kept."""
    text = ('node_infiniband_port_data_transmitted_bytes_total{device="mlx5_0",port="1"} 4000\n'
            'node_infiniband_legacy_data_received_bytes_total{device="mlx5_0",port="1"} 800\n'
            'node_infiniband_port_xmit_data{device="mlx5_1",port="1"} 1000\n')
    got = {(p.device, p.counter): p.value for p in of(node_exporter.parse(text, "m.prom", host="h"), PortCounter)}
    assert got == {("mlx5_0", "port_xmit_data"): 1000, ("mlx5_0", "port_rcv_data"): 200,
                   ("mlx5_1", "port_xmit_data"): 1000}
