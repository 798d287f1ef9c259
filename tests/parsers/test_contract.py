"""The parser contract of diagnose/parsers/base.py, held for every registered parser: the three names, and the
optional capabilities declared as base.py says (a misspelt one would silently do nothing)."""

from __future__ import annotations

import difflib
import inspect

import pytest

from diagnose import parsers
from diagnose.parsers.base import CAPABILITY_NAMES, capabilities

MODULES = parsers.registry()


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_a_parser_has_its_names_and_its_capabilities_as_declared(mod) -> None:  # type: ignore[no-untyped-def]
    caps = capabilities(mod)
    assert isinstance(mod.FORMAT, str) and mod.FORMAT
    if caps.binary:
        assert callable(mod.sniff_bytes) and callable(mod.parse_bytes)
        assert list(inspect.signature(mod.parse_bytes).parameters)[:3] == ["data", "source", "host"]
    else:
        assert callable(mod.sniff) and callable(mod.parse)
        assert list(inspect.signature(mod.parse).parameters)[:3] == ["text", "source", "host"]
    for flag in ("BINARY", "STREAMABLE", "MIXABLE", "COLUMNS_WHEN_LARGE"):
        assert getattr(mod, flag, False) in (True, False), f"{mod.FORMAT}.{flag} is not a bool"
    if caps.bulk:
        assert list(inspect.signature(mod.parse_bytes_bulk).parameters)[:3] == ["data", "source", "host"]
        assert caps.columns_when_large
    if caps.ns_per_byte is not None:
        assert caps.ns_per_byte > 0
    if caps.binary:
        assert not caps.streamable and not caps.mixable  # chunks of lines and interleaved logs are text


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_no_capability_is_misspelt(mod) -> None:  # type: ignore[no-untyped-def]
    """A module-level name one letter away from a capability (STREAMABEL, MIXEABLE, parse_byte_bulk) is a typo."""
    near = [(name, cap) for name in vars(mod) if name not in CAPABILITY_NAMES
            for cap in difflib.get_close_matches(name, CAPABILITY_NAMES, n=1, cutoff=0.85)]
    assert near == []


def test_the_capabilities_are_used_by_some_parser() -> None:
    caps = [capabilities(m) for m in MODULES]
    assert any(c.binary for c in caps) and any(c.streamable for c in caps) and any(c.mixable for c in caps)
    assert any(c.bulk for c in caps) and any(c.ns_per_byte for c in caps)
