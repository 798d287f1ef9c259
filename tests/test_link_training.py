"""Links below what both ends support, switch-to-switch included: iblinkinfo's verdicts and ibportstate's."""

from __future__ import annotations

from pathlib import Path

from diagnose import pipeline
from diagnose.bundle import LoadLimits

SERIAL = LoadLimits()  # (the library default: one process)
SW = "Switch: 0x{g} MF0;{n}:MQM8700/U1:\n"
UP = "      {lid:6d} {p:4d}[  ] ==({w:>3s} {s:>18s} Active/  LinkUp)==>  {rl:6d} {rp:4d}[  ] \"{rd}\" ({hint})\n"
CA = "CA: {h} mlx5_0:\n      0x{g} {lid:6d}    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>  {rl:6d} {rp:4d}[  ] \"{rd}\" ( )\n"


def _fabric(uplink_width: str, hint: str) -> str:
    leaf, spine = "MF0;leaf-t1:MQM8700/U1", "MF0;spine-t1:MQM8700/U1"
    return (
        "[root@mgmt ~]# iblinkinfo\n"
        + CA.format(h="gpu-t01", g="b83fd20300aa0001", lid=10, rl=2, rp=1, rd=leaf)
        + SW.format(g="1070fd0300a1b300", n="leaf-t1")
        + UP.format(lid=2, p=1, w="4X", s="53.125 Gbps", rl=10, rp=1, rd="gpu-t01 mlx5_0", hint=" ")
        + UP.format(lid=2, p=37, w="4X", s="53.125 Gbps", rl=1, rp=1, rd=spine, hint=" ")
        + UP.format(lid=2, p=38, w=uplink_width, s="53.125 Gbps", rl=1, rp=2, rd=spine, hint=hint)
        + SW.format(g="1070fd0300a1b200", n="spine-t1")
        + UP.format(lid=1, p=1, w="4X", s="53.125 Gbps", rl=2, rp=37, rd=leaf, hint=" ")
        + UP.format(lid=1, p=2, w=uplink_width, s="53.125 Gbps", rl=2, rp=38, rd=leaf, hint=hint)
    )


def _findings(tmp_path: Path, files: dict[str, str], kind: str) -> list:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    ev = pipeline.gather([tmp_path], limits=SERIAL)
    return [f for f in ev.findings if f.kind == kind]


def test_switch_to_switch_link_with_could_be_hint_is_one_finding_at_the_leaf_end(tmp_path: Path) -> None:
    got = _findings(tmp_path, {"fabric/iblinkinfo.txt": _fabric("2X", "Could be 4X ")}, "link_below_capability")
    assert len(got) == 1  # both ends print the hint: one cable
    f = got[0]
    assert (f.location.device, f.location.port, f.location.peer) == ("leaf-t1", 38, "spine-t1/P2")
    assert f.attrs["switch_link"] is True and f.attrs["width_low"] is True and f.attrs["ratio"] == 0.5
    assert f.attrs["ends_seen"] == 2 and f.attrs["basis"] == "tool_verdict"
    assert not _findings(tmp_path, {}, "fabric_links_at_capability")


def test_a_2x_link_without_hint_is_at_capability(tmp_path: Path) -> None:
    """HDR100 / split ports run 2X by design: iblinkinfo prints '( )' and nothing is degraded."""
    files = {"fabric/iblinkinfo.txt": _fabric("2X", " ")}
    assert not _findings(tmp_path, files, "link_below_capability")
    ok = _findings(tmp_path, {}, "fabric_links_at_capability")
    assert len(ok) == 1 and ok[0].attrs["links"] == 6  # port lines: 1 CA + 3 leaf + 2 spine


def test_speed_hint_on_a_full_width_link(tmp_path: Path) -> None:
    text = _fabric("4X", " Could be 53.125 Gbps").replace(
        "4X        53.125 Gbps Active/  LinkUp)==>       1    2", "4X      25.78125 Gbps Active/  LinkUp)==>       1    2")
    got = _findings(tmp_path, {"fabric/iblinkinfo.txt": text}, "link_below_capability")
    assert got and got[0].attrs["speed_low"] is True and got[0].attrs["capable_speed"] == "HDR"


