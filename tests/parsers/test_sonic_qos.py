"""SONiC show pfc counters / show queue counters (diagnose.parsers.sonic_qos)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import sonic_qos
from diagnose.parsers.sonic_qos import SwitchPfcCount, SwitchQueueCount

DATA = Path(__file__).resolve().parent.parent / "data"
TRIAGE = (DATA / "sonic_qos" / "lolyu_aoi_buffer_triage_lossless_drops.txt").read_text()
PFCSTAT = (DATA / "sonic_qos" / "sonic_utilities_pfcstat_test_thousands.txt").read_text()


def test_queue_drops_and_all_zero_pfc_of_the_real_triage() -> None:
    res = sonic_qos.parse(TRIAGE, "qos.txt")
    assert res.problems == []
    (q,) = [r for r in res.records if isinstance(r, SwitchQueueCount)]
    assert (q.port, q.queue, q.prio, q.pkts, q.bytes, q.drop_pkts, q.drop_bytes, q.line) == (
        "Ethernet4", "UC3", 3, 8193, 852072, 91786, 9545744, 5)
    pfc = [r for r in res.records if isinstance(r, SwitchPfcCount)]
    assert len(pfc) == 2 * 2 * 8 and {r.frames for r in pfc} == {0}
    assert {(r.port, r.direction) for r in pfc} == {(p, d) for p in ("Ethernet4", "Ethernet120") for d in ("rx", "tx")}


def test_thousands_separators_directions_and_priorities() -> None:
    res = sonic_qos.parse(PFCSTAT, "pfc.txt")
    pfc = {(r.port, r.direction, r.prio): r.frames for r in res.records if isinstance(r, SwitchPfcCount)}
    assert pfc[("Ethernet0", "rx", 0)] == 1200 and pfc[("Ethernet8", "tx", 7)] == 817
    assert pfc[("Ethernet4", "rx", 3)] == 403 and len(pfc) == 48 and res.problems == []


def test_prompt_names_the_switch_and_na_and_multicast_queues() -> None:
    text = ("admin@leaf07:~$ show queue counters\n     Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    "
            "Drop/bytes\n---------  -----  --------------  ---------------  -----------  ------------\n"
            "Ethernet0    MC8             N/A              N/A          N/A           N/A\n"
            "Ethernet0    UC4              12            1,024            0             0\n")
    recs = [r for r in sonic_qos.parse(text, "q.txt").records if isinstance(r, SwitchQueueCount)]
    assert [(r.host, r.queue, r.prio, r.pkts, r.bytes) for r in recs] == [
        ("leaf07", "MC8", None, None, None), ("leaf07", "UC4", 4, 12, 1024)]


def test_sniff_claims_both_tables_and_no_other_sample() -> None:
    assert sonic_qos.sniff(TRIAGE) == 95 and sonic_qos.sniff(PFCSTAT) == 95
    for d in sorted(DATA.iterdir()):
        if not d.is_dir() or d.name == "sonic_qos":
            continue
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                assert sonic_qos.sniff(f.read_text(errors="replace")[:8192]) == 0, f


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_never_raises_on_garbage(text: str) -> None:
    res = sonic_qos.parse(text, "g.txt")
    assert res.format == "sonic_qos" and 0 <= sonic_qos.sniff(text) <= 100


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(TRIAGE)))
def test_any_cut_of_the_real_output_keeps_whole_rows(cut: int) -> None:
    res = sonic_qos.parse(TRIAGE[:cut], "c.txt")
    assert all(r.line >= 1 for r in res.records)
    assert all(r.frames == 0 for r in res.records if isinstance(r, SwitchPfcCount))
