"""Process-wide settings that concurrent work changes for a while: counted holds, shared by every thread.

A setting such as the garbage collector's switch belongs to the process, so two triages on two threads (the service's
workers) that each change and restore it would race: the second notes the first's change as the state to restore.
Holds are counted instead: the first applies the setting and keeps what restores it, the last restores; holds
released in any order, or nested, never leave the setting changed for good or restore it under a hold in progress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Switch:
    """``apply()`` changes the setting and returns what ``restore(saved)`` needs to put it back."""

    def __init__(self, apply: Callable[[], Any], restore: Callable[[Any], None]) -> None:
        self._apply, self._restore = apply, restore
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: Any = None

    def hold(self) -> Hold:
        return Hold(self)

    def saved(self, otherwise: Callable[[], Any]) -> Any:
        """What the last release will restore, or ``otherwise()`` (the setting as it is) when nothing is held."""
        with self._lock:
            return self._saved if self._holders else otherwise()

    def forget_holds(self) -> None:
        """In a forked child: the parent's holds stay the parent's (never released here); the setting is left as the
        fork copied it, and the child's own holds are counted from none."""
        self._lock = threading.Lock()  # (a fork copies only the calling thread; a lock another thread held stays held)
        self._holders = 0

    def _take(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._saved = self._apply()
            self._holders += 1

    def _give(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                self._restore(self._saved)


class Hold:
    """One hold on a :class:`Switch`, taken when made; :meth:`release` gives it back (once: again is a no-op)."""

    def __init__(self, switch: Switch) -> None:
        switch._take()
        self._switch: Switch | None = switch

    def release(self) -> None:
        switch, self._switch = self._switch, None
        if switch is not None:
            switch._give()
