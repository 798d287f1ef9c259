"""A one-thread process for the triages of a caller that runs threads (the incident service's worker).

A fork copies only the calling thread, so a process with other threads may not fork (:func:`~diagnose.runtime.
forked.can_fork`): its triages would parse on one core. :class:`OneThread` runs them instead in a process of their
own, started once from a fork server and reused, whose only thread may fork: there the :class:`~diagnose.runtime.
ParallelExecutor` uses the second core as it does from the CLI. The caller's process also never holds a large
bundle's records, and a parse that kills its process (a bus error on a dump cut short, the kernel's OOM killer) kills
that process, not the caller: the call raises :class:`ProcessLost` and the next call starts another.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

log = structlog.get_logger("diagnose.runtime")

T = TypeVar("T")


class ProcessLost(RuntimeError):
    """The process running the call died before it answered."""


def _serve(conn: Any) -> None:
    """The process's loop: ``(fn, args)`` in, ``(True, result)`` or ``(False, exception)`` out, until the pipe ends."""
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            out: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            out = (False, exc)
        try:
            conn.send(out)
        except Exception as exc:  # noqa: BLE001 - a result that cannot be pickled is an error of the call
            conn.send((False, RuntimeError(f"the result could not be sent back: {exc!r}")))


class OneThread:
    """Calls run one at a time in one reused process from a fork server (``preload``: modules the server imports
    once, so that a process starts with them)."""

    def __init__(self, preload: tuple[str, ...] = ("diagnose.pipeline",)) -> None:
        self.preload = preload
        self._proc: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the process (``fn`` and ``args`` are pickled: a module-level function); what it raises is
        raised here."""
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                self._start()
            try:
                self._conn.send((fn, args))
                ok, got = self._conn.recv()
            except (EOFError, OSError) as exc:
                self._proc.join(5)
                code = self._proc.exitcode
                self._drop()
                log.warning("triage_process_lost", exit_code=code, error=repr(exc))
                raise ProcessLost(f"the triage's process died before it answered (exit code {code}: killed, or "
                                  "out of memory)") from exc
        if not ok:
            raise got
        return got  # type: ignore[no-any-return]

    def _start(self) -> None:
        self._drop()
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(self.preload))
        mine, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(theirs,), name="diagnose-triage", daemon=True)
        self._proc.start()
        theirs.close()
        self._conn = mine

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def close(self, kill: bool = False) -> None:
        """Let the process go (it leaves when its pipe closes); ``kill``: stop it now, even mid-call (a triage the
        caller has given up on). Without ``kill``, waits for a call still running."""
        proc = self._proc
        if kill and proc is not None and proc.is_alive():
            proc.kill()
        with self._lock:
            proc = self._proc
            self._drop()
        if proc is not None:
            proc.join(5)
