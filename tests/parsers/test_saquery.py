"""saquery NodeRecord / PathRecord / other SA record dumps (diagnose.parsers.saquery; samples in tests/data/saquery,
see its README)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.evidence.context import Context
from diagnose.evidence.frames import build_frames
from diagnose.evidence.names import label, name_for
from diagnose.parsers import saquery
from diagnose.parsers._fabric import FabricNode
from diagnose.parsers._ib import ToolError
from diagnose.parsers.saquery import SaBlock, SaPath

DATA = Path(__file__).resolve().parent.parent / "data"
SA = DATA / "saquery"
MAIL = SA / "linux-rdma_2020-06-17_chukov_saquery_lid_noderecord.txt"
GROUPS = SA / "ukharon-artifacts_ukharon-build_README@13ebd0c_saquery_g.txt"
LOW = SA / "var_saquery_nodes_then_p_mtu2048.txt"
FULL = SA / "var_saquery_p_mtu4096.txt"
CUT = SA / "var_saquery_p_cut_crlf.txt"


def _of(kind: type, path: Path) -> list:
    return [r for r in saquery.parse(path.read_text(), path.name).records if isinstance(r, kind)]


def test_mailed_noderecord_without_tabs_is_a_fabric_node_at_its_guid_line() -> None:
    res = saquery.parse(MAIL.read_text(), "mail.txt")
    assert res.problems == []  # the `sudo saquery 134 -C mlx5_1` echo is not output
    (node,) = res.records
    assert isinstance(node, FabricNode)
    assert (node.guid, node.node_type, node.ports, node.lid) == ("0x98039b03006c7913", "CA", 1, 134)
    assert node.description == "MT4119 ConnectX5   Mellanox Technologies"  # as printed, inner spaces kept
    assert (node.line, node.text) == (10, "node_guid...............0x98039b03006c7913")


def test_multicast_group_dumps_are_blocks_with_their_mtu_rate_and_sl() -> None:
    res = saquery.parse(GROUPS.read_text(), "g.txt")
    assert res.problems == []  # the '...' elisions inside the paste are skipped
    blocks = [r for r in res.records if isinstance(r, SaBlock)]
    assert [(b.kind, b.line, b.lid, b.mtu, b.rate_gbps, b.sl, b.fields) for b in blocks] == [
        ("MCMemberRecord group", 1, 0xC004, 2048, 10.0, 0, 6),  # Mtu 0x84: selector 2, enum 4; Rate 0x83: 10 Gb/s
        ("MCMemberRecord group", 9, 0xC006, 2048, 10.0, 0, 6),
    ]


def test_path_records_give_lids_gids_sl_mtu_bytes_rate_and_pkey() -> None:
    paths = _of(SaPath, LOW)
    assert len(paths) == 2
    p = paths[0]
    assert (p.slid, p.dlid, p.sl, p.mtu, p.mtu_selector, p.rate, p.rate_gbps, p.pkey) == (
        762, 763, 0, 2048, 2, "200 Gb/s", 200.0, 0xFFFF)
    assert (p.sgid, p.dgid) == ("fe80::b859:9f03:22:626e", "fe80::b859:9f03:22:6272")
    assert (p.line, p.text, p.block_line) == (63, "\t\tmtu.....................0x84", 51)
    assert (p.sl_line, p.sl_text) == (62, "\t\tsl......................0x0")
    assert p.host == "sm01"  # the prompt names where saquery ran
    assert [q.mtu for q in _of(SaPath, FULL)] == [4096, 4096]


def test_node_records_name_the_lids_through_the_names_table() -> None:
    res = saquery.parse(LOW.read_text(), "sa.txt")
    nodes = [r for r in res.records if isinstance(r, FabricNode)]
    assert [(n.node_type, n.lid, n.ports) for n in nodes] == [("CA", 762, 1), ("CA", 763, 1), ("SW", 8, 41)]
    ctx = Context(frames=build_frames(list(res.records)), formats={"saquery"})
    assert name_for(ctx, lid=762) == "login509-02-r"
    assert name_for(ctx, lid=8) == "ibleaf01"  # 'MF0;ibleaf01:MQM8700/U1' shortened as the fabric model does
    assert label(ctx, lid=763) == "login509-03-r (0xb8599f0300226272)"


def test_crlf_capture_cut_inside_a_path_keeps_what_it_has_and_says_so() -> None:
    res = saquery.parse(CUT.read_text(), "cut.txt")
    paths = [r for r in res.records if isinstance(r, SaPath)]
    assert [(p.slid, p.dlid, p.mtu) for p in paths] == [(762, 763, 4096), (None, 762, None)]
    assert paths[0].text == "\t\tmtu.....................0x85"  # no CR kept
    assert res.problems == ["line 18: PathRecord without its mtu field (cut short?)"]


def test_pre_2009_hex_lids_are_read_as_hex() -> None:
    # the 2007-2009 dump_path_record printed "\t\tdlid....................0x%X\n" (see the README)
    text = "PathRecord dump:\n\t\tdlid....................0x1A\n\t\tslid....................0xE\n" \
           "\t\tsl......................0x3\n\t\tmtu.....................0x84\n"
    (p,) = saquery.parse(text, "old.txt").records
    assert (p.slid, p.dlid, p.sl, p.mtu) == (14, 26, 3, 2048)


def test_sa_errors_are_tool_errors_and_strays_are_problems() -> None:
    res = saquery.parse("Query SA failed: Connection timed out\nibwarn: [1234] sa_query: x\nhello world\n"
                        "node_guid...............0x1\n", "e.txt")
    errs = [r for r in res.records if isinstance(r, ToolError)]
    assert [e.message for e in errs] == ["Query SA failed: Connection timed out", "ibwarn: [1234] sa_query: x"]
    assert len(res.problems) == 2 and "line 3" in res.problems[0] and "line 4" in res.problems[1]


def test_empty_and_blockless_records_are_reported_not_raised() -> None:
    assert saquery.parse("", "e.txt").records == []
    res = saquery.parse("NodeRecord dump:\n\t\tlid.....................4\nPathRecord dump:\n", "x.txt")
    assert res.records == []
    assert res.problems == ["line 1: NodeRecord without a node_guid (cut short?)",
                            "line 3: PathRecord without slid/dlid (cut short?)"]


def test_sniff_is_zero_on_other_formats_samples() -> None:
    for f in (MAIL, GROUPS, LOW, FULL, CUT):
        assert saquery.sniff(f.read_text()) >= 90, f
    for d in sorted(DATA.iterdir()):
        if not d.is_dir() or d.name == "saquery":
            continue
        for f in sorted(d.rglob("*")):
            if f.is_file() and f.name != "README.md":
                assert saquery.sniff(f.read_text(errors="replace")[:65536]) == 0, f


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_never_raises_on_garbage(text: str) -> None:
    res = saquery.parse(text, "g.txt")
    assert res.format == "saquery"
    assert 0 <= saquery.sniff(text) <= 100


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(LOW.read_text().splitlines() + ["...", "\t\tmtu.....................0xZZ",
                                                                 "\t\tdlid....................", "PathRecord dump:"]),
                max_size=60), st.integers(0, 3000))
def test_never_raises_on_shuffled_and_cut_blocks(lines: list[str], cut: int) -> None:
    res = saquery.parse("\n".join(lines)[:cut], "c.txt")
    assert all(r.line >= 1 for r in res.records)
    assert not any(p.startswith("parser error") for p in res.problems)
