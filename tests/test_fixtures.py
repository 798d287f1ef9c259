"""Every fixture bundle, run end to end: positives rank their cause first, negatives and healthy stay unconfirmed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnose.catalog.taxonomy import TAXONOMY

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def _bundles() -> list[Path]:
    """The constructed fixtures (the field corpus, fixtures/field, is scored apart: tests/test_field.py)."""
    return sorted(p.parent for p in FIXTURES.rglob("expect.yaml") if p.relative_to(FIXTURES).parts[0] != "field")


BUNDLES = _bundles()


def _id(p: Path) -> str:
    return p.relative_to(FIXTURES).as_posix()


@pytest.mark.parametrize("bundle", BUNDLES, ids=[_id(b) for b in BUNDLES])
def test_fixture_bundle(bundle: Path, diagnosed) -> None:
    expect = yaml.safe_load((bundle / "expect.yaml").read_text()) or {}
    d = diagnosed(bundle)
    confirmed = [c.id for c in d.causes if c.verdict == "confirmed"]
    ranking = [(c.id, c.score, c.verdict) for c in d.causes]
    for c in d.causes:
        assert c.id in TAXONOMY
        assert c.evidence, f"{c.id} listed without evidence"
    if "top" in expect:
        assert d.causes, f"nothing ranked; files: {[(f.path, f.format, f.problem) for f in d.files]}"
        assert d.causes[0].id == expect["top"], ranking
        assert d.causes[0].verdict == "confirmed", ranking
        for key, val in (expect.get("location") or {}).items():
            assert getattr(d.causes[0].location, key) == val, d.causes[0].location
    nc = expect.get("not_confirmed")
    if nc == "all":
        assert confirmed == [], ranking
    elif nc:
        for cid in nc:
            assert cid not in confirmed, ranking
    for cid in expect.get("confirmed") or []:
        assert cid in confirmed, ranking
    if expect.get("top_any"):
        assert d.causes and d.causes[0].id in expect["top_any"], ranking


def test_every_rule_has_fixtures_and_healthy_bundles_exist(catalog) -> None:
    healthy = [b for b in BUNDLES if b.relative_to(FIXTURES).parts[0] == "healthy"]
    assert len(healthy) >= 5
    for rid in catalog.rules:
        base = FIXTURES / Path(*rid.split("."))
        kinds = {p.name.split("-")[0] for p in base.iterdir() if p.is_dir()} if base.is_dir() else set()
        assert {"positive", "negative"} <= kinds, rid
