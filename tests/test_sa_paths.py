"""The SA's PathRecords as findings (diagnose.evidence.extractors.sa_paths) and as mtu.mismatch evidence
(samples in tests/data/saquery and tests/data/ibv_devinfo, see their READMEs)."""

from __future__ import annotations

import shutil
from pathlib import Path

from diagnose.evidence.context import Context
from diagnose.evidence.extractors.sa_paths import sa_paths
from diagnose.evidence.frames import build_frames
from diagnose.models.diagnosis import Finding
from diagnose.parsers import saquery
from diagnose.parsers._common import EnvSetting
from diagnose.pipeline import gather, triage

DATA = Path(__file__).resolve().parent / "data"
SA = DATA / "saquery"
LOW = SA / "var_saquery_nodes_then_p_mtu2048.txt"
FULL = SA / "var_saquery_p_mtu4096.txt"
DEVINFO = DATA / "ibv_devinfo" / "kaust_ksl-docs_ibex_interconnect_rst@0583fab_lines31-49_ibv_devinfo_mlx5_cx6.txt"
SLOW = "all_reduce busbw is low between the two nodes"


def kinds(paths: list[Path], symptom: str | None = None) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in gather(paths, symptom).findings:
        out.setdefault(f.kind, []).append(f)
    return out


def _ctx(text: str, *extra: object) -> Context:
    recs = [*saquery.parse(text, "sa.txt").records, *extra]
    return Context(frames=build_frames(recs), formats={"saquery"})


def test_paths_below_the_ports_active_mtu_are_one_finding_naming_both_ends(tmp_path: Path) -> None:
    shutil.copy(LOW, tmp_path / "sa.txt")
    shutil.copy(DEVINFO, tmp_path / "devinfo.txt")  # port_lid 762, active_mtu 4096
    (f,) = kinds([tmp_path])["ib_path_mtu_low"]
    assert f.attrs == {"mtu": 2048, "expected_mtu": 4096, "basis": "port_active_mtu", "paths": 2, "paths_total": 2,
                       "pairs": 2, "slid": 762, "dlid": 763, "src": "login509-02-r/mlx5_0",
                       "dst": "login509-03-r/mlx5_0", "below_port_mtu": True, "hdr_fabric": True}
    assert f.count == 2
    assert (f.location.host, f.location.device, f.location.peer) == ("login509-02-r", "mlx5_0",
                                                                     "login509-03-r/mlx5_0")
    cited = {(e.file, e.line) for e in f.evidence}
    assert ("sa.txt", 63) in cited and ("sa.txt", 81) in cited  # both paths' mtu lines
    assert any(e.file == "devinfo.txt" for e in f.evidence)  # the port that runs 4096


def test_without_port_mtus_an_hdr_path_below_4096_is_low(tmp_path: Path) -> None:
    shutil.copy(LOW, tmp_path / "sa.txt")
    (f,) = kinds([tmp_path])["ib_path_mtu_low"]
    assert (f.attrs["basis"], f.attrs["expected_mtu"], f.attrs["below_port_mtu"]) == ("hdr_fabric", 4096, False)


def test_full_mtu_paths_give_no_mtu_finding(tmp_path: Path) -> None:
    shutil.copy(FULL, tmp_path / "sa.txt")
    shutil.copy(DEVINFO, tmp_path / "devinfo.txt")
    assert "ib_path_mtu_low" not in kinds([tmp_path])


def test_a_slower_fabric_at_2048_without_port_data_is_not_judged() -> None:
    text = LOW.read_text().replace("rate....................0x91", "rate....................0x83")  # 10 Gb/s
    assert not [f for f in sa_paths(_ctx(text)) if f.kind == "ib_path_mtu_low"]


def test_one_pair_with_two_sls_and_an_sl_other_than_the_jobs() -> None:
    text = FULL.read_text()
    second = text.index("PathRecord dump:", 5)
    # the same pair answered twice, the second time on SL 3 (a QoS policy's SL for it)
    text = text[:second] + text[:second].replace("sl......................0x0", "sl......................0x3") \
        + text[second:]
    env = EnvSetting(source="env.txt", line=4, text="NCCL_IB_SL=0", host="login509-02-r", name="NCCL_IB_SL",
                     value="0", origin="env_dump")
    found = {f.attrs["reason"]: f for f in sa_paths(_ctx(text, env)) if f.kind == "ib_path_sl"}
    assert set(found) == {"pair_sl_differs", "sl_not_job_sl"}
    mixed = found["pair_sl_differs"]
    assert (mixed.attrs["sls"], mixed.attrs["pairs"], mixed.attrs["paths"]) == ("0,3", 1, 2)
    assert (mixed.attrs["slid"], mixed.attrs["dlid"]) == (762, 763)
    other = found["sl_not_job_sl"]
    assert (other.attrs["sl"], other.attrs["sl_set"], other.attrs["sls"], other.attrs["paths"]) == (0, True, "3", 1)
    assert other.evidence[0].file == "env.txt" and other.evidence[1].text == "\t\tsl......................0x3"


def test_paths_on_the_jobs_sl_give_no_sl_finding() -> None:
    assert not [f for f in sa_paths(_ctx(FULL.read_text())) if f.kind == "ib_path_sl"]  # SL 0, NCCL_IB_SL unset


def test_nothing_is_read_without_a_saquery_file() -> None:
    ctx = Context(frames={}, formats={"ibstat"})
    assert sa_paths(ctx) == []


def test_a_low_path_mtu_ranks_mtu_mismatch_first(tmp_path: Path) -> None:
    shutil.copy(LOW, tmp_path / "sa.txt")
    d = triage([tmp_path], SLOW)
    assert d.causes[0].id == "mtu.mismatch"
    assert any(e.finding == "ib_path_mtu_low" for e in d.causes[0].evidence)


def test_matching_mtus_do_not_rank_mtu_mismatch(tmp_path: Path) -> None:
    shutil.copy(FULL, tmp_path / "sa.txt")
    shutil.copy(DEVINFO, tmp_path / "devinfo.txt")
    d = triage([tmp_path], SLOW)
    mtu = [c for c in d.causes if c.id == "mtu.mismatch"]
    assert not mtu or not any(e.finding == "ib_path_mtu_low" for e in mtu[0].evidence)
    assert not d.causes or d.causes[0].id != "mtu.mismatch"
