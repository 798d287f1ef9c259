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


@pytest.fixture(scope="session")
def diagnosed(catalog):
    """The triage of a fixture bundle with its expect.yaml's symptom, made once a session (tests/test_fixtures.py
    and tests/test_render_text.py read the same ones; a Diagnosis is not changed by reading it)."""
    import yaml

    from diagnose.pipeline import triage

    made: dict = {}

    def get(bundle):
        if bundle not in made:
            symptom = (yaml.safe_load((bundle / "expect.yaml").read_text()) or {}).get("symptom")
            made[bundle] = triage([bundle], symptom, catalog=catalog)
        return made[bundle]

    return get


@pytest.fixture(autouse=True)
def _findings_are_declared():
    """Every finding a test makes emit has a kind and attributes declared in diagnose.evidence.vocabulary."""
    from diagnose.evidence import context

    before = set(context.UNDECLARED)
    yield
    new = sorted(context.UNDECLARED - before)
    context.UNDECLARED.difference_update(new)
    assert not new, f"findings outside diagnose/evidence/vocabulary.py: {new}"
