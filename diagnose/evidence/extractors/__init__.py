"""Vectorised extractors: frames in, a small set of findings out.

An extractor is a function ``(ctx: Context) -> list[Finding]`` registered with :func:`extractor`.
Extractors measure and classify; thresholds that decide a cause live in the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from diagnose.evidence.context import Context
from diagnose.models.diagnosis import Finding

Extractor = Callable[[Context], list[Finding]]
_REGISTRY: list[tuple[str, Extractor]] = []
FABRIC_LANE: set[str] = set()  # extractors that read the port-counter table or the fabric graph
# the tables only the counter table and the fabric graph are built from (no extractor outside FABRIC_LANE reads
# them): a process that runs the fabric extractors apart from the others needs these and fabric_lane_reads()
FABRIC_TABLES = frozenset({"PortCounter", "PortCounterWide", "FabricLink", "FabricNode", "FabricPortState"})


@dataclass(frozen=True)
class Declared:
    """What an extractor reads (frame names, those its ``ctx.counters``/``ctx.fabric``/``ctx.messages`` are built from
    included) and the finding kinds it may emit (a function of none for a catalog-driven extractor)."""

    reads: frozenset[str]
    emits: frozenset[str] | Callable[[], Iterable[str]]

    def kinds(self) -> frozenset[str]:
        return self.emits if isinstance(self.emits, frozenset) else frozenset(self.emits())


DECLARED: dict[str, Declared] = {}


def extractor(fn: Extractor | None = None, *, fabric: bool = False, reads: Iterable[str] = (),
              emits: Iterable[str] | Callable[[], Iterable[str]] = ()) -> Any:
    """Register ``fn`` with the frames it ``reads`` and the finding kinds it ``emits`` (tests/test_extractor_
    declarations.py holds every extractor to both, and every kind to the vocabulary). ``fabric=True`` marks an
    extractor that reads ``ctx.counters`` or ``ctx.fabric``: on a large bundle those run together in a second
    process while this one runs the others (see diagnose.runtime.parallel), so the table and the graph are built
    there only, from FABRIC_TABLES and :func:`fabric_lane_reads`."""

    def register(f: Extractor) -> Extractor:
        name = f"{f.__module__}.{f.__name__}"
        _REGISTRY.append((name, f))
        DECLARED[name] = Declared(frozenset(reads), emits if callable(emits) else frozenset(emits))
        if fabric:
            FABRIC_LANE.add(name)
        return f

    return register(fn) if fn is not None else register


def fabric_lane_reads() -> frozenset[str]:
    """The tables other than FABRIC_TABLES that the fabric extractors read (from their ``reads``): what a process
    running them apart needs besides its own fabric rows."""
    all_extractors()
    return frozenset().union(*(DECLARED[n].reads for n in FABRIC_LANE)) - FABRIC_TABLES


def all_extractors() -> list[tuple[str, Extractor]]:
    """Every registered extractor, sorted by qualified name (deterministic order).

    Modules in this package are discovered, so adding an extractor is adding a module.
    """
    import importlib
    import pkgutil

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    return sorted(set(_REGISTRY), key=lambda t: t[0])
