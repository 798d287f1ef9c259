"""How a leaf's forwarding table spreads the remote hosts over its uplinks (extractors/routes.py)."""

from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import gather

HEAD = ("Unicast lids [0x0-0x20] of switch Lid 1 guid 0x248a070300f8a9b0 (MF0;leaf07:MQM8700/U1):\n"
        "  Lid  Out   Destination\n       Port     Info \n")


def _table(remote_ports: list[int], local: int = 2) -> str:
    rows = ["0x0001 000 : (Switch portguid 0x248a070300f8a9b0: 'MF0;leaf07:MQM8700/U1')",
            "0x0002 033 : (Switch portguid 0x248a070300f8b120: 'MF0;spine01:MQM8700/U1')",
            "0x0003 034 : (Switch portguid 0x248a070300f8b121: 'MF0;spine02:MQM8700/U1')"]
    lid = 4
    for h in range(local):
        rows.append(f"0x{lid:04x} {h + 1:03d} : (Channel Adapter portguid 0x0002c903000e{h:04x}: 'gpu-l{h} HCA-1')")
        lid += 1
    for i, p in enumerate(remote_ports):
        rows.append(f"0x{lid:04x} {p:03d} : (Channel Adapter portguid 0x0002c903000f{i:04x}: 'gpu-r{i} HCA-1')")
        lid += 1
    return HEAD + "\n".join(rows) + f"\n{len(rows)} valid lids dumped \n"


def _findings(tmp_path: Path, text: str) -> dict[str, dict[str, object]]:
    (tmp_path / "lfts.txt").write_text(text)
    return {f.kind: {**f.attrs, "_loc": (f.location.device, f.location.port)} for f in gather([tmp_path]).findings}


def test_a_leaf_sending_most_remote_hosts_through_one_uplink_is_named_with_its_port(tmp_path: Path) -> None:
    f = _findings(tmp_path, _table([33] * 6 + [34] * 2))
    hot = f["lft_uplink_imbalance"]
    assert (hot["switch"], hot["port"], hot["uplinks"], hot["dests"]) == ("leaf07", 33, 2, 8)
    assert hot["imbalance"] == 1.5 and hot["max_share"] == 0.75 and hot["_loc"] == ("leaf07", 33)


def test_an_even_table_is_evidence_of_balance(tmp_path: Path) -> None:
    f = _findings(tmp_path, _table([33, 34] * 4))
    assert "lft_uplink_imbalance" not in f
    assert f["lft_uplinks_balanced"]["max_imbalance"] == 1.0


def test_a_switch_with_no_host_of_its_own_is_not_judged(tmp_path: Path) -> None:
    f = _findings(tmp_path, _table([33] * 7 + [34], local=0))  # a spine: every port leads to a switch
    assert "lft_uplink_imbalance" not in f and "lft_uplinks_balanced" not in f


def test_too_few_remote_hosts_to_spread_are_not_judged(tmp_path: Path) -> None:
    f = _findings(tmp_path, _table([33, 33, 34]))
    assert "lft_uplink_imbalance" not in f and "lft_uplinks_balanced" not in f


def _lst_end(kind: str, guid: str, desc: str, lid: int, port: int) -> str:
    n = "28" if kind == "SW" else "01"
    return (f"{{ {kind} Ports:{n} SystemGUID:{guid} NodeGUID:{guid} PortGUID:{guid} VenID:000002c9 DevID:d2f0 "
            f"Rev:000000a0 {{{desc}}} LID:{lid:04x} PN:{port:02x} }}")


def test_opensm_routing_dump_is_judged_through_the_topologys_lids(tmp_path: Path) -> None:
    """OpenSM's dump (and ibdiagnet2.fdbs) names neither the switch nor the destinations: the link list does."""
    leaf, s1, s2 = "248a070300f8a9b0", "248a070300f8b120", "248a070300f8b121"
    lines = [f"{_lst_end('SW', leaf, 'MF0;leaf07:MQM8700/U1', 1, 33)} {_lst_end('SW', s1, 'MF0;spine01:MQM8700/U1', 2, 1)}"
             " PHY=4x LOG=ACT SPD=50",
             f"{_lst_end('SW', leaf, 'MF0;leaf07:MQM8700/U1', 1, 34)} {_lst_end('SW', s2, 'MF0;spine02:MQM8700/U1', 3, 1)}"
             " PHY=4x LOG=ACT SPD=50"]
    rows = ["0x0001 : 000  : 00   : yes", "0x0002 : 033  : 01   : yes", "0x0003 : 034  : 01   : yes"]
    for h in range(2):  # local hosts on ports 1-2
        lines.append(f"{_lst_end('CA', f'0002c903000e{h:04x}', f'gpu-l{h} mlx5_0', 4 + h, 1)} "
                     f"{_lst_end('SW', leaf, 'MF0;leaf07:MQM8700/U1', 1, h + 1)} PHY=4x LOG=ACT SPD=50")
        rows.append(f"0x{4 + h:04x} : {h + 1:03d}  : 01   : yes")
    for i, p in enumerate([33] * 6 + [34] * 2):  # remote hosts under spine01's and spine02's other leaves
        lid = 6 + i
        lines.append(f"{_lst_end('CA', f'0002c903000f{i:04x}', f'gpu-r{i} mlx5_0', lid, 1)} "
                     f"{_lst_end('SW', s1 if i % 2 else s2, 'MF0;spine:MQM8700/U1', 2 if i % 2 else 3, 10 + i)}"
                     " PHY=4x LOG=ACT SPD=50")
        rows.append(f"0x{lid:04x} : {p:03d}  : 03   : yes")
    rows.append("0x0010 : UNREACHABLE")
    (tmp_path / "ibdiagnet2.lst").write_text("\n".join(lines) + "\n")
    (tmp_path / "ibdiagnet2.fdbs").write_text(
        f"osm_ucast_mgr_dump_ucast_routes: Switch 0x{leaf}\nLID    : Port : Hops : Optimal\n" + "\n".join(rows) + "\n")
    found = {f.kind: f for f in gather([tmp_path]).findings}
    hot = found["lft_uplink_imbalance"]
    assert (hot.attrs["switch"], hot.attrs["port"], hot.attrs["dests"]) == ("leaf07", 33, 8)
    assert (hot.location.device, hot.location.port) == ("leaf07", 33)
    assert found["sm_routes_incomplete"].attrs["unassigned"] == 1  # LID 16: UNREACHABLE from leaf07


def test_without_a_topology_the_opensm_dump_is_not_judged(tmp_path: Path) -> None:
    text = (Path(__file__).parent / "data" / "ibroute" / "ibutils_ibdm_clusters_osm_fdbs_trimmed.fdbs").read_text()
    f = _findings(tmp_path, text)
    assert "lft_uplink_imbalance" not in f and "lft_uplinks_balanced" not in f
