"""CUDA samples P2P parser against tests/data/cuda_p2p (see its README)."""

from __future__ import annotations

import math
from pathlib import Path

from diagnose.parsers import cuda_p2p, ibdev2netdev, nccl_tests, nvidia_smi_topo
from diagnose.parsers.cuda_p2p import CudaP2pAccess, CudaP2pDevice, CudaP2pMeasure, CudaP2pRun, CudaP2pVerifyError

DATA = Path(__file__).resolve().parents[1] / "data" / "cuda_p2p"
FIELD = Path(__file__).resolve().parents[2] / "fixtures" / "field"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def of(res: object, cls: type) -> list:
    return [r for r in res.records if isinstance(r, cls)]  # type: ignore[attr-defined]


def cell(res: object, *, direction: str | None, p2p: bool, src: int, dst: int, metric: str = "bandwidth",
         timer: str | None = None) -> float:
    got = [m.value for m in of(res, CudaP2pMeasure) if m.metric == metric and m.direction == direction
           and m.p2p == p2p and m.src == src and m.dst == dst and m.timer == timer]
    assert len(got) == 1, got
    return got[0]


def test_full_run_on_a_named_host() -> None:
    res = cuda_p2p.parse(read("kinghorn_2x4090_trpro_p2pBandwidthLatencyTest.txt"), "p.txt")
    assert res.format == "cuda_p2p" and res.problems == []
    (run,) = of(res, CudaP2pRun)
    assert (run.tool, run.host, run.gpus, run.complete, run.line) == ("p2pBandwidthLatencyTest", "trp64", 2, True, 2)
    assert [(d.index, d.name, d.pci) for d in of(res, CudaP2pDevice)] == [
        (0, "NVIDIA GeForce RTX 4090", "0000:41:00.0"), (1, "NVIDIA GeForce RTX 4090", "0000:61:00.0")]
    # the access lines give both ordered pairs; the connectivity matrix repeats them and adds nothing
    assert [(a.src, a.dst, a.can_access, a.origin) for a in of(res, CudaP2pAccess)] == [
        (0, 1, True, "access_line"), (1, 0, True, "access_line")]
    assert cell(res, direction="unidirectional", p2p=False, src=1, dst=0) == 22.67
    assert cell(res, direction="unidirectional", p2p=True, src=1, dst=0) == 11.46
    assert cell(res, direction="bidirectional", p2p=True, src=0, dst=1) == 54.11
    assert cell(res, direction=None, p2p=False, src=0, dst=1, metric="latency", timer="gpu") == 11.64
    assert cell(res, direction=None, p2p=True, src=1, dst=0, metric="latency", timer="cpu") == 1.71
    writes = [m for m in of(res, CudaP2pMeasure) if m.p2p and m.direction == "unidirectional"]
    assert {m.transfer for m in writes} == {"write"} and {m.unit for m in writes} == {"GB/s"}
    assert len(of(res, CudaP2pMeasure)) == 8 * 4  # 4 bandwidth + 2 x 2 latency matrices of 2 x 2 cells


def test_simplep2p_failed_verification() -> None:
    res = cuda_p2p.parse(read("kinghorn_2x4090_trpro_simpleP2P_failed.txt"), "s.txt")
    (run,) = of(res, CudaP2pRun)
    assert (run.tool, run.result, run.complete, run.tested_pair, run.memcpy_gbps, run.gpus) == (
        "simpleP2P", "failed", True, "0-1", 10.39, 2)
    errs = of(res, CudaP2pVerifyError)
    assert run.verification_errors == len(errs) == 12
    assert (errs[1].element, errs[1].value, errs[1].ref) == (1, "nan", 4.0)
    assert [(a.src, a.dst, a.can_access, a.origin) for a in of(res, CudaP2pAccess)] == [
        (0, 1, True, "simpleP2P"), (1, 0, True, "simpleP2P")]


def test_two_runs_of_one_session_and_a_waiver() -> None:
    res = cuda_p2p.parse(read("kinghorn_2x3090_trpro_no_p2p.txt"), "s.txt")
    runs = of(res, CudaP2pRun)
    assert [(r.tool, r.result, r.complete) for r in runs] == [
        ("simpleP2P", "waived", True), ("p2pBandwidthLatencyTest", None, False)]
    assert {(a.run, a.src, a.dst, a.can_access) for a in of(res, CudaP2pAccess)} == {
        (1, 0, 1, False), (1, 1, 0, False), (2, 0, 1, False), (2, 1, 0, False)}
    healthy = cuda_p2p.parse(read("kinghorn_2x6000ada_trpro_healthy.txt"), "h.txt")
    assert [(r.tool, r.result) for r in of(healthy, CudaP2pRun)] == [("simpleP2P", "passed"),
                                                                      ("p2pBandwidthLatencyTest", None)]
    assert of(healthy, CudaP2pVerifyError) == []


