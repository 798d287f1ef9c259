"""perftest runs as findings: bandwidth against the port rate or the stated rate, MR failures, completion errors,
the MTU (samples in tests/data/perftest, see its README)."""

from __future__ import annotations

import shutil
from pathlib import Path

from diagnose.models.diagnosis import Finding
from diagnose.pipeline import gather, triage

DATA = Path(__file__).resolve().parent / "data"
PT = DATA / "perftest"


def kinds(paths: list[Path], symptom: str | None = None) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in gather(paths, symptom).findings:
        out.setdefault(f.kind, []).append(f)
    return out


def split_session(tmp_path: Path) -> list[Path]:
    """The ibstat block and the perftest client block of one pasted session, as two files."""
    text = (PT / "sessions" / "var_felixfu520_ibstat_then_write_bw_client.txt").read_text()
    ib, _, bw = text.partition("\n\n")
    (tmp_path / "ibstat.txt").write_text(ib + "\n")
    (tmp_path / "bw.txt").write_text(bw)
    return [tmp_path / "ibstat.txt", tmp_path / "bw.txt"]


def test_fdr10_run_reaches_the_port_rate(tmp_path: Path) -> None:
    k = kinds(split_session(tmp_path))
    (ok,) = k["perftest_bw_ok"]
    assert ok.attrs["basis"] == "port" and ok.attrs["expected_gbps"] == 40.0
    assert 0.94 < ok.attrs["fraction"] < 0.95  # 37.8 Gb/s of FDR10's 40
    assert (ok.location.host, ok.location.device) == ("node02", "mlx4_0")
    assert {e.file for e in ok.evidence} == {"bw.txt", "ibstat.txt"}
    assert "perftest_bw_below_line_rate" not in k


def test_the_same_run_against_a_stated_hdr_rate_is_far_below(tmp_path: Path) -> None:
    shutil.copy(PT / "felixfu520_ib_md_mlx4_fdr10_write_bw_lat.txt", tmp_path / "out.txt")
    k = kinds([tmp_path / "out.txt"], "ib_write_bw between two HDR 200G hosts is slow")
    low = k["perftest_bw_below_line_rate"]
    # server and client each print the transfer: one finding per host and device
    assert sorted(f.location.host for f in low) == ["node01", "node02"]
    assert all(f.attrs["basis"] == "stated" and f.attrs["expected_gbps"] == 200.0 for f in low)
    assert all(0.18 < f.attrs["fraction"] < 0.2 for f in low)
    d = triage([tmp_path / "out.txt"], "ib_write_bw between two HDR 200G hosts is slow")
    deg = next(c for c in d.causes if c.id == "link.degraded")
    assert any(e.finding == "perftest_bw_below_line_rate" for e in deg.evidence)


def test_small_messages_are_not_held_against_the_line_rate(tmp_path: Path) -> None:
    shutil.copy(PT / "perftest_issue132_write_bw_ib_gbits.txt", tmp_path / "out.txt")
    k = kinds([tmp_path / "out.txt"], "HDR 200G")
    assert "perftest_bw_below_line_rate" not in k and "perftest_bw_ok" not in k  # 16 B at most: message-rate bound


def test_no_rate_known_no_bandwidth_verdict(tmp_path: Path) -> None:
    shutil.copy(PT / "perftest_pr342_write_bw_rdma_cm_roce_gbits.txt", tmp_path / "out.txt")
    k = kinds([tmp_path / "out.txt"])
    assert not {"perftest_bw_below_line_rate", "perftest_bw_ok"} & set(k)
    (mtu,) = k["perftest_mtu"]
    assert mtu.attrs == {"mtu": 4096, "link_type": "Ethernet", "gid_index": 0, "port_active_mtu": None,
                         "below_port_mtu": False, "lowered": False, "roce": True}


def test_gpu_buffer_registration_failure(tmp_path: Path) -> None:
    shutil.copy(PT / "perftest_issue126_use_cuda_client_mr_failed.txt", tmp_path / "out.txt")
    (mr,) = kinds([tmp_path / "out.txt"])["perftest_mr_failed"]
    assert mr.attrs["use_cuda"] is True and mr.location.host == "rdma-cuda-test-pod-1"
    assert mr.evidence[0].text == "Couldn't allocate MR"


def test_retry_exceeded_and_roce_mtu_1024(tmp_path: Path) -> None:
    shutil.copy(PT / "var_status12_retry_exceeded_new_format.txt", tmp_path / "out.txt")
    k = kinds([tmp_path / "out.txt"])
    (err,) = k["perftest_transport_error"]
    assert err.attrs == {"status": 12, "vendor_err": 0x81, "retry_exceeded": True, "roce": True, "side": "client"}
    (mtu,) = k["perftest_mtu"]
    assert (mtu.attrs["mtu"], mtu.attrs["roce"], mtu.attrs["gid_index"]) == (1024, True, 3)


def test_old_format_status_4_is_not_retry_exceeded(tmp_path: Path) -> None:
    shutil.copy(PT / "perftest_issue173_failed_status4.txt", tmp_path / "out.txt")
    (err,) = kinds([tmp_path / "out.txt"])["perftest_transport_error"]
    assert (err.attrs["status"], err.attrs["retry_exceeded"], err.attrs["roce"]) == (4, False, False)
