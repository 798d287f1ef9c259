"""How the forked parse child gets memory from the kernel.

The child of a large triage (:mod:`diagnose.runtime.forked`) parses the counter dumps and builds their frames, the counter
table and the fabric graph: at 4,096 hosts it builds and drops a few GB of columns of tens of MB each. Two defaults
made the kernel's share of that work large, and slow when the other process was busy:

* **Transparent huge pages.** NumPy advises the kernel to back every array of 4 MB or more with huge pages
  (``madvise(MADV_HUGEPAGE)``). Where the kernel's THP defrag setting is ``madvise`` (the kernel's default), a fault
  in such an array may compact memory synchronously to find a free 2 MB page, and zeroes all of it. The arrays are
  read once or twice each, so the fewer TLB misses never paid for those faults. Off: the process's
  ``PR_SET_THP_DISABLE`` flag (prctl(2)).
* **glibc returning large blocks at once.** Blocks above glibc's mmap threshold (at most 32 MB, however it adapts)
  are mapped for each allocation and unmapped when freed, so every column of that size faults in fresh zeroed pages,
  however many times the same size was freed just before. In the child the threshold is 1 GiB and the heap is not
  trimmed when freed (``mallopt``): a freed column's pages are reused by the next.

Measured in 8 alternating pairs of 4,096-host triages, with both processes tuned: the child's kernel time 1.1-1.5 s
-> 0.7-0.9 s, the median wall time 5.8 -> 5.4 s (7 pairs of 8 faster), and the peak memory of both processes
unchanged (1.36-1.38 GB); huge pages off alone, or the heap settings alone, gained less than the noise. The triage
process's own kernel time stayed at ~0.5 s either way, so only the child is tuned now: its kernel time 1.2-1.6 s ->
0.8 s in 8 more pairs (in a slow spell: medians 6.0 -> 5.9 s).

Only the child is tuned, at its start, and it is never set back: the child runs one thread, starts no program and
leaves when its work is done. The settings are process-wide and some cannot be restored (glibc stops adapting its
thresholds once they are set, and a program started under the THP flag keeps it), so the triage process, which may
be a long-running service with other threads and other work, keeps its own. Each part does nothing where the system
has no such call (not Linux, not glibc).
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

_PR_SET_THP_DISABLE = 41
_PR_GET_THP_DISABLE = 42
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
CHILD_MMAP_THRESHOLD = 1 << 30  # no block the child allocates is mapped on its own
OLD_GLIBC_MMAP_THRESHOLD = 32 << 20  # the most a glibc older than 2.35 or so accepts
CHILD_TRIM_THRESHOLD = (1 << 31) - 1  # (an int): never trimmed on free; forked.py trims once, explicitly


@cache
def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return None


def thp_allowed() -> bool | None:
    """Whether this process may get transparent huge pages (None: no way to tell here)."""
    libc = _libc()
    prctl = getattr(libc, "prctl", None)
    if prctl is None:
        return None
    got = prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0)
    return None if got < 0 else got == 0


def tune_child() -> None:
    """In the forked child, once, before it parses: no transparent huge pages, and freed large blocks kept for reuse
    (see the module docstring). Never call it in a process that goes on with other work."""
    libc = _libc()
    if libc is None:
        return
    import ctypes

    prctl = getattr(libc, "prctl", None)
    if prctl is not None:
        prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        if not mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(CHILD_MMAP_THRESHOLD)):
            mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(OLD_GLIBC_MMAP_THRESHOLD))
        mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(CHILD_TRIM_THRESHOLD))


def trim() -> None:
    """Give the heap's free pages back to the system (nothing without glibc)."""
    libc = _libc()
    malloc_trim = getattr(libc, "malloc_trim", None)
    if malloc_trim is not None:
        malloc_trim(0)
