"""Prometheus HTTP API (prometheus_api) parser against tests/data/prometheus_api (see its README).

The expected values come from what was written into the sysfs tree node_exporter read during the capture
(README): symbol_error of mlx5_0 raised 0 -> 4 -> 13 -> 19 -> 31, link_error_recovery 0 -> 1, the rest flat.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import by_format, node_exporter, prometheus_api
from diagnose.parsers._host import RdmaHwCounter
from diagnose.parsers._ib import IbPort
from diagnose.parsers.perfquery import PortCounter
from diagnose.pipeline import gather, triage

DATA = Path(__file__).resolve().parents[1] / "data" / "prometheus_api"
RAW = "query_range_symbol_errors_rising.json"
PRETTY = "query_range_symbol_errors_rising_pretty.json"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def of(res: ParseResult, cls: type) -> list:
    return [r for r in res.records if isinstance(r, cls)]


def series(res: ParseResult, device: str, counter: str) -> list[PortCounter]:
    return [p for p in of(res, PortCounter) if p.device == device and p.counter == counter]


def test_registered_and_not_mixable() -> None:
    assert by_format("prometheus_api") is prometheus_api
    assert not getattr(prometheus_api, "MIXABLE", False)


def test_range_query_as_sent_one_line() -> None:
    res = prometheus_api.parse(read(RAW), "q.json", host="hint-ignored")
    assert res.format == "prometheus_api" and res.problems == []
    assert {r.host for r in res.records} == {"gpu-a003"}  # the host label wins over the bundle hint
    assert {r.line for r in res.records} == {1}  # Prometheus sends one line
    sym = series(res, "mlx5_0", "symbol_error")
    # first sample, every change, last sample: the climb as written into sysfs, then the flat end
    assert [p.value for p in sym] == [0, 4, 13, 19, 31, 31]
    assert [p.snapshot for p in sym] == list(range(6))
    assert all(p.extended and p.port == 1 and p.lid is None for p in sym)
    times = [datetime.fromisoformat(p.timestamp) for p in sym if p.timestamp]
    assert len(times) == 6 and times == sorted(times) and times[0].tzinfo is not None
    assert (times[-1] - times[0]).total_seconds() == 11.0  # 12 points, step 1 s
    assert [p.value for p in series(res, "mlx5_0", "link_error_recovery")] == [0, 1, 1]
    # flat series: two snapshots, so the extractor can tell "not rising" from "one snapshot"
    assert [p.value for p in series(res, "mlx5_1", "symbol_error")] == [0, 0]
    assert [p.value for p in series(res, "mlx5_0", "link_downed")] == [1, 1]
    assert [p.value for p in series(res, "mlx5_0", "port_xmit_wait")] == [18446, 18446]
    # node_exporter exports the 4-octet PortXmitData words as octets (the sample says 368708271088): back in words,
    # as perfquery and sysfs count them and as the text parser gives them
    assert series(res, "mlx5_0", "port_xmit_data")[-1].value == 92177067772
    assert of(res, RdmaHwCounter) == []  # node_exporter 1.5 exports no mlx5 hw counters


def test_ports_from_state_rate_and_info() -> None:
    res = prometheus_api.parse(read(RAW), "q.json")
    ports = {(p.device, p.port): p for p in of(res, IbPort)}
    assert sorted(ports) == [("mlx5_0", 1), ("mlx5_1", 1)]
    for p in ports.values():
        assert (p.state, p.phys_state, p.rate_gbps, p.firmware, p.ca_type) == (
            "Active", "LinkUp", 400.0, "28.39.1002", "MT4129")
        assert p.text.startswith("node_infiniband_state_id{") and f'device="{p.device}"' in p.text


def test_pretty_file_cites_the_sample_lines() -> None:
    text = read(PRETTY)
    lines = text.split("\n")
    res = prometheus_api.parse(text, PRETTY)
    assert res.problems == []
    raw = prometheus_api.parse(read(RAW), RAW)
    # the same records as the one-line response, only the lines differ
    assert [(type(r), r.host, getattr(r, "counter", None), getattr(r, "value", None)) for r in res.records] == [
        (type(r), r.host, getattr(r, "counter", None), getattr(r, "value", None)) for r in raw.records]
    for p in series(res, "mlx5_0", "symbol_error"):
        cited = lines[p.line - 1]
        ts = datetime.fromisoformat(p.timestamp).timestamp()
        assert json.loads(cited.strip().rstrip(",")) == [round(ts, 3), str(p.value)]
        assert p.text.startswith('node_infiniband_symbol_error_total{device="mlx5_0",host="gpu-a003"')
        assert p.text.endswith(f" {p.value} @{round(ts, 3)}")
    # the labels of the series sit on one line above its samples
    first = series(res, "mlx5_0", "symbol_error")[0]
    metric_line = next(ln for ln in range(first.line - 1, 0, -1) if '"metric"' in lines[ln - 1])
    assert '"node_infiniband_symbol_error_total"' in lines[metric_line - 1]
    assert '"device": "mlx5_0"' in lines[metric_line - 1]


def test_pretty_is_the_same_json() -> None:
    for name in (RAW, "query_instant_two_hcas.json", "var_error_bad_data.json", "var_rate_without_metric_name.json"):
        doc = json.loads(read(name))
        assert json.loads(prometheus_api.pretty(doc)) == doc
    assert prometheus_api.pretty(json.loads(read(RAW))) == read(PRETTY)


def test_instant_query_vector() -> None:
    res = prometheus_api.parse(read("query_instant_two_hcas.json"), "i.json")
    assert res.problems == []
    sym = {p.device: p for p in of(res, PortCounter) if p.counter == "symbol_error"}
    assert (sym["mlx5_0"].value, sym["mlx5_0"].snapshot) == (31, 0)
    assert sym["mlx5_1"].value == 0
    assert len({p.timestamp for p in of(res, PortCounter)}) == 1  # one evaluation time
    assert len(of(res, IbPort)) == 2


def test_function_results_and_errors_are_problems() -> None:
    res = prometheus_api.parse(read("var_rate_without_metric_name.json"), "r.json")
    assert res.records == []
    assert len(res.problems) == 1 and "__name__" in res.problems[0] and res.problems[0].startswith("2 series")
    err = prometheus_api.parse(read("var_error_bad_data.json"), "e.json")
    assert err.records == []
    assert err.problems == ["Prometheus answered an error: bad_data: 1:43: parse error: "
                            "unexpected end of input inside braces"]


def test_truncated_keeps_complete_series() -> None:
    res = prometheus_api.parse(read("var_truncated_in_series.json"), "t.json")
    assert len(res.problems) == 1 and res.problems[0].startswith("truncated: series 33 (from line 550)")
    full = prometheus_api.parse(read(PRETTY), "t.json")
    # every series before the cut is kept with the same records; the cut symbol_error series is dropped
    assert series(res, "mlx5_0", "symbol_error") == []
    kept = [r for r in full.records if r.line < 550]
    assert [r for r in res.records if not isinstance(r, IbPort)] == [r for r in kept if not isinstance(r, IbPort)]
    assert len(of(res, IbPort)) == 2


def test_counter_tables_shared_with_the_text_parser() -> None:
    doc = {"status": "success", "warnings": ["query hit the sample limit"], "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "node_infiniband_legacy_packets_received_total", "device": "mlx5_2", "port": "1",
                    "instance": "gpu-b007.example.org:9100"}, "values": [[100, "5"], [130, "5"]]},
        {"metric": {"__name__": "node_infiniband_port_packets_received_total", "device": "mlx5_2", "port": "1",
                    "instance": "gpu-b007.example.org:9100"}, "values": [[100, "70"], [130, "90"]]},
        {"metric": {"__name__": "node_infiniband_legacy_data_received_bytes_total", "device": "mlx5_2", "port": "1",
                    "instance": "gpu-b007.example.org:9100"}, "values": [[100, "8"]]},
        {"metric": {"__name__": "node_infiniband_np_cnp_packets_sent_total", "device": "mlx5_2", "port": "1",
                    "instance": "gpu-b007.example.org:9100"}, "values": [[100, "10"], [130, "10"], [160, "25"]]},
        {"metric": {"__name__": "node_infiniband_port_transmit_wait_total", "device": "mlx5_2", "port": "1",
                    "instance": "gpu-b007.example.org:9100"}, "values": [[100, "1.5"]]},
        {"metric": {"__name__": "node_load1", "instance": "gpu-b007.example.org:9100"}, "values": [[100, "3"]]},
    ]}}
    res = prometheus_api.parse(prometheus_api.pretty(doc), "m.json")
    pcs = of(res, PortCounter)
    # legacy_* only where the modern metric is missing
    assert [(p.counter, p.value) for p in pcs] == [("port_rcv_packets", 70), ("port_rcv_packets", 90),
                                                    ("port_rcv_data", 2)]  # 8 octets: 2 words
    assert {p.host for p in pcs} == {"gpu-b007.example.org"}  # instance without its port
    hw = of(res, RdmaHwCounter)
    assert [(h.counter, h.value) for h in hw] == [("np_cnp_sent", 10), ("np_cnp_sent", 25)]
    assert [h.line for h in hw] == sorted(h.line for h in hw)
    assert res.problems[0] == "Prometheus warning: query hit the sample limit"
    assert any("non-integer counter value 1.5" in p for p in res.problems)


def test_sniff_claims_its_own_json_only() -> None:
    for name in (RAW, PRETTY, "query_instant_two_hcas.json"):
        assert prometheus_api.sniff(read(name)) >= 90
        assert node_exporter.sniff(read(name)) == 0
    exposition = (DATA.parent / "prometheus_infiniband" / "e2e-output_node_infiniband_excerpt.prom").read_text()
    assert prometheus_api.sniff(exposition) == 0
    assert prometheus_api.sniff('{"entries": [], "pg_config": {}, "version": "2.4"}') == 0
    assert prometheus_api.sniff('{"status": "ok", "results": [1, 2]}') == 0


def test_other_formats_samples_are_not_claimed() -> None:
    others = [f for d in sorted(DATA.parent.iterdir()) if d.is_dir() and d.name != "prometheus_api"
              for f in sorted(d.rglob("*")) if f.is_file() and f.name != "README.md"]
    assert len(others) > 50
    for f in others:
        head = f.read_bytes()[:65536].decode("utf-8", errors="replace")
        assert prometheus_api.sniff(head) < 40, f


def test_pipeline_rising_symbol_errors_locate_the_port(tmp_path: Path) -> None:
    (tmp_path / "prometheus_gpu-a003.json").write_text(read(PRETTY))
    ev = gather([tmp_path])
    assert [(f.format, f.problem) for f in ev.files] == [("prometheus_api", None)]
    f = next(f for f in ev.findings if f.kind == "port_counter_errors" and f.attrs["counter"] == "symbol_error")
    assert (f.location.host, f.location.device, f.location.port) == ("gpu-a003", "mlx5_0", 1)
    assert f.attrs["delta"] == 31 and f.attrs["rising"] is True and f.attrs["window_s"] == 11
    expected_ber = 31 / (400e9 * 11)  # 31 symbol errors in 11 s at the 400 Gb/s node_exporter reported
    assert abs(float(f.attrs["ber"]) - expected_ber) / expected_ber < 1e-3
    diag = triage([tmp_path])
    top = diag.causes[0]
    assert top.id == "link.bad_cable" and top.verdict == "confirmed"
    assert (top.location.host, top.location.device, top.location.port) == ("gpu-a003", "mlx5_0", 1)
    cited = {e.line for e in top.evidence if e.file == "prometheus_gpu-a003.json"}
    lines = read(PRETTY).split("\n")
    assert cited and all(lines[n - 1].strip().startswith("[") for n in cited)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_never_raises_on_text(text: str) -> None:
    res = prometheus_api.parse(text, "x")
    assert isinstance(res, ParseResult)
    assert 0 <= prometheus_api.sniff(text) <= 100


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(read(RAW))))
def test_any_cut_of_a_response_never_raises(cut: int) -> None:
    res = prometheus_api.parse(read(RAW)[:cut], "x")
    assert all(isinstance(r, (PortCounter, IbPort)) for r in res.records)
    if cut < len(read(RAW)):
        assert res.problems  # a cut response says so


def test_timestamps_are_utc_iso() -> None:
    res = prometheus_api.parse(read(RAW), "q.json")
    first = series(res, "mlx5_0", "symbol_error")[0]
    assert first.timestamp == "2026-11-29T16:37:17.246000+00:00"  # [1795970237.246, "0"]
