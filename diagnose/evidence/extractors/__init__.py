"""Vectorised extractors: frames in, a small set of findings out.

An extractor is a function ``(ctx: Context) -> list[Finding]`` registered with :func:`extractor`.
Extractors measure and classify; thresholds that decide a cause live in the rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnose.evidence.context import Context
from diagnose.models.diagnosis import Finding

Extractor = Callable[[Context], list[Finding]]
_REGISTRY: list[tuple[str, Extractor]] = []
FABRIC_LANE: set[str] = set()  # extractors that read the port-counter table or the fabric graph
# the tables only the counter table and the fabric graph are built from (no extractor outside FABRIC_LANE reads
# them), and the other tables FABRIC_LANE extractors read: a process that runs the fabric extractors apart from
# the others needs these and nothing else (tests/test_fabric_lane.py checks both lists against what is read)
FABRIC_TABLES = frozenset({"PortCounter", "PortCounterWide", "FabricLink", "FabricNode", "FabricPortState"})
FABRIC_LANE_READS = frozenset({
    "CudaError", "EnvSetting", "FreeText", "IbPort", "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn", "PeermemEvent",
    "PgError", "PortInfo", "SmEvent", "SmInfo", "ToolError", "ToolMessage", "WatchdogTimeout",
    "NcclTestsRank", "NcclTestsRow", "NcclTestsRun",  # adaptive_routing: the scaling curve
    "Sl2VlEntry", "VlArbEntry", "SmConfigOption",  # qos_path, and the qos-policy.conf records it reads:
    "QosLevel", "QosUlp", "QosVlArbScope", "QosSl2VlScope",
    "SaPath",  # sa_paths (it names the ends through the fabric's nodes)
    "PkeyEntry", "PartitionMember", "LftEntry",
    "ConfigChange"})  # config_changes (an SM-side change is placed at the SM node, named through the fabric)  # partitions (LftEntry: the names it reads)


def extractor(fn: Extractor | None = None, *, fabric: bool = False) -> Any:
    """Register ``fn``. ``fabric=True`` marks an extractor that reads ``ctx.counters`` or ``ctx.fabric``: on a large
    bundle those run together in a second process while this one runs the others (see diagnose.runtime.parallel),
    so the table and the graph are built there only."""

    def register(f: Extractor) -> Extractor:
        name = f"{f.__module__}.{f.__name__}"
        _REGISTRY.append((name, f))
        if fabric:
            FABRIC_LANE.add(name)
        return f

    return register(fn) if fn is not None else register


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
