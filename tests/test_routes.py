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
