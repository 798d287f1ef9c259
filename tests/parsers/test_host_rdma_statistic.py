"""rdma statistic parser against tests/data/rdma_statistic (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import rdma_statistic
from diagnose.parsers._host import RdmaHwCounter
from diagnose.parsers._ib import ToolError

DATA = Path(__file__).resolve().parents[1] / "data" / "rdma_statistic"
LORE = "lore_netdev_20190710072455.9125-1-leon_rdma_stat_show_and_p.txt"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def hw(res) -> list[RdmaHwCounter]:  # type: ignore[no-untyped-def]
    return [r for r in res.records if isinstance(r, RdmaHwCounter)]


def test_lore_wrapped_one_line_and_pretty_forms() -> None:
    res = rdma_statistic.parse(read(LORE), "rdma.txt")
    assert res.format == "rdma_statistic" and res.problems == []
    counters = hw(res)
    assert len(counters) == 42  # 21 counters, printed twice (one-line form, then -p)
    one_line, pretty = counters[:21], counters[21:]
    assert [c.counter for c in one_line] == [c.counter for c in pretty]
    assert one_line[0] == RdmaHwCounter(
        source="rdma.txt",
        line=2,
        text="link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 rx_atomic_requests",
        host="server",
        device="mlx5_0",
        port=1,
        counter="rx_write_requests",
        value=0,
    )
    # the e-mail wrapped the line between a name and its value: the counter is cited where its name is
    atomic = one_line[2]
    assert (atomic.counter, atomic.line) == ("rx_atomic_requests", 2)
    assert (one_line[-1].counter, one_line[-1].line) == ("np_cnp_sent", 8)
    assert [(c.counter, c.line) for c in pretty[:2]] == [("rx_write_requests", 12), ("rx_read_requests", 13)]
    assert (pretty[-1].counter, pretty[-1].line, pretty[-1].text) == ("np_cnp_sent", 32, "\tnp_cnp_sent 0")


def test_one_line_ports_dev_scope_qp_and_mode_lines() -> None:
    res = rdma_statistic.parse(read("var_one_line_ports_dev_scope_qp_and_mode.txt"), "r")
    assert res.problems == []
    by = {(c.device, c.port, c.counter): c for c in hw(res)}
    assert len(hw(res)) == 29 + 12 + 1  # qp show / qp mode lines are not port counters
    assert by[("mlx5_0", 1, "np_ecn_marked_roce_packets")].value == 21278189006
    assert by[("mlx5_0", 1, "np_cnp_sent")].value == 1052612505
    assert by[("mlx5_0", 1, "out_of_sequence")].value == 1811101
    assert by[("mlx5_0", 1, "local_ack_timeout_err")].line == 2
    assert by[("mlx5_2", None, "rx_write_requests")].value == 5  # `link mlx5_2/-`
    assert {c.host for c in hw(res)} == {"gpu-node-07"}


def test_json_pretty() -> None:
    res = rdma_statistic.parse(read("var_json_pretty.json"), "r")
    assert res.problems == []
    got = [(c.device, c.port, c.counter, c.value, c.line) for c in hw(res)]
    assert got[:2] == [("mlx5_0", 1, "rx_write_requests", 2402134794, 5), ("mlx5_0", 1, "out_of_sequence", 1811101, 6)]
    assert ("mlx5_1", 1, "np_cnp_sent", 0, 17) in got and len(got) == 10
    assert rdma_statistic.sniff(read("var_json_pretty.json")) >= 40


def test_truncated_crlf_and_errors() -> None:
    res = rdma_statistic.parse(read("var_truncated_wrapped_line.txt"), "r")
    assert [c.counter for c in hw(res)] == ["rx_write_requests", "rx_read_requests"]
    assert res.problems == ["truncated: counter 'rx_atomic_requests' of mlx5_0 has no value"]
    crlf = rdma_statistic.parse(read(LORE).replace("\n", "\r\n"), "r")
    assert crlf.problems == [] and len(hw(crlf)) == 42
    err = rdma_statistic.parse("error: Operation not supported\n", "r")
    assert [(e.tool, e.message) for e in err.records if isinstance(e, ToolError)] == [
        ("rdma", "error: Operation not supported")
    ]
    link_show = "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0np0\n"
    assert rdma_statistic.sniff(link_show) == 0  # `rdma link show`, not statistics
