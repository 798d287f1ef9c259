"""ibdiagnet2.lst / ibutils subnet.lst link lists (diagnose.parsers.ibdiagnet_lst)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import ibdiagnet_lst
from diagnose.parsers._fabric import FabricLink, FabricNode, ibdiag_speed

DATA = Path(__file__).resolve().parent.parent / "data"
REAL = (DATA / "ibdiagnet_lst" / "onenote_2014_sdr_link.lst").read_text()
END = ("{{ {t} Ports:{n} SystemGUID:{g} NodeGUID:{g} PortGUID:{g} VenID:000002c9 DevID:d2f0 Rev:000000a0 {d}"
       "LID:{lid} PN:{pn} }}")


def _line(a: str, b: str, tail: str = "PHY=4x LOG=ACT SPD=50") -> str:
    return f"{a} {b} {tail}"


def test_the_real_line_gives_both_nodes_and_the_cable_with_hex_ports_and_lids() -> None:
    res = ibdiagnet_lst.parse(REAL, "ibdiagnet2.lst")
    assert res.problems == []
    nodes = [r for r in res.records if isinstance(r, FabricNode)]
    links = [r for r in res.records if isinstance(r, FabricLink)]
    assert [(n.guid, n.node_type, n.ports, n.lid, n.description) for n in nodes] == [
        ("0x0002c90300165e60", "CA", 2, None, None),  # the node GUID, not the port GUID ...61 (mlx4)
        ("0x0002c90300688830", "SW", 36, 2, None),  # Ports:24 and LID:0002 are hexadecimal
    ]
    (lk,) = links
    assert (lk.guid, lk.port, lk.peer_guid, lk.peer_port) == ("0x0002c90300165e60", 1, "0x0002c90300688830", 20)
    assert (lk.width, lk.speed, lk.state, lk.phys_state, lk.lid, lk.peer_lid) == ("4X", "SDR", "Active", "LinkUp", 5, 2)


def test_descriptions_states_and_every_speed_string() -> None:
    a = END.format(t="CA", n="01", g="b83fd20300c4e100", d="{gpu-c101 mlx5_0} ", lid="0014", pn="01")
    b = END.format(t="SW", n="28", g="1070fd0300a1b300", d="{MF0;leaf-c1:MQM8700/U1} ", lid="0003", pn="26")
    res = ibdiagnet_lst.parse("\n".join([_line(a, b), _line(b, a, "PHY=2x LOG=INI SPD=100"),
                                         _line(a, b, "PHY=1x LOG=ARM"), _line(a, b, "PHY=4x LOG=DOWN SPD=FDR10")]),
                              "l.lst")
    links = [r for r in res.records if isinstance(r, FabricLink)]
    assert [(lk.width, lk.speed, lk.state) for lk in links] == [
        ("4X", "HDR", "Active"), ("2X", "NDR", "Init"), ("1X", "SDR", "Armed"), ("4X", "FDR10", "Down")]
    assert links[0].description == "gpu-c101 mlx5_0" and links[0].peer_description == "MF0;leaf-c1:MQM8700/U1"
    assert links[0].peer_port == 38 and links[3].phys_state is None
    assert len([r for r in res.records if isinstance(r, FabricNode)]) == 2  # each node once
    assert [ibdiag_speed(s) for s in ("2.5", "5", "10", "14", "25", "50", "100", "200", "?", "EDR20")] == [
        "SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR", None, None]


def test_a_cut_line_is_a_problem_and_the_rest_is_kept() -> None:
    res = ibdiagnet_lst.parse(REAL + REAL[:80] + "\n", "cut.lst")
    assert len([r for r in res.records if isinstance(r, FabricLink)]) == 1
    assert len(res.problems) == 1 and "line 2" in res.problems[0]


def test_sniff_claims_the_list_and_no_other_sample() -> None:
    assert ibdiagnet_lst.sniff(REAL) == 95
    for d in sorted(DATA.iterdir()):
        if not d.is_dir() or d.name == "ibdiagnet_lst":
            continue
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                assert ibdiagnet_lst.sniff(f.read_text(errors="replace")[:8192]) == 0, f


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_never_raises_on_garbage(text: str) -> None:
    res = ibdiagnet_lst.parse(text, "g.lst")
    assert res.format == "ibdiagnet_lst"
    assert 0 <= ibdiagnet_lst.sniff(text) <= 100


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([REAL.strip(), "{ CA Ports:", "PHY=4x LOG=ACT", "{ SW Ports:zz }", "}"]), max_size=20),
       st.integers(0, 2000))
def test_never_raises_on_cut_lists(lines: list[str], cut: int) -> None:
    res = ibdiagnet_lst.parse("\n".join(lines)[:cut], "c.lst")
    assert all(r.line >= 1 for r in res.records)
    assert all(isinstance(r, FabricNode | FabricLink) for r in res.records)
