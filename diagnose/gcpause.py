"""Pauses of Python's cyclic garbage collector while large acyclic structures are built, shared by every thread.

The collector's switch is process-wide, so pauses are counted: the first hold notes whether the collector ran and
turns it off, the last release turns it back on only if it ran before the first hold. Holds on several threads (the
service's workers triaging at once, a parser's pause inside a triage's) then overlap in any order without leaving
the collector off for good, or turning it on under a hold still in progress.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_resume = False  # whether the collector ran when the first of the current holds was taken


class Pause:
    """One hold on the pause, taken when made; :meth:`release` gives it back (once: again is a no-op)."""

    def __init__(self) -> None:
        global _holders, _resume
        with _lock:
            if _holders == 0:
                _resume = gc.isenabled()
                gc.disable()
            _holders += 1
        self._held = True

    def release(self) -> None:
        global _holders
        with _lock:
            if not self._held:
                return
            self._held = False
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()


def collecting() -> bool:
    """Whether the collector would run if no hold were taken (what the last release will restore)."""
    with _lock:
        return _resume if _holders else gc.isenabled()


def forget_holds() -> None:
    """In a forked child: the parent's holds stay the parent's (they are never released here). The collector is left
    as it is (off, if the parent held a pause); the child's own holds are counted from none, and restore that."""
    global _lock, _holders
    _lock = threading.Lock()  # (a fork copies only the calling thread; a lock another thread held stays held)
    _holders = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while a large, acyclic structure is built.

    Building ~100k records or graph entries triggers the collector hundreds of times, and each full pass walks
    everything built so far: a third of the time of a 2,048-host topology parse. Nothing built under it forms
    reference cycles, so collecting later frees the same memory. Reference counting keeps working."""
    pause = Pause()
    try:
        yield
    finally:
        pause.release()


@contextmanager
def run_paused() -> Iterator[Pause]:
    """A triage's hold: the collector paused from loading to the frozen frames (the caller releases the hold once it
    has frozen what it built, ``gc.freeze()``, so that the extractors run with the collector on); at the end what
    was frozen goes back to the collector and the hold is released if it was not."""
    pause = Pause()
    try:
        yield pause
    finally:
        gc.unfreeze()
        pause.release()
