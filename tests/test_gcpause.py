"""Pauses of the cyclic collector: counted holds, process-wide, restoring what the collector did before the first."""

from __future__ import annotations

import gc
import itertools
import threading

import pytest

from diagnose import gcpause
from diagnose.gcpause import Pause, gc_paused


@pytest.fixture(autouse=True)
def _collector_on() -> None:
    gc.enable()
    yield
    gc.enable()


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_overlapping_holds_turn_it_back_on_at_the_last_release_whatever_the_order(order: tuple[int, ...]) -> None:
    holds = [Pause(), Pause(), Pause()]
    assert not gc.isenabled()
    for k, i in enumerate(order):
        holds[i].release()
        holds[i].release()  # again: no effect
        assert gc.isenabled() == (k == len(order) - 1)


def test_a_hold_taken_while_another_is_held_does_not_keep_it_off_for_good() -> None:
    """The race of a plain 'was it on? turn it off' on two threads: the second sees it off (the first's doing),
    the first gives back before the second; the collector must still end on."""
    first = Pause()
    second = Pause()  # would have noted "off"
    first.release()
    assert not gc.isenabled()  # the second hold is still held
    second.release()
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    with gc_paused():
        inner = Pause()
        inner.release()
    assert not gc.isenabled()
    assert not gcpause.collecting()


def test_holds_on_many_threads_leave_it_as_it_was() -> None:
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        for _ in range(200):
            with gc_paused():
                assert not gc.isenabled()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled() and gcpause.collecting()
