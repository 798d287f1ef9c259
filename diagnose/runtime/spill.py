"""Results between the processes of a parallel triage: pickles in a spill folder that goes with everything in it."""

from __future__ import annotations

import atexit
import os
from typing import Any


def leave(obj: object, where: str, path: str | None = None) -> str:
    """Pickle ``obj`` into ``path`` or a new file in ``where`` (how results pass between the processes); the path.
    Raises what writing or pickling raises."""
    import pickle
    import tempfile

    if path is None:
        fd, path = tempfile.mkstemp(dir=where, suffix=".pickle")
        fh = os.fdopen(fd, "wb")
    else:
        fh = open(path, "wb")  # noqa: SIM115 - closed below
    with fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def take_back(path: str) -> Any:
    """The object :func:`leave` pickled at ``path``; the file is removed, read or not."""
    import pickle

    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


_SPILLS: dict[str, int] = {}  # the spill folders not yet removed, and the process that made each


class SpillDir:
    """A temporary folder for second-process results, made on first use and removed with all it holds (also when
    the process leaves without closing it: at exit, and on SIGTERM during a parallel run, see :class:`diagnose.runtime.parallel.Terminated`)."""

    def __init__(self) -> None:
        self.path: str | None = None

    def get(self) -> str | None:
        if self.path is None:
            import tempfile

            try:
                self.path = tempfile.mkdtemp(prefix="diagnose-parts-")
            except OSError:
                return None
            _SPILLS[self.path] = os.getpid()
        return self.path

    def close(self) -> None:
        if self.path is not None:
            import shutil

            shutil.rmtree(self.path, ignore_errors=True)
            _SPILLS.pop(self.path, None)
            self.path = None


def _remove_spills() -> None:
    """At exit: the spill folders this process made and did not remove (a forked child's copy of the list is its
    parent's: not removed there)."""
    import shutil

    for path, pid in list(_SPILLS.items()):
        if pid == os.getpid():
            shutil.rmtree(path, ignore_errors=True)
            _SPILLS.pop(path, None)


atexit.register(_remove_spills)


def peak_mib() -> float:
    """An upper bound of the memory a forked child added to the machine's use: its peak resident set (the pages it
    still shares with its parent, and those of the files it maps, count too). A kernel counter, cheap to read: the
    exact private share (smaps_rollup) walks every page table, ~17 ms a call in a child holding a 4,096-host
    fabric's columns, and is only the current use, not the peak."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
