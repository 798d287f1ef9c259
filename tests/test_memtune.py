"""The forked parse child's memory settings: no transparent huge pages, and freed large blocks kept for reuse. They
are the child's alone (process-wide, some not restorable), so each check runs in a forked process of its own."""

from __future__ import annotations

import os
import resource

import numpy as np
import pytest

from diagnose.runtime import memtune


def _in_child(check: object) -> bytes:
    """Run ``check()`` (returning a few bytes) in a forked process; its answer, or the error it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                out = check()  # type: ignore[operator]
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                out = f"error {exc!r}".encode()
            os.write(w, out)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 4096):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks)


def _faults_of_a_64mb_column() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    col = np.ones(8 << 20, dtype=np.int64)  # 64 MB, written: every page touched
    got = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del col
    return got


@pytest.mark.skipif(memtune.thp_allowed() is None, reason="no PR_GET_THP_DISABLE here")
def test_the_tuned_process_gets_no_huge_pages_and_others_keep_theirs() -> None:
    allowed = memtune.thp_allowed()

    def check() -> bytes:
        memtune.tune_child()
        return str(memtune.thp_allowed()).encode()

    assert _in_child(check) == b"False"
    assert memtune.thp_allowed() is allowed  # this process's own flag is untouched


_FAULTS = """
import resource, sys
import numpy as np
from diagnose.runtime import memtune

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    col = np.ones(8 << 20, dtype=np.int64)  # 64 MB, written: every page touched
    got = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del col
    return got

if sys.argv[1] == "tuned":
    memtune.tune_child()
else:  # the same page size as the tuned process, glibc's defaults
    memtune._libc().prctl(memtune._PR_SET_THP_DISABLE, 1, 0, 0, 0)
faults()  # the heap grows once (tuned), or the block is mapped and unmapped
print(faults())
"""


@pytest.mark.skipif(memtune._libc() is None or not hasattr(memtune._libc(), "mallopt"), reason="not glibc")
def test_a_freed_large_column_is_reused_in_the_tuned_process() -> None:
    # in a fresh interpreter: whether the heap can grow in place depends on what is mapped above it, which in a
    # process forked from a long test run is whatever the earlier tests left there
    import subprocess
    import sys

    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")

    def faults(tuned: bool) -> int:
        r = subprocess.run([sys.executable, "-c", _FAULTS, "tuned" if tuned else "default"], capture_output=True,
                           text=True, timeout=120, check=True)
        return int(r.stdout.strip())

    assert faults(tuned=False) > pages // 2  # glibc maps a block this large on its own, and unmaps it when freed
    assert faults(tuned=True) < pages // 10  # kept in the heap: its pages are reused


def test_trim_gives_freed_pages_back() -> None:
    def check() -> bytes:
        memtune.tune_child()
        col = np.ones(8 << 20, dtype=np.int64)
        del col  # kept in the heap (not trimmed on free)
        with open("/proc/self/statm") as fh:
            kept = int(fh.read().split()[1])
        memtune.trim()
        with open("/proc/self/statm") as fh:
            after = int(fh.read().split()[1])
        return str(kept - after).encode()

    if memtune._libc() is None or not hasattr(memtune._libc(), "malloc_trim"):
        pytest.skip("not glibc")
    assert int(_in_child(check)) > (64 << 20) // os.sysconf("SC_PAGE_SIZE") // 2
