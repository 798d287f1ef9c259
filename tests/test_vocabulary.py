"""The declared finding vocabulary between extractors and rules (diagnose/evidence/vocabulary.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from diagnose.catalog.lint import lint
from diagnose.evidence import context
from diagnose.evidence.vocabulary import KINDS, NOT_WEIGHED, problems

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "tests" / "site_pack"


def _pack_with(tmp_path: Path, old: str, new: str) -> Path:
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    rule = pack / "rules" / "link" / "recalled_optics_lot.yaml"
    text = rule.read_text()
    assert old in text
    rule.write_text(text.replace(old, new))
    return pack


def test_a_rule_naming_a_kind_nothing_emits_fails_lint(tmp_path: Path) -> None:
    pack = _pack_with(tmp_path, "finding: port_counter_errors", "finding: port_counter_error")
    msgs = [p.message for p in lint(sites=[pack])]
    assert any("'phy_errors_rising' names finding 'port_counter_error', which nothing emits" in m for m in msgs)


def test_a_rule_testing_an_attribute_the_kind_never_carries_fails_lint(tmp_path: Path) -> None:
    pack = _pack_with(tmp_path, "delta: {gte: $rising_min}", "deltas: {gte: $rising_min}")
    msgs = [p.message for p in lint(sites=[pack])]
    assert any("tests attribute(s) deltas that finding 'port_counter_errors' never carries" in m for m in msgs)
    assert lint(sites=[PACK]) == []  # the shipped pack names what is declared


def test_an_undeclared_finding_is_reported_once_and_still_made() -> None:
    f = context.finding("no_such_kind_here", "x", attrs={"a": 1})
    g = context.finding("busbw_measured", "x", attrs={"ratio": 0.5, "not_an_attr": 1})
    got = sorted(context.UNDECLARED)
    context.UNDECLARED.clear()  # this test made them on purpose
    assert f.kind == "no_such_kind_here" and g.attrs["not_an_attr"] == 1
    assert got == ["finding 'busbw_measured' has undeclared attribute(s) not_an_attr",
                   "undeclared finding kind 'no_such_kind_here'"]
    assert problems("busbw_measured", {"ratio": 0.5}) == []


def test_every_declared_kind_is_emitted_somewhere_and_shown_only_kinds_are_declared() -> None:
    assert NOT_WEIGHED <= set(KINDS)
    text = "\n".join(p.read_text() for p in (ROOT / "diagnose").rglob("*.py") if p.name != "vocabulary.py")
    text += "\n".join(p.read_text() for p in (ROOT / "rules" / "_messages").glob("*.yaml"))
    quoted = set(re.findall(r"[\"']([a-z][a-z0-9_]+)[\"']", text)) | set(re.findall(r"finding: ([a-z0-9_]+)", text))
    assert sorted(set(KINDS) - quoted) == []  # a kind whose emitter was removed must leave the vocabulary too


def test_a_rule_comparing_an_attribute_with_a_value_of_another_type_fails_lint(tmp_path: Path) -> None:
    """``delta`` is a number and ``counter`` a name: a quoted number, an order on a name and a threshold on a name
    never match (durable-rules compares 2 and '2' as different)."""
    cases = {
        "delta: {gte: $rising_min}": ("delta: '5'", "'delta' of 'port_counter_errors' is int, never str '5'"),
        "counter: {in: [symbol_error, link_error_recovery]}": (
            "counter: {gte: 3}", "'counter' of 'port_counter_errors' is str: 'gte' 3 compares it with a number"),
    }
    for old, (new, said) in cases.items():
        msgs = [p.message for p in lint(sites=[_pack_with(tmp_path / str(len(said)), old, new)])]
        assert any(said in m for m in msgs), msgs
    ok = _pack_with(tmp_path / "ok", "delta: {gte: $rising_min}", "delta: {in: ['5', 5]}")  # one of them can match
    assert not any("never str" in p.message for p in lint(sites=[ok]))


def test_a_finding_whose_attribute_has_another_type_is_reported() -> None:
    context.finding("busbw_measured", "x", attrs={"ratio": "0.5", "nodes": 2})
    got = sorted(context.UNDECLARED)
    context.UNDECLARED.clear()  # made on purpose
    assert got == ["finding 'busbw_measured' attribute 'ratio' is str, declared float"]
    assert problems("busbw_measured", {"ratio": 1, "nodes": 2, "collective": None}) == []  # an int is a float too
    assert problems("busbw_measured", {"nodes": True}) == ["finding 'busbw_measured' attribute 'nodes' is bool, "
                                                           "declared int"]
