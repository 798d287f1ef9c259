"""The triage's memory settings: no transparent huge pages and freed large blocks kept for reuse, as counted holds
that restore what the process had before the first."""

from __future__ import annotations

import itertools
import os
import resource
import threading

import numpy as np
import pytest

from diagnose import memtune
from diagnose.memtune import MemoryHold, thp_allowed

pytestmark = pytest.mark.skipif(thp_allowed() is None, reason="no PR_GET_THP_DISABLE here")


@pytest.fixture(autouse=True)
def _allowed() -> None:
    memtune._set_thp(True)
    yield
    memtune._set_thp(True)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_overlapping_holds_allow_them_again_at_the_last_release_whatever_the_order(order: tuple[int, ...]) -> None:
    holds = [MemoryHold(), MemoryHold(), MemoryHold()]
    assert thp_allowed() is False
    for k, i in enumerate(order):
        holds[i].release()
        holds[i].release()  # again: no effect
        assert thp_allowed() is (k == len(order) - 1)


def test_a_process_that_had_them_off_keeps_them_off() -> None:
    memtune._set_thp(False)
    hold = MemoryHold()
    hold.release()
    assert thp_allowed() is False


def test_holds_on_many_threads_leave_them_as_they_were() -> None:
    start = threading.Barrier(8)
    seen: list[bool | None] = []

    def work() -> None:
        start.wait()
        for _ in range(200):
            hold = MemoryHold()
            seen.append(thp_allowed())
            hold.release()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen) == {False}
    assert thp_allowed() is True


def test_a_forked_child_inherits_the_flag_and_counts_its_own_holds() -> None:
    hold = MemoryHold()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: off as inherited; its own hold released leaves it off (the parent's hold is not its)
        try:
            memtune.forget_holds()
            mine = MemoryHold()
            mine.release()
            os.write(w, b"off" if thp_allowed() is False else b"on")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 8)
    os.close(r)
    os.waitpid(pid, 0)
    hold.release()
    assert got == b"off"
    assert thp_allowed() is True


def _rss_pages() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1])


def _faults_of_a_64mb_column() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    col = np.ones(8 << 20, dtype=np.int64)  # 64 MB, written: every page touched
    got = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del col
    return got


@pytest.mark.skipif(memtune._mallopt is None, reason="not glibc")
def test_a_freed_large_column_is_reused_while_held_and_given_back_after() -> None:
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    memtune._set_thp(False)  # faults counted in pages of one size throughout
    assert _faults_of_a_64mb_column() > pages // 2  # glibc maps a block this large and unmaps it when freed
    hold = MemoryHold()
    try:
        _faults_of_a_64mb_column()  # the heap grows once
        assert _faults_of_a_64mb_column() < pages // 10  # then its freed pages are reused
        kept = _rss_pages()
    finally:
        hold.release()
    assert kept - _rss_pages() > pages // 2  # the last release gave them back
    assert _faults_of_a_64mb_column() > pages // 2  # and a block this large is mapped on its own again
