"""ibswitches / ibhosts / ibnodes (diagnose.parsers.ibnodes)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.bundle.session import command_format
from diagnose.evidence.context import Context
from diagnose.evidence.frames import build_frames
from diagnose.evidence.names import label, name_for, node
from diagnose.parsers import ibnodes
from diagnose.parsers._fabric import FabricNode
from diagnose.parsers._ib import ToolError

DATA = Path(__file__).resolve().parent.parent / "data"


def _nodes(text: str) -> list[FabricNode]:
    return [r for r in ibnodes.parse(text, "x.txt").records if isinstance(r, FabricNode)]


def test_switch_and_ca_lines_give_type_guid_ports_description_and_switch_lid() -> None:
    text = (DATA / "ibnodes" / "var_ibnodes_prompt.txt").read_text()
    res = ibnodes.parse(text, "ibnodes.txt")
    nodes = [r for r in res.records if isinstance(r, FabricNode)]
    assert res.problems == []
    assert [(n.node_type, n.guid, n.ports, n.lid) for n in nodes] == [
        ("CA", "0x0002c903000e0b72", 2, None),
        ("CA", "0x0002c903000e0b82", 2, None),
        ("CA", "0x7cfe900300a595c0", 1, None),
        ("SW", "0x0002c90200482d08", 36, 4),
        ("SW", "0x0002c90200482e10", 36, 6),
    ]
    assert nodes[0].description == "gpu-a101 HCA-1"
    assert nodes[3].description == "MF0;switch-a:SX6036/U1"  # quotes off, port-0 info not part of it
    assert nodes[4].description == "SwitchX -  Mellanox Technologies"
    assert {n.host for n in nodes} == {"gpu-a101"} and nodes[0].line == 2


def test_names_are_taken_from_ibnodes_records() -> None:
    recs = ibnodes.parse((DATA / "ibnodes" / "var_ibnodes_prompt.txt").read_text(), "ibnodes.txt").records
    ctx = Context(frames=build_frames(list(recs)), formats=set())
    assert name_for(ctx, "0x0002c903000e0b72") == "gpu-a101"
    assert name_for(ctx, lid=4) == "switch-a"  # the switch's port-0 LID from the ibswitches line
    assert label(ctx, lid=4) == "switch-a (0x0002c90200482d08)"
    n = node(ctx, "0x0002c903000e0b73")  # gpu-a101's port 1 GUID (mlx4 numbering) is named through its node
    assert n is not None and (n.name, n.kind) == ("gpu-a101", "CA")


def test_short_guid_router_line_and_older_port0_spelling() -> None:
    nodes = _nodes('Rt\t: 0x2c9000100d051 ports 2 "router-1"\n'
                   'Switch\t: 0x0008f10400410015 ports 24 "ISR9024 Voltaire" base port 0 lid 6 lmc 0\n')
    assert [(n.node_type, n.guid, n.lid) for n in nodes] == [("RT", "0x0002c9000100d051", None),
                                                              ("SW", "0x0008f10400410015", 6)]


def test_cut_paste_keeps_whole_lines_and_reports_the_rest() -> None:
    res = ibnodes.parse((DATA / "ibnodes" / "var_ibswitches_ibwarn_cut.txt").read_text(), "sw.txt")
    assert [r.lid for r in res.records if isinstance(r, FabricNode)] == [4, 9]
    assert any(isinstance(r, ToolError) and r.message.startswith("ibwarn:") for r in res.records)
    assert len(res.problems) == 1 and "line 4" in res.problems[0]


def test_commands_map_to_the_format() -> None:
    for cmd in ("ibswitches", "ibhosts", "ibnodes", "/usr/sbin/ibrouters"):
        assert command_format(cmd, "") == "ibnodes", cmd


def test_sniff_is_zero_on_other_formats_samples() -> None:
    assert ibnodes.sniff((DATA / "ibnodes" / "var_ibnodes_prompt.txt").read_text()) >= 85
    for d in sorted(DATA.iterdir()):
        if not d.is_dir() or d.name == "ibnodes":
            continue
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                head = f.read_text(errors="replace")[:8192]
                assert ibnodes.sniff(head) == 0, f


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_never_raises_on_garbage(text: str) -> None:
    res = ibnodes.parse(text, "g.txt")
    assert res.format == "ibnodes"
    assert 0 <= ibnodes.sniff(text) <= 100


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(['Switch\t: 0x0002c90200482d08 ports 36 "a b" enhanced port 0 lid 4 lmc 0',
                                 'Ca\t: 0x0002c903000e0b72 ports 2 "h HCA-1"', 'ibwarn: x', '"', 'Ca\t: 0x',
                                 'Switch : 0x1 ports 1 ""']), max_size=30), st.integers(0, 400))
def test_never_raises_on_cut_node_lines(lines: list[str], cut: int) -> None:
    text = "\n".join(lines)[:cut]
    res = ibnodes.parse(text, "c.txt")
    assert all(r.line >= 1 for r in res.records)
