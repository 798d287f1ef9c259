"""Who parses what on a parallel triage: the large files worth a second core, their estimated costs (compared with
each other only, to share the work)."""

from __future__ import annotations

import os
from types import ModuleType

from diagnose import parsers
from diagnose.bundle import BundleFile, LoadLimits
from diagnose.parsers.base import capabilities
from diagnose.stages.parse import sniff, sniff_limited

DEFAULT_NS_PER_BYTE = 40.0  # measured for the line parsers of ibstat, dmesg, NCCL logs (2026, this project's VM)
NS_PER_FILE = 80_000.0  # sniffing and bookkeeping per file


def sends_columns(mod: ModuleType) -> bool:
    """A parser whose result for a large file is a few column batches (numpy arrays or lists of values), which
    cross a process boundary cheaply; a million small records would cost more to send than to parse here."""
    return capabilities(mod).columns_when_large


def worth_a_second(files: list[BundleFile], min_bytes: int) -> bool:
    """Whether the large files could reach ``min_bytes`` (before sniffing what they are)."""
    if (os.cpu_count() or 1) < 2 or min_bytes <= 0:
        return False
    return sum(bf.stream.size for bf in files if bf.stream is not None and bf.text is not None) >= min_bytes


def plan(files: list[BundleFile], limits: LoadLimits, min_bytes: int) -> tuple[list[int], dict[int, float]]:
    """The bulk files, most expensive first, and their estimated costs: what both processes work out alike."""
    offload = offloadable(files, limits, min_bytes)
    costs = {i: bulk_cost(files[i]) for i in offload}
    return sorted(offload, key=lambda i: (-costs[i], i)), costs


def offloadable(files: list[BundleFile], limits: LoadLimits, min_bytes: int) -> set[int]:
    """Large files worth parsing on the second core: counter dumps and topologies, whose parsers give column
    batches (see :func:`sends_columns`), together at least ``min_bytes`` (0: none)."""
    if (os.cpu_count() or 1) < 2 or min_bytes <= 0:
        return set()
    picked: set[int] = set()
    total = 0
    for i, bf in enumerate(files):
        if bf.stream is None or bf.text is None:
            continue
        sn = sniff_limited(bf, limits)
        if sn.formats and all(sends_columns(parsers.by_format(f)) for f in sn.formats):
            picked.add(i)
            total += bf.stream.size
    return picked if total >= min_bytes else set()


def file_cost(bf: BundleFile, ns_per_byte: float = DEFAULT_NS_PER_BYTE) -> float:
    """Estimated seconds to parse ``bf``: only compared with other estimates, to decide who parses what."""
    size = bf.stream.size if bf.stream is not None else len(bf.text or "")
    return (NS_PER_FILE + size * ns_per_byte) * 1e-9


def bulk_cost(bf: BundleFile) -> float:
    sn = sniff(bf)
    rates = [capabilities(parsers.by_format(f)).ns_per_byte or DEFAULT_NS_PER_BYTE for f in sn.formats]
    return file_cost(bf, sum(rates) if rates else DEFAULT_NS_PER_BYTE)
