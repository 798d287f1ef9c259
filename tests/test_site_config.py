"""A site's own rule packs and threshold settings: loaded, linted, weighed, and said in the output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.catalog.lint import lint
from diagnose.catalog.loader import load_catalog
from diagnose.catalog.site import SiteConfigError, check, load
from diagnose.catalog.taxonomy import TAXONOMY
from diagnose.pipeline import triage
from diagnose.render import render_json

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "tests" / "site_pack"  # not under tests/data, which holds tool output only
BUNDLE = ROOT / "fixtures" / "link" / "bad_cable" / "positive-symbol-errors-rising"


def test_the_file_then_the_environment_then_the_cli_set_a_threshold_and_each_says_where(tmp_path: Path) -> None:
    (tmp_path / "diagnose.toml").write_text(
        'rule_packs = ["packs/a"]\n[thresholds]\n"link.bad_cable.rising_min" = 20\n"mtu.mismatch.x" = 1\n')
    cfg = load(environ={"DIAGNOSE_THRESHOLDS": "mtu.mismatch.x=2", "DIAGNOSE_RULES": "/srv/b"}, cwd=tmp_path)
    assert cfg.thresholds == {"link.bad_cable.rising_min": 20.0, "mtu.mismatch.x": 2.0}
    assert cfg.origins["link.bad_cable.rising_min"].endswith("diagnose.toml")
    assert cfg.origins["mtu.mismatch.x"] == "DIAGNOSE_THRESHOLDS"
    assert cfg.rule_packs == [tmp_path / "packs" / "a", Path("/srv/b")]
    cli = load(environ={}, cwd=tmp_path, thresholds=["link.bad_cable.rising_min=30"])
    assert cli.thresholds["link.bad_cable.rising_min"] == 30.0 and cli.origins["link.bad_cable.rising_min"] == "--threshold"
    (bad,) = check(cli, load_catalog(sites=[]))  # the file's unknown name is reported, with where it was set
    assert "'mtu.mismatch.x' is no threshold of the catalog" in bad and bad.startswith(str(tmp_path))
    with pytest.raises(SiteConfigError):
        load(environ={"DIAGNOSE_THRESHOLDS": "link.bad_cable.rising_min=lots"}, cwd=tmp_path)
    with pytest.raises(SiteConfigError):
        load(environ={"DIAGNOSE_THRESHOLDS": "rising_min=3"}, cwd=tmp_path)


def test_a_site_pack_loads_lints_clean_and_fires_beside_the_built_in_rules() -> None:
    cat = load_catalog(sites=[PACK])
    assert "site.link.recalled_optics_lot" in cat.rules and cat.root_of("site.link.recalled_optics_lot") == PACK
    assert sorted(s.id for s in cat.builtin()) == sorted(TAXONOMY)  # one rule per cause id of the taxonomy
    assert lint(sites=[PACK]) == []
    d = triage([BUNDLE], catalog=cat)
    assert "site.link.recalled_optics_lot" in [c.id for c in d.causes]
    assert d.settings is not None and d.settings.rule_packs == ["site_pack"]


def test_a_site_rule_outside_its_namespace_is_a_lint_problem(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    (pack / "rules" / "link").mkdir(parents=True)
    text = (PACK / "rules" / "link" / "recalled_optics_lot.yaml").read_text()
    (pack / "rules" / "link" / "recalled_optics_lot.yaml").write_text(
        text.replace("id: site.link.recalled_optics_lot", "id: link.recalled_optics_lot"))
    msgs = [p.message for p in lint(sites=[pack])]
    assert any("does not match its path ('site.link.recalled_optics_lot')" in m for m in msgs)


def test_an_override_changes_the_verdict_and_the_json_header_records_it() -> None:
    shipped = triage([BUNDLE], overrides={})
    assert shipped.settings is None and '"settings"' not in render_json(shipped)
    strict = triage([BUNDLE], overrides={"link.bad_cable.rising_min": 1e9}, origins={"link.bad_cable.rising_min": "t"})
    header = json.loads(render_json(strict))["settings"]
    assert header == {"thresholds": {"link.bad_cable.rising_min": {"value": 1e9, "default": 10.0, "origin": "t"}},
                      "rule_packs": []}
    def score(d):  # type: ignore[no-untyped-def]
        return next(c.score for c in d.causes if c.id == "link.bad_cable")
    assert score(strict) < score(shipped)


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_the_cli_takes_packs_and_thresholds_and_refuses_a_threshold_that_names_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIAGNOSE_", "XDG_"))}
    env.update(HOME=str(tmp_path), COLUMNS="160")
    r = _cli("triage", str(BUNDLE), "--format", "json", "--rules", str(PACK),
             "--threshold", "link.bad_cable.rising_min=15", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["settings"]["rule_packs"] == ["site_pack"]
    assert out["settings"]["thresholds"]["link.bad_cable.rising_min"]["origin"] == "--threshold"
    shown = _cli("rules", "show", "link.bad_cable", env={**env, "DIAGNOSE_THRESHOLDS": "link.bad_cable.rising_min=15"},
                 cwd=tmp_path).stdout
    assert "`rising_min` = 15 (set by DIAGNOSE\\_THRESHOLDS; default 10)" in shown
    bad = _cli("triage", str(BUNDLE), "--threshold", "link.bad_cable.no_such=1", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "no threshold of the catalog" in bad.stderr
    lint_site = _cli("rules", "lint", env={**env, "DIAGNOSE_RULES": str(PACK)}, cwd=tmp_path)
    assert lint_site.returncode == 0, lint_site.stdout