def test_ibportstate_peer_below_common_width(tmp_path: Path) -> None:
    text = (
        "[root@mgmt01 ~]# ibportstate 4 38\nSwitch PortInfo:\n# Port info: Lid 4 port 38\n"
        "LinkState:.......................Active\nPhysLinkState:...................LinkUp\n"
        "LinkWidthEnabled:................1X or 2X or 4X\nLinkWidthActive:.................2X\n"
        "LinkSpeedActive:.................10.0 Gbps\nLinkSpeedExtActive:..............53.125 Gbps\n"
        "Peer PortInfo:\n# Port info: Lid 4 DR path slid 12; dlid 65535; 0,38 port 4\n"
        "LinkState:.......................Active\nPhysLinkState:...................LinkUp\n"
        "Lid:.............................1\nLinkWidthEnabled:................1X or 2X or 4X\n"
        "LinkWidthActive:.................2X\n"
    )
    got = _findings(tmp_path, {"ibportstate.txt": text}, "link_below_capability")
    assert len(got) == 1
    assert got[0].attrs["capable_width"] == "4X" and got[0].attrs["tool"] == "ibportstate"
    assert got[0].location.port == 38 and got[0].location.peer == "lid 1/P4"
    healthy = text.replace("LinkWidthActive:.................2X", "LinkWidthActive:.................4X")
    assert not _findings(tmp_path, {"ibportstate.txt": healthy}, "link_below_capability")


IBDIAG_ERR = ('-E- Link: S1070fd0300a1b300/N1070fd0300a1b300/P38<-->S1070fd0300a1b200/N1070fd0300a1b200/P2 - Unexpected'
              ' actual link speed 25 (enable_speed1="2.5 or 5 or 10 or 14 or 25 or 50", enable_speed2="2.5 or 5 or 10 or'
              ' 14 or 25 or 50" therefore final speed should be 50)\n')


def test_ibdiagnet_speed_check_names_both_switch_ends_through_the_topology(tmp_path: Path) -> None:
    got = _findings(tmp_path, {"fabric/iblinkinfo.txt": _fabric("4X", " "), "fabric/ibdiagnet2.log": IBDIAG_ERR},
                    "link_below_capability")
    (f,) = got
    assert (f.location.device, f.location.port, f.location.peer) == ("leaf-t1", 38, "spine-t1/P2")
    assert f.attrs["tool"] == "ibdiagnet" and f.attrs["switch_link"] is True
    assert (f.attrs["speed"], f.attrs["capable_speed"]) == ("EDR", "HDR") and f.attrs["ratio"] < 0.5


def test_ibdiagnet_host_end_by_description_and_a_speed_with_no_expected_value(tmp_path: Path) -> None:
    text = (Path(__file__).parent / "data" / "ibdiagnet_log" / "ucar_quoted_route_and_speed_errors.log").read_text()
    (f,) = _findings(tmp_path, {"ibdiagnet2.log": text}, "link_below_capability")
    assert (f.location.host, f.location.port) == ("ime2", 1) and f.attrs["speed"] == "FDR"
    assert f.location.peer == "0x7cfe900300a51030/P28"  # no topology: the switch stays a GUID


def test_ibdiagnet_checks_passing_say_every_link_is_at_capability(tmp_path: Path) -> None:
    log = ("-I- Links Check finished successfully\n\n-I- Links Speed Check finished successfully\n\n"
           "-I- Links Width Check finished successfully\n")
    got = _findings(tmp_path, {"ibdiagnet2.log": log}, "fabric_links_at_capability")
    assert len(got) == 1 and got[0].attrs["tool"] == "ibdiagnet"
    only_speed = log.replace("-I- Links Width Check finished successfully\n", "")
    assert _findings(tmp_path / "b", {"ibdiagnet2.log": only_speed}, "fabric_links_at_capability") == []


def test_ibdiagnet_routing_errors_say_the_sm_left_routes_incomplete(tmp_path: Path) -> None:
    text = (Path(__file__).parent / "data" / "ibdiagnet_log" / "ucar_quoted_route_and_speed_errors.log").read_text()
    (f,) = _findings(tmp_path, {"ibdiagnet2.log": text}, "sm_routes_incomplete")
    assert (f.attrs["errors"], f.attrs["unassigned"], f.attrs["no_path"]) == (4, 1, 3)
    assert "0x7cfe900300bdf4f0" in f.summary and f.location.is_empty()
    assert _findings(tmp_path / "c", {"ibdiagnet2.log": IBDIAG_ERR}, "sm_routes_incomplete") == []
