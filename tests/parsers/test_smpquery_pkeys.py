"""smpquery pkeys / PKeyTable: P_Key tables, keyed by the command line before each."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import opensm_partitions, smpquery, smpquery_pkeys, smpquery_sl2vl, sysfs_ib
from diagnose.parsers._pkeys import PkeyEntry

DATA = Path(__file__).resolve().parents[1] / "data"


def _entries(text: str) -> list[PkeyEntry]:
    return [r for r in smpquery_pkeys.parse(text, "f").records if isinstance(r, PkeyEntry)]


def test_ibsim_session_full_and_limited_members_by_lid() -> None:
    text = (DATA / "smpquery_pkeys/ibsim_tutorial_p4_full_limited_smpquery_PKeyTable.txt").read_text()
    got = {(e.lid, e.index): (e.pkey, e.full, e.capacity) for e in _entries(text)}
    assert got == {
        (1, 0): (0xFFFF, True, 8),
        (2, 0): (0x7FFF, False, 64), (2, 1): (0x8030, True, 64),
        (5, 0): (0x7FFF, False, 64), (5, 1): (0x0030, False, 64),
        (8, 0): (0x7FFF, False, 64), (8, 1): (0x0030, False, 64),
        (9, 0): (0x7FFF, False, 64),
    }
    assert {e.host for e in _entries(text)} == {"net21"}
    assert all(e.remote for e in _entries(text))


def test_local_port_guid_short_rows_and_a_cut_table() -> None:
    text = (DATA / "smpquery_pkeys/var_prompts_local_guid_cut_short_rows.txt").read_text()
    res = smpquery_pkeys.parse(text, "f")
    es = [r for r in res.records if isinstance(r, PkeyEntry)]
    local = [e for e in es if e.device == "mlx5_0"]
    assert [(e.port, e.index, e.pkey, e.remote) for e in local] == [(1, 0, 0xFFFF, False), (1, 1, 0x8003, False)]
    by_guid = [e for e in es if e.guid == "0xb0cf0e0300a2c100"]
    assert [(e.index, e.pkey, e.full, e.capacity) for e in by_guid] == [(0, 0x7FFF, False, 12), (1, 0x0003, False, 12)]
    cut = [e for e in es if e.lid == 733]
    assert [(e.index, e.capacity) for e in cut] == [(0, None)]
    assert any("capacity" in p for p in res.problems)


def test_sniff_zero_on_other_formats() -> None:
    for fmt in ("smpquery", "smpquery_sl2vl", "opensm_partitions", "sysfs_infiniband"):
        for f in sorted((DATA / fmt).iterdir()):
            if f.suffix != ".md":
                assert smpquery_pkeys.sniff(f.read_text()) == 0, f
    own = (DATA / "smpquery_pkeys/ibsim_tutorial_p3_two_tenants_smpquery_PKeyTable.txt").read_text()
    for mod in (smpquery, smpquery_sl2vl, opensm_partitions, sysfs_ib):
        assert mod.sniff(own) == 0, mod.FORMAT


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=40), st.integers(0, 40))
def test_any_table_round_trips_and_any_cut_never_raises(keys: list[int], cut: int) -> None:
    rows = [f"{i:4d}: " + " ".join(f"0x{k:04x}" for k in keys[i:i + 8]) for i in range(0, len(keys), 8)]
    text = "# smpquery pkeys 17\n" + "\n".join(rows) + f"\n{len(keys)} pkeys capacity for this port\n"
    got = {(e.index, e.pkey) for e in _entries(text)}
    assert got == {(i, k) for i, k in enumerate(keys) if k & 0x7FFF}
    assert all(e.lid == 17 for e in _entries(text))
    smpquery_pkeys.parse(text[: cut * 7], "f")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_garbage_never_raises(text: str) -> None:
    smpquery_pkeys.parse(text, "f")
    smpquery_pkeys.sniff(text)
