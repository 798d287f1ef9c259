"""smpquery sl2vl / smpquery vlarb parsers against tests/data/smpquery_sl2vl and tests/data/smpquery_vlarb."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.bundle.session import command_format
from diagnose.models.records import ParseResult
from diagnose.parsers import registry, smpquery_sl2vl, smpquery_vlarb
from diagnose.parsers._ib import ToolError
from diagnose.parsers.smpquery_sl2vl import Sl2VlEntry
from diagnose.parsers.smpquery_vlarb import VlArbEntry

DATA = Path(__file__).resolve().parents[1] / "data"
MODULES = (smpquery_sl2vl, smpquery_vlarb)
TUTORIAL = "rdma_ib_tutorial_16_qos@c9e163f_"


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_text(encoding="utf-8")


def samples(fmt: str) -> list[Path]:
    return sorted(p for p in (DATA / fmt).iterdir() if p.is_file() and p.suffix != ".md")


def rows(res: ParseResult) -> list[Sl2VlEntry]:
    return [r for r in res.records if isinstance(r, Sl2VlEntry)]


def arbs(res: ParseResult) -> list[VlArbEntry]:
    return [r for r in res.records if isinstance(r, VlArbEntry)]


# ----------------------------------------------------------------------------------------------- sl2vl


def test_switch_rows_for_out_port_0_with_prompt_and_simulator_warning() -> None:
    res = smpquery_sl2vl.parse(read("smpquery_sl2vl", TUTORIAL + "lines287-299_switch_lid1_out0.txt"), "s.txt")
    assert res.format == "smpquery_sl2vl" and res.problems == []
    got = rows(res)
    assert [(r.lid, r.in_port, r.out_port) for r in got] == [(1, i, 0) for i in range(9)]
    assert got[0].vls == (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7)  # SL 15 -> VL 7 (OpenSM default)
    assert {r.host for r in got} == {"net21"} and (got[0].source, got[0].line) == ("s.txt", 5)
    assert got[0].text.startswith("ports: in  0, out  0:")
    warn = [r for r in res.records if isinstance(r, ToolError)]
    assert len(warn) == 1 and warn[0].line == 2 and "sim_connect" in warn[0].message


def test_hca_and_switch_tables_after_qos_sl2vl() -> None:
    res = smpquery_sl2vl.parse(read("smpquery_sl2vl", TUTORIAL + "lines631-651_qos_sl2vl_hca_and_switch.txt"), "s")
    assert res.problems == []
    got = rows(res)
    assert (got[0].lid, got[0].in_port, got[0].out_port) == (2, 0, 0)
    assert got[0].vls == (0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2)  # qos_sl2vl 0,0,0,0,0,0,1,...
    sw = got[1:]
    assert len(sw) == 9 and {(r.lid, r.out_port) for r in sw} == {(1, 1)}
    assert all(r.vls == got[0].vls for r in sw)


def test_mod_two_mapping_out_port_1() -> None:
    got = rows(smpquery_sl2vl.parse(read("smpquery_sl2vl", TUTORIAL + "lines305-317_switch_lid1_out1.txt"), "s"))
    assert all(r.vls == (0, 1) * 8 and r.out_port == 1 for r in got) and len(got) == 9


def test_cut_paste_without_header_and_a_cut_row() -> None:
    res = smpquery_sl2vl.parse(read("smpquery_sl2vl", "var_cut_row_no_header.txt"), "s", host="hint")
    got = rows(res)
    assert [(r.lid, r.in_port, r.out_port, r.host) for r in got] == [(None, i, 17, "hint") for i in (3, 4, 5)]
    assert any("without its '# SL2VL table:' header" in p for p in res.problems)
    assert any("line 4" in p and "12 of 16" in p for p in res.problems)


def test_guid_from_the_command_line_and_indented_paste() -> None:
    text = (
        "$ smpquery -G sl2vl 0xB8599F0300FD1A00 33\n"
        "   # SL2VL table: Lid 3\n"
        "   #                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|\n"
        "   ports: in  0, out 33: | 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|\r\n"
    )
    res = smpquery_sl2vl.parse(text, "s")
    (r,) = rows(res)
    assert (r.lid, r.guid, r.in_port, r.out_port, r.vls[9]) == (3, "0xb8599f0300fd1a00", 0, 33, 1)
    assert res.problems == []


# ----------------------------------------------------------------------------------------------- vlarb


def test_default_hca_tables() -> None:
    res = smpquery_vlarb.parse(read("smpquery_vlarb", TUTORIAL + "lines323-331_hca_lid2_port1_default.txt"), "v")
    assert res.problems == []
    got = arbs(res)
    low = [(e.vl, e.weight) for e in got if e.table == "low"]
    high = [(e.vl, e.weight) for e in got if e.table == "high"]
    assert low == [(0, 0), (1, 4), (0, 4), (1, 4), (0, 4), (1, 4), (0, 4), (1, 4)]
    assert high == [(0, 4)] + [(1, 0), (0, 0)] * 3 + [(1, 0)]
    assert {(e.lid, e.port, e.cap, e.host) for e in got} == {(2, 1, 8, "net21")}
    assert [e.index for e in got if e.table == "low"] == list(range(8))
    assert got[0].line == 6 and got[0].text.startswith("WEIGHT:")


def test_hex_weights_after_qos_vlarb_options() -> None:
    got = arbs(smpquery_vlarb.parse(read("smpquery_vlarb", TUTORIAL + "lines662-681_qos_vlarb_hca_and_switch.txt"),
                                    "v"))
    for lid in (2, 1):
        low = [(e.vl, e.weight) for e in got if e.lid == lid and e.table == "low" and e.weight]
        high = [(e.vl, e.weight) for e in got if e.lid == lid and e.table == "high" and e.weight]
        assert low == [(1, 28), (2, 4)] and high == [(0, 4)]  # qos_vlarb_low 1:28,2:4 / qos_vlarb_high 0:4


def test_second_block_above_32_entries_and_bsp0_port() -> None:
    res = smpquery_vlarb.parse(read("smpquery_vlarb", "var_cap64_two_blocks_bsp0.txt"), "v")
    assert res.problems == []
    got = arbs(res)
    low = [e for e in got if e.table == "low"]
    assert len(low) == 40 and [e.index for e in low] == list(range(40)) and low[-1].line == 10
    assert {(e.port, e.guid, e.lid, e.host) for e in got} == {(33, "0x98039b0300a1c2d0", 7, "ufm01")}


def test_cut_weight_row_and_weight_without_table() -> None:
    text = ("WEIGHT: |0x4 |0x0 |\n"
            "# VLArbitration tables: Lid 9 port 3 LowCap 8 HighCap 8\n"
            "# Low priority VL Arbitration Table:\n"
            "VL    : |0x0 |0x1 |0x2 |0x3 |\n"
            "WEIGHT: |0x40|0x0 |\n")
    res = smpquery_vlarb.parse(text, "v")
    assert [(e.vl, e.weight, e.line) for e in arbs(res)] == [(0, 64, 5), (1, 0, 5)]
    assert any("line 1" in p for p in res.problems) and any("2 weights for 4 VLs" in p for p in res.problems)


# ----------------------------------------------------------------------------------------------- sniff


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_claims_every_own_sample(mod) -> None:
    for path in samples(mod.FORMAT):
        assert mod.sniff(path.read_text(encoding="utf-8")) >= 60, path.name


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_rejects_every_other_sample_folder(mod) -> None:
    for folder in sorted(d for d in DATA.iterdir() if d.is_dir() and d.name != mod.FORMAT):
        for path in samples(folder.name):
            head = path.read_bytes().decode("utf-8", errors="replace")[:65536]
            assert mod.sniff(head) < 40, f"{mod.FORMAT} claims {folder.name}/{path.name}"


def test_other_parsers_do_not_claim_the_samples() -> None:
    for mod in MODULES:
        for path in samples(mod.FORMAT):
            head = path.read_text(encoding="utf-8")
            for other in registry():
                if getattr(other, "BINARY", False) or other.FORMAT in {m.FORMAT for m in MODULES}:
                    continue
                assert other.sniff(head) < 40, f"{other.FORMAT} claims {mod.FORMAT}/{path.name}"


def test_a_loop_capture_with_both_tables_is_read_by_both() -> None:
    text = (read("smpquery_sl2vl", TUTORIAL + "lines305-317_switch_lid1_out1.txt")
            + read("smpquery_vlarb", TUTORIAL + "lines323-331_hca_lid2_port1_default.txt"))
    assert smpquery_sl2vl.sniff(text) >= 90 and smpquery_vlarb.sniff(text) >= 90
    assert smpquery_sl2vl.MIXABLE and smpquery_vlarb.MIXABLE
    # each parser keeps to its own table: no record twice when both run on the file
    assert not arbs(smpquery_sl2vl.parse(text, "x")) and not rows(smpquery_vlarb.parse(text, "x"))
    assert len(rows(smpquery_sl2vl.parse(text, "x"))) == 9 and len(arbs(smpquery_vlarb.parse(text, "x"))) == 16


def test_session_commands_pick_the_table_parsers() -> None:
    assert command_format("smpquery", "sl2vl 3 33") == "smpquery_sl2vl"
    assert command_format("/usr/sbin/smpquery", "SL2VLTable 1 1") == "smpquery_sl2vl"
    assert command_format("smpquery", "-G vlarb 0x98039b0300a1c2d0 33") == "smpquery_vlarb"
    assert command_format("smpquery", "VLArbitration 2 1") == "smpquery_vlarb"
    assert command_format("smpquery", "portinfo 3 1") == "smpquery"


# ----------------------------------------------------------------------------------------------- robustness

_LINES = sorted({ln for m in MODULES for p in samples(m.FORMAT) for ln in p.read_text(encoding="utf-8").split("\n")})
_mixed = st.lists(st.one_of(st.sampled_from(_LINES), st.text(max_size=40)), max_size=40).map("\n".join)


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), _mixed))
def test_parse_never_raises_and_sniff_is_bounded(mod, text: str) -> None:
    assert 0 <= mod.sniff(text) <= 100
    res = mod.parse(text, "f.txt", host="h")
    assert isinstance(res, ParseResult) and res.format == mod.FORMAT
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
    nlines = text.count("\n") + 1
    assert all(r.source == "f.txt" and 1 <= r.line <= nlines for r in res.records)
    for r in rows(res):
        assert len(r.vls) == 16 and all(0 <= v <= 15 for v in r.vls)
    for e in arbs(res):
        assert e.table in ("low", "high") and 0 <= e.vl <= 15 and e.weight >= 0