def test_abridged_markdown_paste() -> None:
    res = cuda_p2p.parse(read("kinghorn_update_4090_p2p_off_driver.md"), "u.md")
    assert res.problems == []
    runs = of(res, CudaP2pRun)
    # simpleP2P, then conjugateGradientMultiDeviceCG's bare access line, then the abridged bandwidth test
    assert [(r.tool, r.result) for r in runs] == [("simpleP2P", "waived"), (None, None),
                                                  ("p2pBandwidthLatencyTest", None)]
    assert {m.direction for m in of(res, CudaP2pMeasure)} == {"bidirectional"}
    assert cell(res, direction="bidirectional", p2p=True, src=0, dst=1) == 31.06


def test_truncated_pastes_are_problems_not_crashes() -> None:
    gtx = cuda_p2p.parse(read("nccl257_gtx1080ti_iommu_cut.out"), "g")
    assert gtx.problems == ["truncated: 'Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)' (line 28) has 2 of 4 rows"]
    acc = {(a.src, a.dst): a.can_access for a in of(gtx, CudaP2pAccess)}
    assert len(acc) == 12 and acc[(0, 1)] and acc[(3, 2)] and not acc[(0, 2)] and not acc[(3, 1)]
    assert [d.pci for d in of(gtx, CudaP2pDevice)][2:] == ["0000:82:00.0", "0000:83:00.0"]  # hex bus ids

    h100 = cuda_p2p.parse(read("nccl1264_h100_nvlink_cut.txt"), "h")
    # the excerpt ends inside row 0 of the writes matrix: all 8 cells are there (the last one cut short)
    assert h100.problems == [
        "truncated: 'Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)' (line 21) has 1 of 8 rows"]
    # every connectivity cell came from the matrix: the excerpt has no access lines
    assert {a.origin for a in of(h100, CudaP2pAccess)} == {"matrix"} and len(of(h100, CudaP2pAccess)) == 56
    assert cell(h100, direction="unidirectional", p2p=False, src=0, dst=0) == 2474.76  # 7-wide cells still split

    cut = cuda_p2p.parse(read("var_a6000_cut_mid_row.out"), "v")
    assert cut.problems == ["truncated: 'Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)' row 2 "
                            "(line 30) has 2 of 3 cells"]
    row2 = sorted((m.dst, m.value) for m in of(cut, CudaP2pMeasure) if m.p2p and m.src == 2)
    assert row2 == [(0, 2.12)]  # '1.6' may be '1.60' or '1.65': dropped


def test_field_170_is_read() -> None:
    res = cuda_p2p.parse((FIELD / "170-a6000-p2p-writes-slow-iommu-hang" / "p2pBandwidthLatencyTest.out").read_text(),
                         "f")
    on = {(m.src, m.dst): m.value for m in of(res, CudaP2pMeasure)
          if m.p2p and m.direction == "unidirectional" and m.src != m.dst}
    off = {(m.src, m.dst): m.value for m in of(res, CudaP2pMeasure)
           if not m.p2p and m.direction == "unidirectional" and m.src != m.dst}
    assert on == {(0, 1): 2.6, (0, 2): 1.58, (1, 0): 2.12, (1, 2): 1.7, (2, 0): 2.12, (2, 1): 1.6}
    assert off[(1, 2)] == 22.2 and all(on[p] < off[p] / 4 for p in on)


def test_nan_cells_and_garbage_never_raise() -> None:
    text = read("kinghorn_2x6000ada_trpro_healthy.txt").replace("26.31", "nan")
    res = cuda_p2p.parse(text, "n")
    assert math.isnan(cell(res, direction="unidirectional", p2p=True, src=0, dst=1))
    for junk in ["", "\x00\x01", "P2P Connectivity Matrix\n   D\\D 0 1\n 0 x y\n", "Device=99999999999999999999 CAN"]:
        cuda_p2p.parse(junk, "j")


def test_sniff() -> None:
    for name in ("kinghorn_2x4090_trpro_simpleP2P_failed.txt", "nccl814_6gpu_p2p_below_staged_cut.txt",
                 "nccl1264_h100_nvlink_bidir.txt", "kinghorn_update_4090_p2p_off_driver.md"):
        assert cuda_p2p.sniff(read(name)) >= 85, name
    assert cuda_p2p.sniff(read("with_topo/var_topo_h100_nv18.txt")) == 0
    assert nvidia_smi_topo.sniff(read("kinghorn_2x4090_trpro_p2pBandwidthLatencyTest.txt")) == 0
    assert ibdev2netdev.sniff(read("kinghorn_2x4090_trpro_p2pBandwidthLatencyTest.txt")) == 0
    assert nccl_tests.sniff(read("nccl814_6gpu_p2p_below_staged_cut.txt")) < 40
