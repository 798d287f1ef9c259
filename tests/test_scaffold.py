"""``diagnose rules new``: a new cause's files, marked TODO, that lint refuses until they are written."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from diagnose.catalog.lint import lint
from diagnose.interfaces.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _checkout_without(tmp_path: Path, domain: str, name: str) -> Path:
    """A copy of the catalog (rules and playbooks) without one cause's rule, playbook and fixtures."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "rules", root / "rules")
    shutil.copytree(ROOT / "playbooks", root / "playbooks")
    (root / "rules" / domain / f"{name}.yaml").unlink()
    (root / "playbooks" / domain / f"{name}.md").unlink()
    return root


def test_a_scaffold_holds_the_rule_playbook_and_two_fixtures_and_lint_names_what_is_left(tmp_path: Path) -> None:
    root = _checkout_without(tmp_path, "host", "shm_too_small")
    r = CliRunner().invoke(app, ["rules", "new", "host.shm_too_small", "--root", str(root)])
    assert r.exit_code == 0, r.output
    written = sorted(r.stdout.split())
    assert written == sorted(["rules/host/shm_too_small.yaml", "playbooks/host/shm_too_small.md",
                              "fixtures/host/shm_too_small/positive-TODO/README.md",
                              "fixtures/host/shm_too_small/positive-TODO/expect.yaml",
                              "fixtures/host/shm_too_small/negative-TODO/README.md",
                              "fixtures/host/shm_too_small/negative-TODO/expect.yaml"])
    rule = yaml.safe_load((root / "rules/host/shm_too_small.yaml").read_text())
    assert rule["id"] == "host.shm_too_small" and rule["playbook"] == "playbooks/host/shm_too_small.md"
    assert yaml.safe_load((root / "fixtures/host/shm_too_small/positive-TODO/expect.yaml").read_text())["top"] == \
        "host.shm_too_small"
    assert yaml.safe_load((root / "fixtures/host/shm_too_small/negative-TODO/expect.yaml").read_text())[
        "not_confirmed"] == ["host.shm_too_small"]
    problems = [str(p) for p in lint(root, sites=[])]
    mine = [p for p in problems if "shm_too_small" in p]
    # what is left to write: the finding the clause weighs, and the fixtures (no other complaint: the schema,
    # the playbook's sections and the taxonomy are satisfied by the scaffold)
    assert any(p.startswith("rules/host/shm_too_small.yaml") and "todo_finding_kind" in p for p in mine), mine
    assert not [p for p in mine if "playbooks/" in p or "should" in p or "no rule for" in p], mine
    again = CliRunner().invoke(app, ["rules", "new", "host.shm_too_small", "--root", str(root)])
    assert again.exit_code == 2 and "has files already" in again.stderr


def test_an_id_outside_the_taxonomy_or_malformed_is_refused_and_nothing_written(tmp_path: Path) -> None:
    for bad, says in (("link.made_up", "not in the taxonomy"), ("Link.Bad", "is not a cause id"),
                      ("bad_cable", "is not a cause id")):
        r = CliRunner().invoke(app, ["rules", "new", bad, "--root", str(tmp_path)])
        assert r.exit_code == 2 and says in r.stderr, r.output
    assert list(tmp_path.iterdir()) == []
