"""A wall-time limit on one call: the sniffing and parsing of one file (``LoadLimits.max_file_seconds``).

:func:`call_limited` runs a function and raises :class:`TimeLimit` in it once it has run ``seconds``; the caller
drops what the call made and says so. How the call is stopped depends on the thread it runs in:

- the main thread of a process (the CLI, the forked parse child, the service's one-thread triage process): an interval timer
  (``SIGALRM``), whose handler raises :class:`TimeLimit` between two bytecodes, and inside a regular expression's
  match too (the ``re`` engine checks for signals), so a pathological pattern on hostile text is stopped as well.
  Used only when nothing else handles ``SIGALRM``; the timer goes on firing every ``_AGAIN`` seconds until the call
  has returned, so a parser that catches the first one is stopped by the next.
- any other thread (the incident service's worker): a watchdog thread raises it asynchronously
  (``PyThreadState_SetAsyncExc``). That is seen between bytecodes only: a single long C call (one regular
  expression match) ends first.

:class:`TimeLimit` derives from ``BaseException`` so that a parser's ``except Exception`` does not swallow it.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_AGAIN = 0.5  # seconds between two raises while the limited call has not returned
_IDLE = 2.0  # seconds the watchdog thread waits for another call to watch before it leaves


class TimeLimit(BaseException):  # noqa: N818 - not an error of the code that catches it: a limit it hit
    """Raised into a call that ran past its wall-time limit."""


_local = threading.local()  # .active: a limited call runs on this thread (nested calls are not limited again)


def call_limited(seconds: float | None, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, stopped by :class:`TimeLimit` after ``seconds`` of wall time (``None`` or ``0``: no limit;
    inside another limited call on the same thread: that one's limit applies)."""
    if not seconds or seconds <= 0 or getattr(_local, "active", False):
        return fn(*args)
    guard: _Alarm | _Watched = _Alarm(seconds) if _alarm_usable() else _Watched(seconds)
    hit = False
    result: T | None = None
    _local.active = True
    try:
        guard.start()
        result = fn(*args)
    except TimeLimit:
        hit = True
    finally:
        while True:  # the guard is stopped whatever is raised meanwhile: a late raise only confirms the limit
            try:
                guard.stop()
                break
            except TimeLimit:
                hit = True
        _local.active = False
    if hit:
        raise TimeLimit(seconds)
    return result  # type: ignore[return-value]


# --- the main thread: an interval timer --------------------------------------------------------------------------

_armed: _Alarm | None = None  # the alarm whose call runs now (the handler raises only into that one)


def _alarm_usable() -> bool:
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    return signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None, _on_alarm)


def _on_alarm(signum: int, frame: object) -> None:
    alarm = _armed
    if alarm is not None and time.monotonic() >= alarm.deadline:
        raise TimeLimit(alarm.seconds)


class _Alarm:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = 0.0
        self.previous: Any = None

    def start(self) -> None:
        global _armed
        self.previous = signal.signal(signal.SIGALRM, _on_alarm)
        self.deadline = time.monotonic() + self.seconds
        _armed = self
        signal.setitimer(signal.ITIMER_REAL, self.seconds, _AGAIN)

    def stop(self) -> None:
        global _armed
        _armed = None  # first: a signal from now on raises nothing
        signal.setitimer(signal.ITIMER_REAL, 0)
        if self.previous is not None:
            signal.signal(signal.SIGALRM, self.previous)
            self.previous = None


# --- other threads: one watchdog thread per process --------------------------------------------------------------

def _set_async_exc(ident: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in the thread ``ident`` at its next bytecode; ``None``: withdraw one not raised yet."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                               ctypes.py_object(exc) if exc is not None else ctypes.c_void_p(0))


class _Watched:
    """A call on a thread other than the main one, watched by :class:`_Watchdog`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ident = threading.get_ident()
        self.deadline = 0.0
        self.fired = False  # set by the watchdog, under its lock
        self.dog: _Watchdog | None = None

    def start(self) -> None:
        self.deadline = time.monotonic() + self.seconds
        self.dog = _Watchdog.watch(self)

    def stop(self) -> None:
        if self.dog is not None:
            self.dog.forget(self)


class _Watchdog(threading.Thread):
    _one: _Watchdog | None = None
    _made = threading.Lock()

    def __init__(self) -> None:
        super().__init__(name="diagnose-time-limit", daemon=True)
        self.cond = threading.Condition()
        self.heap: list[tuple[float, int, _Watched]] = []
        self.live: set[int] = set()  # id() of the calls still watched
        self.order = itertools.count()
        self.leaving = False

    @classmethod
    def watch(cls, w: _Watched) -> _Watchdog:
        """Watch ``w``: by the running watchdog, or a new one when none runs or it is leaving."""
        with cls._made:
            dog = cls._one
            if dog is None or not dog._add(w):  # noqa: SLF001 - the class's own instance
                dog = cls._one = cls()
                dog._add(w)
                dog.start()
            return dog

    @classmethod
    def wait_idle(cls) -> None:
        """Until the watchdog has left (it does once nothing is watched)."""
        one = cls._one
        if one is not None:
            one.join()

    def _add(self, w: _Watched) -> bool:
        """False when this watchdog is leaving."""
        with self.cond:
            if self.leaving:
                return False
            self.live.add(id(w))
            first = not self.heap or w.deadline < self.heap[0][0]
            heapq.heappush(self.heap, (w.deadline, next(self.order), w))
            if first:  # (a later deadline than the one waited for needs no wake-up)
                self.cond.notify()
            return True

    def forget(self, w: _Watched) -> None:
        with self.cond:
            self.live.discard(id(w))
            if w.fired:  # an exception set but not raised yet is withdrawn: the call is over
                _set_async_exc(w.ident, None)
                w.fired = False
            if not self.live and self.heap:  # nothing watched: the deadlines left are stale; the watchdog waits
                self.heap.clear()  # for another call or leaves (see run)
                self.cond.notify()

    def run(self) -> None:
        with self.cond:
            while True:
                while self.heap and id(self.heap[0][2]) not in self.live:
                    heapq.heappop(self.heap)
                if not self.heap:  # the thread leaves when idle a while (a process with one thread may fork: the
                    self.cond.wait(_IDLE)  # pipeline's second core), and watch() starts another when needed
                    if not self.heap:
                        self.leaving = True
                        return
                    continue
                deadline, _, w = self.heap[0]
                now = time.monotonic()
                if now < deadline:
                    self.cond.wait(deadline - now)
                    continue
                heapq.heappop(self.heap)
                w.fired = True
                _set_async_exc(w.ident, TimeLimit)
                heapq.heappush(self.heap, (now + _AGAIN, next(self.order), w))  # again, until forgotten


__all__ = ["TimeLimit", "call_limited"]
