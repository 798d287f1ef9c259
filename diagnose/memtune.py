"""How the process gets memory from the kernel while a triage runs, shared by every thread.

A triage of a 4,096-host fabric builds and drops a few GB of short-lived columns (tens of MB each), most of them in
the parse child. Two defaults made the kernel's share of that work large, and slow when the other process was busy:

* **Transparent huge pages.** NumPy advises the kernel to back every array of 4 MB or more with huge pages
  (``madvise(MADV_HUGEPAGE)``). Where the kernel's THP defrag setting is ``madvise`` (the kernel's default), a fault
  in such an array may compact memory synchronously to find a free 2 MB page, and zeroes all of it. The arrays are
  read once or twice each, so the fewer TLB misses never paid for those faults. Off: the process's
  ``PR_SET_THP_DISABLE`` flag (prctl(2)), which a forked child inherits.
* **glibc returning large blocks at once.** Blocks above glibc's mmap threshold (at most 32 MB, however it adapts)
  are mapped for each allocation and unmapped when freed, so every column of that size faults in fresh zeroed pages,
  however many times the same size was freed just before. While held, the threshold is 1 GiB and the heap is not
  trimmed when freed (``mallopt``): a freed column's pages are reused by the next. The last release gives the free
  pages back (``malloc_trim``) and sets glibc's default thresholds again (128 KiB, fixed from then on: glibc adapts
  them only until they are first set).

Measured in 8 alternating pairs of 4,096-host triages: the child's kernel time 1.1-1.5 s -> 0.7-0.9 s, the median
wall time 5.8 -> 5.4 s (7 pairs of 8 faster), and the peak memory of both processes unchanged (1.36-1.38 GB).
Huge pages off alone, or the heap settings alone, gained less than the noise.

Holds are counted (:mod:`diagnose.holds`): the first notes whether huge pages were allowed and sets both, the last
restores them. Each part does nothing where the system has no such call (not Linux, not glibc).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from diagnose.holds import Hold, Switch

_PR_SET_THP_DISABLE = 41
_PR_GET_THP_DISABLE = 42
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
HELD_MMAP_THRESHOLD = 1 << 30  # no block a triage allocates is mapped on its own
HELD_TRIM_THRESHOLD = (1 << 31) - 1  # (an int): the heap is trimmed only at the last release
DEFAULT_THRESHOLD = 128 * 1024  # glibc's default for both


def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_c = _libc()
_prctl = getattr(_c, "prctl", None)
_mallopt = getattr(_c, "mallopt", None)
_malloc_trim = getattr(_c, "malloc_trim", None)


def thp_allowed() -> bool | None:
    """Whether this process may get transparent huge pages (None: no way to tell here)."""
    if _prctl is None:
        return None
    got = _prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0)
    return None if got < 0 else got == 0


def _set_thp(allowed: bool) -> bool:
    return _prctl is not None and _prctl(_PR_SET_THP_DISABLE, 0 if allowed else 1, 0, 0, 0) == 0


def _set_heap(mmap_threshold: int, trim_threshold: int) -> None:
    if _mallopt is not None:
        _mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(mmap_threshold))
        _mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(trim_threshold))


def trim() -> None:
    """Give the heap's free pages back to the system (nothing without glibc)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _apply() -> bool:
    restore_thp = thp_allowed() is True and _set_thp(False)
    _set_heap(HELD_MMAP_THRESHOLD, HELD_TRIM_THRESHOLD)
    return restore_thp


def _restore(restore_thp: bool) -> None:
    if restore_thp:
        _set_thp(True)
    _set_heap(DEFAULT_THRESHOLD, DEFAULT_THRESHOLD)
    trim()


_switch = Switch(_apply, _restore)


class MemoryHold(Hold):
    """One hold on the triage's memory settings, taken when made; :meth:`release` gives it back (once)."""

    def __init__(self) -> None:
        super().__init__(_switch)


def forget_holds() -> None:
    """In a forked child: the parent's holds stay the parent's; the settings are left as the fork copied them."""
    _switch.forget_holds()
