"""The field corpus (fixtures/field: real incidents from public threads) and how it is scored."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnose.bench import FieldBench, FieldCase, bench_field, is_field
from diagnose.catalog.taxonomy import TAXONOMY

FIELD = Path(__file__).resolve().parent.parent / "fixtures" / "field"
CASES = sorted(p.parent for p in FIELD.glob("*/expect.yaml"))
KEYS = {"id", "source", "url", "title", "symptom", "root_cause", "acceptable", "location", "resolution",
        "confirmation", "difficulty"}
# the figures of the README's accuracy section, as floors: a change that loses field cases fails here
TOP1_FLOOR = 0.95
TOP3_FLOOR = 0.98


def test_the_corpus_holds_the_real_cases() -> None:
    assert len(CASES) >= 96
    assert (FIELD / "INDEX.md").is_file()
    index = (FIELD / "INDEX.md").read_text()
    assert all(c.name in index for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_is_cited_labelled_and_its_files_carry_no_answer(case: Path) -> None:
    exp = yaml.safe_load((case / "expect.yaml").read_text())
    assert KEYS <= set(exp), set(exp) ^ KEYS
    assert exp["id"] == case.name
    assert exp["root_cause"] in TAXONOMY and all(a in TAXONOMY for a in exp["acceptable"])
    assert exp["url"].startswith("https://") and exp["confirmation"].strip()
    assert exp["difficulty"] in ("easy", "medium", "hard")
    assert (case / "README.md").is_file()
    files = [p for p in case.rglob("*") if p.is_file() and p.name not in ("expect.yaml", "README.md")]
    assert files, "a case without evidence files"
    name = exp["root_cause"].split(".", 1)[1]
    for f in files:
        assert name not in f.name.lower().replace("-", "_"), f.name
    assert exp["root_cause"] not in exp["symptom"]


def test_scoring_takes_the_first_named_cause_and_the_acceptable_ids() -> None:
    b = FieldBench([
        FieldCase("a", "host.shm_too_small", [], "easy", ["host.shm_too_small", "nccl.version_mismatch"]),
        FieldCase("b", "mtu.mismatch", ["roce.gid_index"], "hard", ["roce.gid_index"]),
        FieldCase("c", "link.degraded", [], "medium", ["host.gdr_unavailable", "fabric.congestion", "link.degraded"]),
        FieldCase("d", "gpu.xid_error", [], "medium", []),
    ])
    d = b.to_dict()
    assert (d["cases"], d["top1"], d["top3"], d["no_cause"]) == (4, 2, 3, 1)
    assert d["confusion"] == {"gpu.xid_error": {"none": 1}, "link.degraded": {"host.gdr_unavailable": 1}}
    assert d["per_cause"]["link.degraded"] == {"cases": 1, "top1": 0, "top3": 1}
    assert "top-1 50% (2/4)" in b.table()


def test_field_folders_are_told_from_constructed_fixtures() -> None:
    assert is_field(FIELD)
    assert not is_field(FIELD.parent / "host")


@pytest.mark.slow
def test_the_field_figures_hold() -> None:
    res = bench_field(FIELD)
    d = res.to_dict()
    n = d["cases"]
    assert n == len(CASES)
    assert d["top1"] >= TOP1_FLOOR * n, res.table()
    assert d["top3"] >= TOP3_FLOOR * n, res.table()
    assert d["no_cause"] <= 0.02 * n, res.table()
