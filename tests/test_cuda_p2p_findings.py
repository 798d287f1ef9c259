"""What the CUDA samples' P2P tests say about the peer path, read from real runs (tests/data/cuda_p2p, see its README)
and weighed by the rules."""

from __future__ import annotations

from pathlib import Path

from diagnose.catalog.loader import load_catalog
from diagnose.pipeline import gather

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "cuda_p2p"


def kinds(*names: str, tmp: Path | None = None) -> dict[str, list[dict[str, object]]]:
    paths: list[Path] = []
    for n in names:
        if tmp is not None:  # per-host folder, as a bundle holds a host's captures
            (tmp / Path(n).name).write_bytes((DATA / n).read_bytes())
        paths.append(DATA / n if tmp is None else tmp / Path(n).name)
    out: dict[str, list[dict[str, object]]] = {}
    for f in gather(paths).findings:
        if f.kind.startswith("p2p_"):
            out.setdefault(f.kind, []).append(dict(f.attrs, host=f.location.host, refs=len(f.evidence)))
    return out


def threshold(rule: str, name: str) -> float:
    return load_catalog().rules[rule].thresholds[name].default


def test_iommu_redirected_writes_are_far_below_the_staged_copy() -> None:
    got = kinds("mlengineering1_a6000_iommu_cut.out")
    (slow,) = got["p2p_enabled_slower"]
    assert slow["all_slower"] is True and slow["comparisons"] == 6 and slow["pairs"] == 3
    assert slow["worst_pair"] == "2->1" and slow["worst_enabled_gbps"] == 1.6 and slow["worst_disabled_gbps"] == 21.98
    assert slow["median_ratio"] < threshold("host.pcie_acs_iommu", "p2p_slow_ratio")
    assert "p2p_bandwidth_ok" not in got


def test_slower_without_access_lines_still_compares_every_pair() -> None:
    (slow,) = kinds("nccl814_6gpu_p2p_below_staged_cut.txt")["p2p_enabled_slower"]
    # writes and reads matrices against the staged one, 30 ordered pairs each
    assert slow["comparisons"] == 60 and slow["access_known"] is False and slow["all_slower"] is True
    assert 0.4 < float(slow["median_ratio"]) < threshold("host.pcie_acs_iommu", "p2p_slow_ratio")


def test_healthy_pcie_p2p_is_a_fact_against_redirection() -> None:
    got = kinds("kinghorn_2x6000ada_trpro_healthy.txt")
    (ok,) = got["p2p_bandwidth_ok"]
    assert ok["host"] == "trp64" and ok["comparisons"] == 4 and float(ok["worst_ratio"]) > 1.0
    assert "p2p_enabled_slower" not in got and "p2p_copy_corrupt" not in got


def test_one_slow_direction_is_reported_but_not_below_the_rule_threshold() -> None:
    (slow,) = kinds("kinghorn_2x4090_trpro_p2pBandwidthLatencyTest.txt")["p2p_enabled_slower"]
    assert slow["slower"] == 1 and slow["worst_pair"] == "1->0" and slow["all_slower"] is False
    assert float(slow["median_ratio"]) > 1.0
    assert float(slow["worst_ratio"]) >= threshold("host.pcie_acs_iommu", "p2p_slow_ratio")


def test_simplep2p_verification_errors_are_a_corrupt_peer_copy() -> None:
    (bad,) = kinds("kinghorn_2x4090_trpro_simpleP2P_failed.txt")["p2p_copy_corrupt"]
    assert bad == {"errors": 12, "pair": "0-1", "memcpy_gbps": 10.39, "host": "trp64", "refs": 8}
    assert "p2p_copy_corrupt" not in kinds("kinghorn_2x6000ada_trpro_healthy.txt")


def test_pairs_without_access_are_counted_once_per_host() -> None:
    got = kinds("kinghorn_2x3090_trpro_no_p2p.txt")
    # simpleP2P and p2pBandwidthLatencyTest both say so: one fact
    assert got["p2p_access_denied"] == [
        {"pairs": 1, "allowed": 0, "all_denied": True, "topology_known": False, "host": "trp64", "refs": 4}]
    assert "p2p_access_denied_same_switch" not in got
    gtx = kinds("nccl257_gtx1080ti_iommu_cut.out")["p2p_access_denied"]
    assert [(g["pairs"], g["allowed"], g["all_denied"]) for g in gtx] == [(4, 2, False)]


def test_denied_pairs_across_sockets_are_normal_under_one_switch_they_are_not(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    got = kinds("nccl257_gtx1080ti_iommu_cut.out", "with_topo/var_topo_4gpu_two_switches.txt", tmp=a)
    assert got["p2p_access_denied"][0]["topology_known"] is True
    assert "p2p_access_denied_same_switch" not in got  # the CANNOT pairs are SYS
    b = tmp_path / "b"
    b.mkdir()
    got = kinds("kinghorn_2x3090_trpro_no_p2p.txt", "with_topo/var_topo_2gpu_pix.txt", tmp=b)
    assert got["p2p_access_denied_same_switch"] == [{"pairs": 1, "host": "trp64", "refs": 4}]


def test_an_nvlink_pair_with_pcie_like_p2p(tmp_path: Path) -> None:
    got = kinds("kinghorn_2x6000ada_trpro_healthy.txt", "with_topo/var_topo_2gpu_nv4.txt", tmp=tmp_path)
    (nv,) = got["p2p_nvlink_pairs"]
    assert nv["links"] == 4 and nv["pairs"] == 1 and nv["min_gbps"] == 26.31
    assert float(nv["min_ratio"]) < threshold("gpu.nvlink_degraded", "nvlink_p2p_gain_min")


def test_nvlink_pairs_far_above_pcie(tmp_path: Path) -> None:
    got = kinds("nccl1264_h100_nvlink_cut.txt", "with_topo/var_topo_h100_nv18.txt", tmp=tmp_path)
    (nv,) = got["p2p_nvlink_pairs"]
    assert nv["links"] == 18 and nv["pairs"] == 7  # row 0 of the cut writes matrix: 0->1 .. 0->7
    assert float(nv["min_ratio"]) > 9 and float(nv["min_ratio"]) >= threshold("gpu.nvlink_degraded",
                                                                            "nvlink_p2p_gain_min")
    assert "p2p_bandwidth_ok" in got
    assert "p2p_nvlink_pairs" not in kinds("nccl1264_h100_nvlink_cut.txt")  # no topology: NVLink is not known


def test_every_kind_is_weighed_by_a_rule() -> None:
    used = {c.finding for spec in load_catalog().rules.values()
            for c in (*spec.evidence.supports, *spec.evidence.against, *spec.evidence.expects)}
    assert {"p2p_enabled_slower", "p2p_bandwidth_ok", "p2p_copy_corrupt", "p2p_access_denied",
            "p2p_access_denied_same_switch", "p2p_nvlink_pairs"} <= used


def test_the_field_case_ranks_acs_iommu_on_the_p2p_evidence() -> None:
    from diagnose.pipeline import triage

    d = triage([ROOT / "fixtures" / "field" / "170-a6000-p2p-writes-slow-iommu-hang" / "p2pBandwidthLatencyTest.out"])
    assert d.causes and d.causes[0].id == "host.pcie_acs_iommu"
    healthy = triage([DATA / "kinghorn_2x6000ada_trpro_healthy.txt"], "NCCL all_reduce hangs between the two GPUs")
    assert all(c.id != "host.pcie_acs_iommu" for c in healthy.causes)  # the healthy matrix rules it out
