"""ibroute / dump_lfts.sh / dump_fts (diagnose.parsers.ibroute)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.bundle.session import command_format
from diagnose.parsers import ibroute
from diagnose.parsers._fabric import LftEntry, ToolMessage

DATA = Path(__file__).resolve().parent.parent / "data" / "ibroute"


def _rows(text: str) -> list[LftEntry]:
    return [r for r in ibroute.parse(text, "x.txt").records if isinstance(r, LftEntry)]


def test_real_ibroute_rows_carry_switch_destination_kind_guid_and_name() -> None:
    res = ibroute.parse((DATA / "llnl_opensm_smt_ibroute_G.txt").read_text(), "ibroute.txt")
    rows = [r for r in res.records if isinstance(r, LftEntry)]
    assert len(rows) == 10
    first = rows[0]
    assert (first.switch_guid, first.switch_lid, first.switch_name) == ("0x00066a00ec002eec", 17, "ibcore1 L109")
    assert (first.dest_lid, first.out_port, first.dest_kind, first.dest_guid, first.dest_name) == (
        1, 28, "CA", "0x001175000077ed40", "hype355 qib0")
    assert (rows[-1].dest_lid, rows[-1].out_port) == (0x148, 29)
    assert rows[7].dest_name == "QLogic 12200 GUID=0x00066a00e3003b62" and rows[7].dest_kind == "SW"
    # the paste elides rows: the footer's 171 does not match what was read, and that is said
    assert any("171" in p for p in res.problems)


def test_dump_lfts_blocks_per_switch_dr_path_and_lmc_path_rows() -> None:
    res = ibroute.parse((DATA / "var_dump_lfts_dr_path_lmc1.txt").read_text(), "dump_lfts.txt")
    rows = [r for r in res.records if isinstance(r, LftEntry)]
    assert res.problems == []
    assert len(rows) == 16
    assert {r.switch_name for r in rows} == {"MF0;leaf01:MQM8700/U1", "MF0;spine01:MQM8700/U1"}
    assert all(r.switch_lid is None for r in rows)  # addressed by directed route
    assert {r.host for r in rows} == {"ufm-a1"}
    path = rows[3]  # 0x0004 001 : (path #2 out of 2: portguid ...) repeats its base LID's destination
    assert (path.dest_lid, path.out_port, path.dest_kind, path.dest_guid, path.dest_name) == (
        4, 1, "CA", "0x0002c903000e0b72", "gpu-a101 HCA-1")
    spine = [r for r in rows if r.switch_guid == "0x248a070300f8b120"]
    assert [(r.dest_lid, r.out_port) for r in spine][:2] == [(1, 1), (2, 0)]


def test_brief_table_cut_inside_a_row() -> None:
    res = ibroute.parse((DATA / "var_ibroute_n_cut.txt").read_text(), "ibroute.txt")
    rows = [r for r in res.records if isinstance(r, LftEntry)]
    assert [(r.dest_lid, r.out_port, r.dest_kind) for r in rows] == [(1, 19, None), (4, 0, None), (7, 1, None),
                                                                      (8, 2, None)]
    assert rows[0].switch_lid == 4 and rows[0].host == "gpu-a101"
    assert len(res.problems) == 2 and any("cut" in p for p in res.problems)


def test_illegal_rows_and_multicast_blocks_are_not_routes_and_opensm_dump_is_read() -> None:
    text = (
        "Unicast lids [0x0-0x3] of switch Lid 2 guid 0x0002c90200482d08 (sw-a):\n"
        "  Lid  Out   Destination\n       Port     Info \n"
        "0x0001 255 : (illegal port)\n0x0002 000 : (Switch portguid 0x0002c90200482d08: 'sw-a')\n"
        "0x0003 004 : (unknown node and type)\n3 lids dumped \n"
        "Multicast mlids [0xc000-0xc001] of switch Lid 2 guid 0x0002c90200482d08 (sw-a):\n"
        "            0                   1\n     Ports: 0 1 2\n MLid\n0xc000      x\n1 valid mlids dumped \n"
        "Unicast lids [0x0-0x2] of switch Lid 5 guid 0x0002c90200482e10 ('MF0;leaf02:SX6036/U1'):\n"
        "0x0001 003 # Channel Adapter portguid 0x0002c903000e0b72: 'gpu-a101 HCA-1'\n2 lids dumped\n"
    )
    res = ibroute.parse(text, "lfts.txt")
    rows = [r for r in res.records if isinstance(r, LftEntry)]
    assert [(r.switch_lid, r.dest_lid, r.out_port, r.dest_kind) for r in rows] == [
        (2, 2, 0, "SW"), (2, 3, 4, None), (5, 1, 3, "CA")]
    assert rows[2].switch_name == "MF0;leaf02:SX6036/U1" and rows[2].dest_name == "gpu-a101 HCA-1"
    assert res.problems == []


def test_opensm_routing_dump_rows_and_unreachable_lids() -> None:
    res = ibroute.parse((DATA / "ibutils_ibdm_clusters_osm_fdbs_trimmed.fdbs").read_text(), "osm.fdbs")
    rows = [r for r in res.records if isinstance(r, LftEntry)]
    assert res.problems == [] and len(rows) == 18
    assert {r.switch_guid for r in rows} == {"0x0002c90109fb0000", "0x0002c90109fb3200"}
    assert (rows[0].dest_lid, rows[0].out_port, rows[0].dest_kind, rows[0].switch_name) == (1, 5, None, None)
    assert (rows[9].dest_lid, rows[9].out_port) == (0xA, 5)  # upper-case hex LIDs
    res = ibroute.parse((DATA / "var_ibdiagnet2_fdbs_unreachable.fdbs").read_text(), "ibdiagnet2.fdbs")
    (unr,) = [r for r in res.records if isinstance(r, ToolMessage)]
    assert (unr.line, unr.level, unr.message) == (3, "error", "LID 1 UNREACHABLE from switch 0x0002c9030068ec10")
    assert len([r for r in res.records if isinstance(r, LftEntry)]) == 9 and res.problems == []


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 900))
def test_any_cut_of_the_opensm_dump_parses_without_problems(cut: int) -> None:
    text = (DATA / "ibutils_ibdm_clusters_osm_fdbs_trimmed.fdbs").read_text()[:cut]
    res = ibroute.parse(text, "cut.fdbs")
    assert all(isinstance(r, LftEntry) and r.out_port >= 0 for r in res.records)


def test_commands_map_to_the_format() -> None:
    for cmd in ("ibroute", "dump_lfts.sh", "/usr/sbin/dump_fts"):
        assert command_format(cmd, "4") == "ibroute", cmd


def test_sniff_is_zero_on_other_formats_samples() -> None:
    assert ibroute.sniff((DATA / "llnl_opensm_smt_ibroute_G.txt").read_text()) >= 90
    for d in sorted(DATA.parent.iterdir()):
        if not d.is_dir() or d.name == "ibroute":
            continue
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                assert ibroute.sniff(f.read_text(errors="replace")[:8192]) == 0, f


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_never_raises_on_garbage(text: str) -> None:
    res = ibroute.parse(text, "g.txt")
    assert res.format == "ibroute"
    assert 0 <= ibroute.sniff(text) <= 100


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3000))
def test_any_cut_of_a_real_table_parses_a_prefix(cut: int) -> None:
    full = (DATA / "var_dump_lfts_dr_path_lmc1.txt").read_text()
    rows = _rows(full[:cut])
    whole = _rows(full)
    assert len(rows) <= len(whole)
    keep = max(len(rows) - 1, 0)  # the last row may be the cut one
    assert [(r.dest_lid, r.out_port) for r in rows[:keep]] == [(r.dest_lid, r.out_port) for r in whole[:keep]]
