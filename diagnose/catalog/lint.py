"""Catalog checks shared by the tests and ``diagnose rules lint``."""

from __future__ import annotations

from pathlib import Path

from diagnose.catalog.loader import CatalogError, load_catalog

# The number of rules is pinned: adding or removing one is a deliberate change to this number.
PINNED_RULE_COUNT = 32


def _fixture_dirs(root: Path, rid: str) -> tuple[list[Path], list[Path]]:
    base = root / "fixtures" / Path(*rid.split("."))
    if not base.is_dir():
        return [], []
    pos = sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("positive"))
    neg = sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("negative"))
    return pos, neg


def lint(root: Path | None = None) -> list[CatalogError]:
    cat = load_catalog(root)
    problems = list(cat.errors)
    for rid in sorted(cat.rules):
        rel = f"rules/{rid.replace('.', '/')}.yaml"
        if rid not in cat.playbooks:
            problems.append(CatalogError(rel, 1, f"no playbook for '{rid}'"))
        pos, neg = _fixture_dirs(cat.root, rid)
        if (cat.root / "fixtures").is_dir():
            if not pos:
                problems.append(CatalogError(rel, 1, f"no positive fixture under fixtures/{rid.replace('.', '/')}/"))
            if not neg:
                problems.append(CatalogError(rel, 1, f"no negative fixture under fixtures/{rid.replace('.', '/')}/"))
            for d in pos + neg:
                if not (d / "expect.yaml").is_file():
                    problems.append(CatalogError(d.relative_to(cat.root).as_posix(), 0, "fixture lacks expect.yaml"))
                if not (d / "README.md").is_file():
                    problems.append(CatalogError(d.relative_to(cat.root).as_posix(), 0, "fixture lacks README.md"))
    if len(cat.rules) != PINNED_RULE_COUNT:
        problems.append(CatalogError("rules", 0, f"{len(cat.rules)} rules, but the pinned count is {PINNED_RULE_COUNT}"))
    return sorted(set(problems), key=lambda e: (e.file, e.line, e.message))
