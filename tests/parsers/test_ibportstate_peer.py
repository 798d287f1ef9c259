"""ibportstate on a switch port: the port's PortInfo and its peer's (``Peer PortInfo:``), and the tool's warning."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import smpquery
from diagnose.parsers._ib import ToolError

DATA = Path(__file__).resolve().parents[1] / "data" / "smpquery"
SAMPLE = (DATA / "tuananh0788_Exadata_issue2_ibportstate_switch_port_peer.txt").read_text()


def _ports(text: str) -> list[smpquery.PortInfo]:
    return [r for r in smpquery.parse(text, "s.txt").records if isinstance(r, smpquery.PortInfo)]


def test_peer_dump_is_the_far_end_of_the_queried_port_not_port_1_of_the_switch() -> None:
    local, peer = _ports(SAMPLE)
    assert (local.lid, local.port, local.peer_of_port) == (1, 6, None)
    assert local.width_enabled == "1X or 4X" and local.host == "exasw-infb01"
    # '# Port info: Lid 1 DR path slid 2; dlid 65535; 0,6 port 1': port 1 of the node behind switch port 6
    assert (peer.lid, peer.port, peer.peer_of_lid, peer.peer_of_port) == (None, 1, 1, 6)
    assert peer.width_supported == "4X (IBA extension)" and peer.width == "4X" and peer.speed == "QDR"


def test_peer_dump_with_its_own_lid_and_extended_speeds_and_the_stderr_warning() -> None:
    text = (
        "[root@mgmt01 ~]# ibportstate 4 38 2>&1\n"
        "ibwarn: [40211] validate_width: Peer ports operating at active width 16 rather than 2 (4x)\n"
        "Switch PortInfo:\n# Port info: Lid 4 port 38\nLinkState:.......................Active\n"
        "LinkWidthEnabled:................1X or 2X or 4X\nLinkWidthActive:.................2X\n"
        "LinkSpeedExtSupported:...........14.0625 Gbps or 25.78125 Gbps or 53.125 Gbps\n"
        "LinkSpeedExtActive:..............53.125 Gbps\n"
        "Peer PortInfo:\n# Port info: Lid 4 DR path slid 12; dlid 65535; 0,38 port 4\n"
        "LinkState:.......................Active\nLid:.............................1\n"
        "LinkWidthEnabled:................1X or 2X or 4X\nLinkWidthActive:.................2X\n"
    )
    local, peer = _ports(text)
    assert (local.width, local.speed, local.speed_ext_supported.endswith("53.125 Gbps")) == ("2X", "HDR", True)
    assert (peer.lid, peer.port, peer.peer_of_lid, peer.peer_of_port) == (1, 4, 4, 38)
    warn = [r for r in smpquery.parse(text, "s.txt").records if isinstance(r, ToolError)]
    assert len(warn) == 1 and "rather than 2 (4x)" in warn[0].message


def test_a_new_command_ends_the_peer_context() -> None:
    text = SAMPLE.replace("Peer PortInfo:\n", "Peer PortInfo:\n[root@exasw-infb01 ~]# ibportstate 1 7\n")
    ports = _ports(text)
    assert all(p.peer_of_port is None for p in ports)
    assert [p.lid for p in ports] == [1, 1]


def test_cut_sample_keeps_the_local_dump() -> None:
    cut = SAMPLE[: SAMPLE.index("Peer PortInfo:") + 20]
    r = smpquery.parse(cut, "s.txt")
    ports = [x for x in r.records if isinstance(x, smpquery.PortInfo)]
    assert ports[0].port == 6 and ports[0].width == "4X"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="PeortInfo:#DRpathLid 0123456789.,;\nAcive", max_size=300))
def test_never_raises_on_garbage(text: str) -> None:
    smpquery.parse("Peer PortInfo:\n" + text, "g.txt")
