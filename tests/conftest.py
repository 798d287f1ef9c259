from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def catalog():
    from diagnose.catalog.loader import load_catalog

    return load_catalog(ROOT)


@pytest.fixture(autouse=True)
def _findings_are_declared():
    """Every finding a test makes emit has a kind and attributes declared in diagnose.evidence.vocabulary."""
    from diagnose.evidence import context

    before = set(context.UNDECLARED)
    yield
    new = sorted(context.UNDECLARED - before)
    context.UNDECLARED.difference_update(new)
    assert not new, f"findings outside diagnose/evidence/vocabulary.py: {new}"
