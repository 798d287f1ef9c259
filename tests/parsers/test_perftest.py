"""perftest parser against tests/data/perftest (see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.parsers import perftest
from diagnose.parsers.perftest import PerftestError, PerftestResult, PerftestRun

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"


def parse(name: str) -> tuple[list[PerftestRun], list[PerftestResult], list[PerftestError], list[str]]:
    res = perftest.parse((DATA / name).read_text(encoding="utf-8"), name)
    assert res.format == "perftest"
    return ([r for r in res.records if isinstance(r, PerftestRun)],
            [r for r in res.records if isinstance(r, PerftestResult)],
            [r for r in res.records if isinstance(r, PerftestError)], res.problems)


def test_ib_server_client_and_latency_runs_with_hosts_from_the_prompts() -> None:
    runs, rows, errs, problems = parse("felixfu520_ib_md_mlx4_fdr10_write_bw_lat.txt")
    assert problems == []
    assert [(r.run_index, r.host, r.tool, r.test, r.role, r.peer) for r in runs] == [
        (0, "node01", "ib_write_bw", "RDMA_Write BW", "server", None),
        (1, "node02", "ib_write_bw", "RDMA_Write BW", "client", "192.168.33.11"),
        (2, "node01", "ib_write_lat", "RDMA_Write Latency", "server", None),
    ]
    assert {(r.device, r.mtu, r.link_type, r.transport, r.connection, r.qps, r.gid_index) for r in runs} == {
        ("mlx4_0", 2048, "IB", "IB", "RC", 1, None)}
    bw = [r for r in rows if r.kind == "bw"]
    # 4508.79 MB/sec (2^20 bytes) = 37.82 Gb/s, on both ends of the same transfer
    assert [(r.run_index, r.bytes, r.iterations, r.unit, round(r.bw_avg_gbps, 2)) for r in bw] == [
        (0, 65536, 5000, "MB/sec", 37.82), (1, 65536, 5000, "MB/sec", 37.82)]
    lat = [r for r in rows if r.kind == "lat"]
    assert [(r.bytes, r.t_min_us, r.t_typical_us, r.p99_us, r.p999_us) for r in lat] == [(2, 0.96, 0.98, 1.0, 1.25)]
    # the CPU-frequency warnings between the table header and the row are warnings, not rows
    assert [(e.run_index, e.line) for e in errs if e.kind == "cpu_freq"] == [(1, 51), (2, 78), (2, 79)]


def test_roce_latency_run_indented_in_markdown() -> None:
    runs, rows, errs, problems = parse("spiderpool_rdma_roce_zh_read_lat_sriov.txt")
    assert problems == []
    (run,) = runs
    assert (run.test, run.device, run.mtu, run.link_type, run.gid_index, run.rdma_cm, run.kind) == (
        "RDMA_Read Latency", "mlx5_5", 1024, "Ethernet", 2, False, "lat")
    assert [(r.bytes, r.t_avg_us, r.t_stdev_us, r.p999_us) for r in rows] == [(2, 6.82, 0.78, 20.37)]


def test_gbits_table_and_a_cut_paste() -> None:
    runs, rows, _, problems = parse("perftest_issue132_write_bw_ib_gbits.txt")
    assert problems == []
    assert (runs[0].host, runs[0].peer, runs[0].mtu, runs[0].link_type) == ("node3", "node1", 4096, "IB")
    assert [r.bytes for r in rows] == [2, 4, 8, 16] and rows[0].bw_avg_gbps == 0.042185 and rows[0].unit == "Gb/sec"
    runs, rows, _, _ = parse("perftest_pr342_write_bw_rdma_cm_roce_gbits.txt")
    assert (runs[0].rdma_cm, runs[0].data_exchange, runs[0].gid_index) == (True, "rdma_cm", 0)
    assert [(r.bytes, r.bw_peak_gbps, r.bw_avg_gbps) for r in rows] == [(65536, 0.0, 42.31)]
    cut = perftest.parse((DATA / "perftest_pr342_write_bw_rdma_cm_roce_gbits.txt").read_text() + " 65536      247166\n", "x")
    assert cut.problems and cut.problems[0].startswith("truncated: result row cut short")


@pytest.mark.parametrize(("name", "host", "role"), [
    ("perftest_issue31_use_cuda_mr_failed.txt", "u1", "server"),
    ("perftest_issue126_use_cuda_client_mr_failed.txt", "rdma-cuda-test-pod-1", "client"),
])
def test_gpu_buffer_registration_failures(name: str, host: str, role: str) -> None:
    runs, rows, errs, _ = parse(name)
    assert [(r.host, r.use_cuda, r.role, r.test) for r in runs] == [(host, True, role, None)]
    assert rows == []
    (mr,) = [e for e in errs if e.kind == "mr"]  # one event, though perftest prints three lines for it
    assert mr.use_cuda and mr.text == "Couldn't allocate MR" and mr.host == host


def test_cuda_device_and_roce_mtu_1024_header() -> None:
    runs, _, _, _ = parse("perftest_pr21_use_cuda_roce_mtu1024.txt")
    (run,) = runs
    assert (run.use_cuda, run.mtu, run.link_type, run.gid_index, run.role) == (True, 1024, "Ethernet", 3, "server")
    runs, _, _, _ = parse("perftest_issue126_use_cuda_client_mr_failed.txt")
    assert runs[0].cuda_device == 0


def test_completion_errors_old_and_new_format() -> None:
    _, _, errs, _ = parse("softiwarp_issue27_status12.txt")
    assert [(e.kind, e.status, e.vendor_err, e.side) for e in errs] == [("completion", 12, 0x81, "client")]
    _, _, errs, _ = parse("perftest_issue173_failed_status4.txt")
    assert [(e.kind, e.status, e.vendor_err, e.side) for e in errs if e.kind == "completion"] == [
        ("completion", 4, 0x51, "client")]
    runs, _, errs, problems = parse("var_status12_retry_exceeded_new_format.txt")
    assert problems == []  # a table header followed by the failure is a failed run, not a truncated file
    (c,) = [e for e in errs if e.kind == "completion"]
    assert (c.status, c.status_text, c.vendor_err, c.host) == (12, "transport retry counter exceeded", 0x81, "gpu-node-07")
    assert runs[0].peer == "10.0.0.2"


def test_connection_failure() -> None:
    runs, _, errs, _ = parse("perftest_pr228_couldnt_connect.txt")
    assert (runs[0].peer, runs[0].role) == ("192.168.125.211", "client")
    assert [(e.kind, e.detail) for e in errs] == [("connect", "192.168.125.211:18515"), ("socket", None)]


def test_send_bw_header_after_a_bash_trace_line() -> None:
    runs, _, _, _ = parse("perftest_issue82_send_bw_roce_gid3.txt")
    assert [(r.tool, r.test, r.device, r.gid_index, r.peer) for r in runs] == [
        ("ib_send_bw", "Send BW", "mlx5_bond_0", 3, "192.168.219.6")]


def test_a_block_inside_prose_and_other_formats() -> None:
    body = (DATA / "perftest_pr342_write_bw_rdma_cm_roce_gbits.txt").read_text()
    text = "We see low bandwidth between the two hosts. I tested with ib_write_bw and it worked fine.\n\n" + body
    assert perftest.sniff(text) >= 90
    res = perftest.parse(text, "report.txt")
    assert [type(r).__name__ for r in res.records] == ["PerftestRun", "PerftestResult"]
    assert res.records[0].line == 4  # the title line, counted in the whole file
    assert perftest.sniff("I tested with ib_write_bw and it worked fine.\n") == 0


def test_never_raises_on_damage() -> None:
    for t in ("", "\x00\x01", " #bytes     #iterations    BW peak[Gb/sec]\n 65536 x\n", "Failed status 99999: wr_id"):
        assert perftest.parse(t, "x").format == "perftest"
