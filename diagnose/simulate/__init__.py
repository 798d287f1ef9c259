"""A deterministic, seeded GPU-cluster incident simulator that writes bundles in the real tools' formats.

    from diagnose.simulate import Fault, simulate
    simulate("/tmp/case", hosts=64, faults=[Fault("link.bad_cable", "gpu-a003/mlx5_2", end="hca")], seed=7)
    simulate("/tmp/case2", hosts=16, faults=["host.memlock_limit", "fabric.congestion@leaf-a-r3"], seed=3)

Every cause id of the taxonomy can be injected (``CAUSES``; the six short kinds of the first version are
aliases), alone or together with causes it can coexist with (:func:`compatible`). The fabric is a
rail-optimized fat tree of DGX H100-class hosts, InfiniBand NDR by default or RoCE when a RoCE cause asks for it
(or ``link_layer="roce"``). The bundle holds the job's NCCL log and nccl-tests run, ibstat and dmesg of the
job's hosts, the fabric's topology and port counters (InfiniBand), the host tools the injected faults call for,
and ``truth.yaml`` (what was injected, and where). The same arguments give byte-identical files. See
:mod:`diagnose.simulate.topology`, :mod:`diagnose.simulate.faults`, :mod:`diagnose.simulate.signatures` and
:mod:`diagnose.simulate.writers`.
"""

from __future__ import annotations

from pathlib import Path

from diagnose.simulate.faults import (
    ALIASES,
    CAUSES,
    KINDS,
    VARIANTS,
    CauseSpec,
    Fault,
    Injected,
    Location,
    cause_id,
    compatible,
    link_layer_for,
    resolve,
)
from diagnose.simulate.topology import End, FatTree, Link, Node, build_fat_tree
from diagnose.simulate.writers import build_scenario, write_bundle

__all__ = [
    "ALIASES", "CAUSES", "KINDS", "VARIANTS", "CauseSpec", "End", "FatTree", "Fault", "Injected", "Link", "Location", "Node",
    "build_fat_tree", "build_scenario", "cause_id", "compatible", "link_layer_for", "resolve", "simulate",
    "write_bundle",
]


def simulate(
    out_dir: str | Path,
    hosts: int = 64,
    faults: list[Fault | str] | tuple = (),
    seed: int = 0,
    job_hosts: list[str] | int | None = None,
    *,
    hcas_per_host: int = 8,
    hosts_per_leaf: int | None = None,
    spines: int | None = None,
    tiers: int | None = None,
    rail_optimized: bool = True,
    nccl_tests: bool = True,
    window_s: int | None = None,
    host_files: str = "job",
    link_layer: str = "auto",
    host_tools: str = "auto",
) -> Path:
    """Build a fat tree of ``hosts`` hosts, inject ``faults`` (``Fault`` objects, or ``CAUSE[@location]`` strings
    placed by the seeded RNG when the location is left out) and write the bundle to ``out_dir``. ``job_hosts``:
    the job's hosts, or how many (default 8, chosen around the faults). ``link_layer``: ``auto`` (what the
    faults need, InfiniBand otherwise), ``ib`` or ``roce``. ``host_tools``: ``auto`` (the host tools a responder
    would run for the injected faults) or ``all`` (every host tool from every job host). Returns ``out_dir``."""
    tree = build_fat_tree(hosts, hcas_per_host=hcas_per_host, hosts_per_leaf=hosts_per_leaf, spines=spines,
                          seed=seed, rail_optimized=rail_optimized, tiers=tiers)
    return write_bundle(out_dir, tree, faults, seed, job_hosts, nccl_tests=nccl_tests, window_s=window_s,
                        host_files=host_files, link_layer=link_layer, host_tools=host_tools)
