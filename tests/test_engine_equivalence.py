"""The stand-in matcher (diagnose.engine.pymatch) gives durable-rules' matches: on hand-made facts at the edges of
the condition language, and on the findings of every fixture bundle, constructed and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnose.catalog.loader import load_catalog
from diagnose.engine import rete, thresholds_of
from diagnose.models import Finding, Location
from diagnose.models.rule import RuleSpec
from diagnose.pipeline import gather

ROOT = Path(__file__).resolve().parent.parent
durable = pytest.mark.skipif(rete._dr is None, reason="durable-rules is not importable here")


def _both(specs: list[RuleSpec], findings: list[Finding], th: dict[str, dict[str, float]]):  # type: ignore[no-untyped-def]
    return rete.match(specs, findings, th), rete._match_python(rete._by_kind(specs, th), findings)


def _spec(where: dict[str, object]) -> RuleSpec:
    return RuleSpec.model_validate({
        "id": "link.bad_cable", "title": "A marginal cable corrupts", "severity": "high", "status": "stable",
        "description": "a description long enough for the schema", "explains": ["link_errors"],
        "evidence": {"supports": [{"id": "c", "finding": "k", "where": where, "weight": "weak"}]},
        "references": ["x"], "playbook": "playbooks/link/bad_cable.md"})


EDGES = [{"n": {"ne": 3}}, {"n": {"lt": 3}}, {"n": {"gte": 3}}, {"n": 3}, {"n": True}, {"n": {"in": [1, 3]}},
         {"s": "a"}, {"s": {"ne": "a"}}, {"s": {"lt": "b"}}, {"n": {"lt": 3}, "s": "a"}, {"v": {"lt": "b"}},
         {"v": {"gt": "b"}}, {"v": {"lt": 2}}, {"v": {"gt": 2}}, {"v": "b"}, {"v": {"ne": "b"}}, {"v": 3}, {"v": True},
         {"v": {"gte": "3"}}, {"v": "3"}]
FACTS = [{}, {"n": 3}, {"n": 2.5}, {"n": 1}, {"n": True}, {"n": False}, {"n": "3"}, {"s": "a"}, {"s": "c"},
         {"s": 3}, {"n": 2, "s": "a"}, {"n": None}, {"v": 3}, {"v": "b"}, {"v": "3"}, {"v": "x"}, {"v": True},
         {"v": "3.5"}, {"v": 2.0}, {"v": "true"}]


@durable
@pytest.mark.parametrize("where", EDGES, ids=[str(w) for w in EDGES])
def test_the_condition_language_means_the_same_in_both_matchers(where: dict[str, object]) -> None:
    findings = [Finding(id=f"k#{i}", kind="k", summary="s", location=Location(), attrs=a)  # type: ignore[arg-type]
                for i, a in enumerate(FACTS)]
    d, p = _both([_spec(where)], findings, {})
    assert d == p


def _bundles() -> list[tuple[Path, str | None]]:
    out: list[tuple[Path, str | None]] = []
    for exp in sorted((ROOT / "fixtures").rglob("expect.yaml")):
        data = yaml.safe_load(exp.read_text()) or {}
        out.append((exp.parent, data.get("symptom")))
    return out


@durable
@pytest.mark.slow  # ~40 s: every fixture and field bundle gathered and inferred twice
def test_every_fixture_bundle_gets_the_same_diagnosis_byte_for_byte_from_both_matchers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from diagnose.engine import infer
    from diagnose.render import render_json

    cat = load_catalog()
    specs = cat.sorted_rules()
    th = thresholds_of(cat, None)
    bundles = _bundles()
    assert len(bundles) > 200
    differ = []
    for path, symptom in bundles:
        ev = gather([path], symptom)
        d, p = _both(specs, ev.findings, th)
        by_durable = render_json(infer(cat, ev.findings, ev.symptoms, ev.formats, ev.files))
        with monkeypatch.context() as m:
            m.setattr(rete, "_dr", None)
            by_python = render_json(infer(cat, ev.findings, ev.symptoms, ev.formats, ev.files))
        if d != p or by_durable != by_python:
            differ.append((path.relative_to(ROOT), sorted(set(d) ^ set(p))[:3]))
    assert not differ


def test_the_python_matcher_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAGNOSE_ENGINE", "python")
    dr, name = rete._load_durable()
    assert dr is None and name.startswith("python matcher")
