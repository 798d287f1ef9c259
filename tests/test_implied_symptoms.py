"""What a finding says about the symptom when no one said it: the symptom table and the busbw threshold."""

from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import gather
from diagnose.symptoms import FINDING_SYMPTOMS, SLOW_BUSBW_RATIO, implied_symptom

ROOT = Path(__file__).resolve().parents[1]


def test_a_measured_busbw_under_the_threshold_is_a_slow_collective_and_above_it_is_not() -> None:
    assert implied_symptom("busbw_measured", {"ratio": SLOW_BUSBW_RATIO - 0.01}) == "collective_slow"
    assert implied_symptom("busbw_measured", {"ratio": SLOW_BUSBW_RATIO}) is None
    assert implied_symptom("busbw_measured", {"ratio": None}) is None
    assert implied_symptom("busbw_measured", {"ratio": "not a number"}) is None
    assert implied_symptom("watchdog_timeout", {}) == FINDING_SYMPTOMS["watchdog_timeout"] == "collective_timeout"
    assert implied_symptom("no_such_kind", {}) is None


def test_the_rules_slow_busbw_threshold_has_the_same_default() -> None:
    import yaml

    for rule in ("host/gdr_unavailable", "link/degraded"):
        spec = yaml.safe_load((ROOT / "rules" / f"{rule}.yaml").read_text())
        assert spec["thresholds"]["busbw_ratio_low"]["default"] == SLOW_BUSBW_RATIO


def test_a_bundle_with_a_slow_nccl_tests_run_and_no_symptom_given_is_read_as_slow() -> None:
    ev = gather([ROOT / "fixtures/host/gdr_unavailable/positive-no-gdrdma-after-driver-upgrade"])
    slow = [s for s in ev.symptoms if s.kind == "collective_slow"]
    assert slow and any(f.kind == "busbw_measured" and float(f.attrs["ratio"] or 1) < SLOW_BUSBW_RATIO  # type: ignore[arg-type]
                        for f in ev.findings)
