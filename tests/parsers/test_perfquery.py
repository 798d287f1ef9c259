"""perfquery parser against the real samples in tests/data/perfquery (see its README)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import perfquery
from diagnose.parsers._ib import ToolError
from diagnose.parsers.perfquery import PortCounter

DATA = Path(__file__).resolve().parents[1] / "data"


def read(name: str) -> str:
    return (DATA / "perfquery" / name).read_text(encoding="utf-8")


def counters(res: ParseResult) -> list[PortCounter]:
    return [r for r in res.records if isinstance(r, PortCounter)]


def index(res: ParseResult) -> dict[tuple[int | None, str, int], PortCounter]:
    return {(c.port, c.counter, c.snapshot): c for c in counters(res)}


def sample_files(fmt: str) -> list[Path]:
    return sorted(p for p in (DATA / fmt).iterdir() if p.is_file() and p.suffix != ".md")


def test_schema_is_exact() -> None:
    assert [f.name for f in dataclasses.fields(PortCounter)] == [
        "source",
        "line",
        "text",
        "host",
        "lid",
        "guid",
        "port",
        "counter",
        "value",
        "extended",
        "snapshot",
        "timestamp",
        "device",
    ]


def test_hca_extended_counters() -> None:
    res = perfquery.parse(read("perfquery_x_extended_0x7cfe9003003b4bde_hca.out"), "pq.out", host="node-a")
    assert res.format == "perfquery" and res.problems == []
    assert len(counters(res)) == 22  # 25 value lines minus PortSelect, CounterSelect, CounterSelect2
    sym = index(res)[(1, "symbol_error", 0)]
    assert sym == PortCounter(
        source="pq.out",
        line=13,
        text="SymbolErrorCounter:..............0",
        host="node-a",
        lid=134,
        guid=None,
        port=1,
        counter="symbol_error",
        value=0,
        extended=True,
        snapshot=0,
        timestamp=None,
    )
    assert index(res)[(1, "port_xmit_data", 0)].value == 9049592493976
    assert index(res)[(1, "port_xmit_data", 0)].line == 4
    assert index(res)[(1, "multicast_rcv_packets", 0)].value == 3732158589
    assert index(res)[(1, "qp1_dropped", 0)].line == 26
    assert not {"PortSelect", "CounterSelect", "CounterSelect2"} & {c.counter for c in counters(res)}


def test_switch_port_with_discards() -> None:
    res = perfquery.parse(read("perfquery_x_extended_0x506b4b03005c2740.out"), "s")
    ix = index(res)
    assert {c.lid for c in counters(res)} == {2052}
    assert (ix[(1, "link_downed", 0)].value, ix[(1, "link_downed", 0)].line) == (1, 15)
    assert ix[(1, "port_rcv_switch_relay_errors", 0)].value == 7
    assert ix[(1, "port_xmit_discards", 0)].value == 20046
    assert ix[(1, "port_xmit_wait", 0)].value == 41864608


def test_two_port_blocks() -> None:
    res = perfquery.parse(read("perfquery_x_extended_0x7cfe9003009ce5b0.out"), "s")
    assert res.problems == [] and len(counters(res)) == 44
    ix = index(res)
    assert ix[(1, "port_xmit_wait", 0)].value == 22730501
    assert (ix[(2, "port_xmit_wait", 0)].value, ix[(2, "port_xmit_wait", 0)].line) == (36510964, 51)
    assert {c.snapshot for c in counters(res)} == {0}


def test_rcv_error_details_are_canonical_counters() -> None:
    text = read("perfquery_E_rcverr_0x7cfe9003009ce5b0-1.out")
    assert perfquery.sniff(text) >= 40
    res = perfquery.parse(text, "s")
    assert res.problems == []
    got = {(r.counter, r.value, r.line, r.lid, r.port) for r in res.records}
    assert got == {
        ("port_local_physical_errors", 0, 4, 1719, 1),
        ("port_malformed_packet_errors", 0, 5, 1719, 1),
        ("port_buffer_overrun_errors", 0, 6, 1719, 1),
        ("port_dlid_mapping_errors", 0, 7, 1719, 1),
        ("port_vl_mapping_errors", 0, 8, 1719, 1),
        ("port_looping_errors", 0, 9, 1719, 1),
    }


def test_two_snapshots_with_date_and_guid() -> None:
    res = perfquery.parse(read("var_two_snapshots_with_date.txt"), "s", host="ignored")
    assert res.problems == []
    ix = index(res)
    first, second = ix[(1, "symbol_error", 0)], ix[(1, "symbol_error", 1)]
    assert (first.value, first.timestamp, first.line) == (0, "Tue Mar 26 13:57:26 UTC 2024", 16)
    assert (second.value, second.timestamp, second.line) == (12, "Tue Mar 26 13:58:26 UTC 2024", 45)
    assert ix[(1, "link_downed", 1)].value - ix[(1, "link_downed", 0)].value == 1
    assert ix[(1, "port_xmit_data", 1)].value - ix[(1, "port_xmit_data", 0)].value == 250000000
    assert {c.guid for c in counters(res)} == {"0x7cfe9003003b4bde"}
    assert {c.host for c in counters(res)} == {"gpu-node-07"}


def test_basic_counters_are_not_extended() -> None:
    res = perfquery.parse(read("var_basic_counters_saturated.txt"), "s")
    assert res.problems == []
    assert {c.extended for c in counters(res)} == {False}
    ix = index(res)
    assert ix[(1, "port_xmit_data", 0)].value == 4294967295
    assert ix[(1, "symbol_error", 0)].value == 65535
    assert ix[(1, "port_rcv_errors", 0)].value == 17
    assert "qp1_dropped" in {c.counter for c in counters(res)}


def test_truncated_block() -> None:
    res = perfquery.parse(read("var_truncated_in_port2.txt"), "s")
    assert len([c for c in counters(res) if c.port == 1]) == 22
    assert len([c for c in counters(res) if c.port == 2]) == 14
    assert len(res.problems) == 1 and res.problems[0].startswith(
        "truncated: block for Lid 1719 port 2 ends early"
    )


def test_iso_timestamps_aggregate_port_local_portid_and_errors() -> None:
    text = (
        "2024-03-26T13:57:26+00:00\n"
        "# Port counters: Lid 32 port 255 (CapMask: 0x1400)\n"
        "PortSelect:......................255\n"
        "SymbolErrorCounter:..............5\n"
        "# 2024-03-26T14:00:00Z\n"
        "# Port extended counters: local port 1 (CapMask: 0x5A00 CapMask2: 0x0000000)\n"
        "PortXmitWait:....................9\n"
        "ibwarn: [12345] mad_rpc: _do_madrpc failed; dport (Lid 7)\n"
        "perfquery: iberror: failed: perfquery\n"
    )
    res = perfquery.parse(text, "s")
    assert res.problems == []
    agg, loc = counters(res)
    assert (agg.lid, agg.port, agg.extended, agg.value, agg.timestamp) == (
        32,
        None,
        False,
        5,
        "2024-03-26T13:57:26+00:00",
    )
    assert (loc.lid, loc.port, loc.extended, loc.timestamp) == (None, 1, True, "2024-03-26T14:00:00Z")
    assert [(e.line, e.tool) for e in res.records if isinstance(e, ToolError)] == [
        (8, "perfquery"),
        (9, "perfquery"),
    ]


def test_crlf_gives_the_same_records() -> None:
    text = read("perfquery_x_extended_0x7cfe9003009ce5b0.out")
    a = [(c.line, c.port, c.counter, c.value) for c in counters(perfquery.parse(text, "s"))]
    b = [
        (c.line, c.port, c.counter, c.value)
        for c in counters(perfquery.parse(text.replace("\n", "\r\n"), "s"))
    ]
    assert a == b


def test_sniff_own_and_others() -> None:
    for path in sample_files("perfquery"):
        assert perfquery.sniff(path.read_text(encoding="utf-8")) >= 40, path.name
    others = [d for d in sorted(DATA.iterdir()) if d.is_dir() and d.name != "perfquery"]
    for folder in others:
        for path in sample_files(folder.name):
            head = path.read_text(encoding="utf-8", errors="replace")[:65536]
            assert perfquery.sniff(head) < 40, f"perfquery claims {folder.name}/{path.name}"
    smpquery = (
        "# Port info: Lid 2 port 1\nLinkState:.......................Active\n"
        "PhysLinkState:...................LinkUp\nLinkWidthActive:.................4X\n"
    )
    ibqueryerrors = (
        'Errors for 0x7cfe9003009ce5b0 "SwitchIB Mellanox Technologies"\n'
        "   GUID 0x7cfe9003009ce5b0 port 1: [SymbolErrorCounter == 5] [LinkDownedCounter == 1]\n"
        "## Summary: 1 nodes checked, 1 bad nodes found\n"
    )
    assert perfquery.sniff(smpquery) == 0 and perfquery.sniff(ibqueryerrors) == 0


_SAMPLE_LINES = sorted(
    {line for p in sample_files("perfquery") for line in p.read_text(encoding="utf-8").split("\n")}
)
_mixed_text = st.lists(st.one_of(st.sampled_from(_SAMPLE_LINES), st.text(max_size=40)), max_size=40).map(
    "\n".join
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), _mixed_text))
def test_parse_never_raises_and_sniff_is_bounded(text: str) -> None:
    score = perfquery.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100
    res = perfquery.parse(text, "f.txt")
    assert isinstance(res, ParseResult) and res.format == "perfquery"
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
    nlines = text.count("\n") + 1
    assert all(1 <= r.line <= nlines for r in res.records)
    assert all(c.snapshot >= 0 and c.value >= 0 for c in counters(res))


@pytest.mark.parametrize("value", ["0x10", "-1", "12abc"])
def test_unparseable_value_is_a_problem(value: str) -> None:
    res = perfquery.parse(
        f"# Port counters: Lid 1 port 1 (CapMask: 0x00)\nSymbolErrorCounter:....{value}\n", "s"
    )
    assert res.records == [] and len(res.problems) == 1 and "unparseable value" in res.problems[0]


def test_a_value_wider_than_any_64_bit_counter_is_a_located_problem_and_the_block_is_still_read() -> None:
    text = ("# Port extended counters: Lid 12 port 1 (CapMask: 0x5A00)\n"
            "PortSelect:......................1\n"
            "PortXmitData:...................." + "9" * 5000 + "\n"
            "PortRcvData:.....................123456\n"
            "SymbolErrorCounter:.............." + "1" * 21 + "\n")
    res = perfquery.parse(text, "perfquery.txt")
    got = {c.counter: c.value for c in counters(res)}
    assert got == {"port_rcv_data": 123456}  # the two out-of-range values left out, not the block
    assert any(p.startswith("line 3: value of 5000 digits for PortXmitData") for p in res.problems), res.problems
    assert any(p.startswith("line 5: value of 21 digits") for p in res.problems), res.problems
    assert not any("parser error" in p for p in res.problems)
