"""A deterministic, seeded InfiniBand fabric simulator that writes incident bundles in the real tools' formats.

    from diagnose.simulate import Fault, simulate
    simulate("/tmp/case", hosts=64, faults=[Fault("bad_cable", "gpu-a003/mlx5_2", end="hca")], seed=7)

writes ``fabric/ibnetdiscover.topo``, ``fabric/perfquery_{1,2}.txt``, ``<host>/ibstat.txt``,
``<host>/dmesg.txt``, ``job.log``, ``nccl-tests.txt`` and ``truth.yaml`` (what was injected, and where).
The same arguments give byte-identical files. See :mod:`diagnose.simulate.topology`,
:mod:`diagnose.simulate.faults` and :mod:`diagnose.simulate.writers`.
"""

from __future__ import annotations

from pathlib import Path

from diagnose.simulate.faults import KINDS, Fault, Injected, Location, resolve
from diagnose.simulate.topology import End, FatTree, Link, Node, build_fat_tree
from diagnose.simulate.writers import build_scenario, write_bundle

__all__ = [
    "KINDS", "End", "FatTree", "Fault", "Injected", "Link", "Location", "Node", "build_fat_tree",
    "build_scenario", "resolve", "simulate", "write_bundle",
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
) -> Path:
    """Build a fat tree of ``hosts`` hosts, inject ``faults`` (``Fault`` objects or bare kind names, placed
    by the seeded RNG) and write the bundle to ``out_dir``. ``job_hosts``: the job's hosts, or how many
    (default 8, chosen around the faults). Returns ``out_dir`` as a Path."""
    tree = build_fat_tree(hosts, hcas_per_host=hcas_per_host, hosts_per_leaf=hosts_per_leaf, spines=spines,
                          seed=seed, rail_optimized=rail_optimized, tiers=tiers)
    return write_bundle(out_dir, tree, faults, seed, job_hosts, nccl_tests=nccl_tests, window_s=window_s,
                        host_files=host_files)
