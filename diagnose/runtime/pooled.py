"""The second core through a fork server: how a triage parses in two processes when it may not fork (the calling
process runs other threads, as the incident service's worker does: a fork copies one thread, and a lock another
thread held would stay held in the child).

:func:`parse_pooled` submits the bulk dumps to a one-process pool (:func:`second_core`) from a thread, parses the
rest here and hands an idle pool batches of small files; results come back in file order, left in the spill folder
when large (:class:`Spilled`). With nothing to offload it is the plain one-process parse. Without threads,
:mod:`diagnose.runtime.forked` does this with a forked child instead.

The stage functions are the executor's :class:`~diagnose.runtime.serial.Stages`: the pool is sent its
``parse_file`` with each file (pickled by name: a module-level function; one that cannot be pickled makes every
file parsed here), as the forked child inherits them all.
"""

from __future__ import annotations

import collections
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import structlog

from diagnose.budget import held
from diagnose.bundle import BundleFile, LoadLimits
from diagnose.runtime.plan import parse_here
from diagnose.runtime.serial import Stages
from diagnose.runtime.spill import SpillDir, leave, peak_mib, take_back
from diagnose.stages.parse import Evidence, Progress, taken

log = structlog.get_logger("diagnose.pipeline")


@dataclass(frozen=True)
class Spilled:
    """A second-process result left in a file (``path``, a pickled Evidence) instead of sent through the pool's pipe.

    A 4,096-host counter dump parses into ~100 MB; sent back through the pipe, the second process blocks until
    this process's pool thread has read and unpickled all of it, which it does slowly while the main thread
    parses (they share the interpreter lock): measured, the second process sat idle for 3 s between the two
    dumps. Written to a file, it goes straight on to the next one."""

    path: str


def parse_part(bf: BundleFile, limits: LoadLimits, spill_dir: str | None = None,
               parse_file: Callable[..., None] | None = None) -> Evidence | Spilled:
    """One file parsed into its own Evidence (in the second process); left in ``spill_dir`` when given."""
    part = Evidence()
    saved = vars(held).copy()  # (the same process when a test stands in for the pool: its count is kept)
    held.begin(limits.max_record_bytes, serial=False)  # each file bounded alone here; the caller counts the whole
    try:
        (parse_file or Stages().parse_file)(bf, part, limits)
    finally:
        vars(held).update(saved)
    part.second_core_peak_mib = peak_mib()
    if spill_dir is None:
        return part
    try:
        return Spilled(leave(part, spill_dir))
    except OSError:  # no room for it: send it through the pipe after all
        return part


def unspill(result: Evidence | Spilled) -> Evidence:
    if isinstance(result, Spilled):
        return take_back(result.path)  # type: ignore[no-any-return]
    return result


@dataclass(frozen=True)
class _Handed:
    """A file parsed by the second process as part of a batch: ``batch`` yields one Evidence per file."""

    batch: Future[list[Evidence]]
    pos: int  # the file's place in the batch


def _parse_batch(batch: list[BundleFile], limits: LoadLimits, parse_file: Callable[..., None]) -> list[Evidence]:
    """Small files parsed in the second process, each into its own Evidence (merged in file order later)."""
    out = []
    for bf in batch:
        part = parse_part(bf, limits, None, parse_file)  # (no spill folder: an Evidence, never left in a file)
        assert isinstance(part, Evidence)
        out.append(part)
    return out


def hand_batch(pool: ProcessPoolExecutor, files: list[BundleFile], picked: list[int], parts: list[Any],
               busy: list[Future[Any]], limits: LoadLimits, st: Stages) -> ProcessPoolExecutor | None:
    """Give the idle second process the small files ``picked``; returns the pool, or None when it cannot take
    work (the files are then parsed here)."""
    try:
        fut = pool.submit(_parse_batch, [files[j] for j in picked], limits, st.parse_file)
    except Exception as exc:  # noqa: BLE001 - a pool that cannot start costs speed, never evidence
        log.warning("parallel_parse_unavailable", error=repr(exc))
        for j in picked:
            parts[j] = parse_here(st, files[j], limits)
        return None
    busy.append(fut)
    for pos, j in enumerate(picked):
        parts[j] = _Handed(fut, pos)
    return pool


def _collect(part: Future[Evidence] | _Handed, bf: BundleFile, limits: LoadLimits, progress: Progress | None,
             st: Stages) -> Evidence:
    """The Evidence the second process made of ``bf``; parsed here when it failed."""
    try:
        got = part.batch.result()[part.pos] if isinstance(part, _Handed) else unspill(part.result())
    except Exception as exc:  # noqa: BLE001 - the record budget included: parsed here, where the whole is counted
        log.warning("parallel_parse_failed", file=bf.path, error=repr(exc))
        return parse_here(st, bf, limits, progress)
    taken(got)
    return got


def second_core() -> ProcessPoolExecutor | None:
    """A one-process pool from a fork server (safe when the caller runs threads, as the service does)."""
    try:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["diagnose.runtime.pooled"])
        return ProcessPoolExecutor(max_workers=1, mp_context=ctx)
    except Exception as exc:  # noqa: BLE001 - no second process: parse everything here
        log.warning("parallel_parse_unavailable", error=repr(exc))
        return None


def parse_pooled(files: list[BundleFile], offload: set[int], limits: LoadLimits, progress: Progress | None,
                 spill: SpillDir, st: Stages, hand_over: int) -> list[Evidence]:
    """Parse ``files``, the ``offload`` ones in a one-process pool from a fork server (when this process cannot
    fork: it runs other threads); one Evidence per file, in file order (``hand_over``: small files handed to an
    idle pool at a time)."""
    pool = executor = second_core() if offload else None
    parts: list[Evidence | Future[Evidence | Spilled] | _Handed | None] = [None] * len(files)
    busy: list[Future[Any]] = []  # what the second process is working on
    failed: list[BaseException] = []

    def start_bulk() -> None:
        # the bulk dumps go first, from a thread: the first submit waits ~0.5 s for the fork server to import the
        # pipeline and fork the worker, which this thread spends parsing instead
        for i in sorted(offload):
            try:
                fut = pool.submit(parse_part, files[i], limits, spill.get(), st.parse_file)  # type: ignore[union-attr]
            except Exception as exc:  # noqa: BLE001 - a pool that cannot start costs speed, never evidence
                failed.append(exc)
                return
            parts[i] = fut
            busy.append(fut)

    starter = threading.Thread(target=start_bulk, name="diagnose-second-core", daemon=True) if pool else None
    if starter is not None:
        starter.start()
    # Small files come last here, so that an idle second process can take batches of them from the back of the
    # queue (the bulk dumps it starts with may take less time than this process needs for the rest); the order
    # files are parsed in never shows in the result, merged in file order below.
    small = [i for i, bf in enumerate(files) if i not in offload and bf.stream is None and bf.text is not None
             ] if pool is not None else []
    smalls = set(small)
    mine = [i for i in range(len(files)) if i not in smalls and (pool is None or i not in offload)]
    queue = collections.deque(mine + small)
    try:
        return _drain(files, parts, queue, len(small), starter, failed, pool, executor, busy, limits, progress, st,
                      hand_over)
    except BaseException:  # the record budget passed (see diagnose.budget), or an interrupt: nothing waited for
        if starter is not None:
            starter.join()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        raise


def _drain(files: list[BundleFile], parts: list[Any], queue: collections.deque[int], small_left: int,
           starter: threading.Thread | None, failed: list[BaseException], pool: ProcessPoolExecutor | None,
           executor: ProcessPoolExecutor | None, busy: list[Future[Any]], limits: LoadLimits,
           progress: Progress | None, st: Stages, hand_over: int) -> list[Evidence]:
    """:func:`parse_pooled`'s loop: the queue parsed here (handing batches of its small files, from the back, to an
    idle second process), then the second process's results collected, in file order."""
    done = 0
    while queue:
        i = queue.popleft()
        small_left = min(small_left, len(queue))
        parts[i] = parse_here(st, files[i], limits, progress)
        done += 1
        if progress:
            progress(files[i].path, done, len(files))
        if starter is not None and not starter.is_alive():  # the bulk dumps are all submitted (or failed)
            starter = None
            pool = None if failed else pool
        if pool is not None and starter is None and small_left >= 2 * hand_over:
            busy = [f for f in busy if not f.done()]
            if not busy:
                picked = [queue.pop() for _ in range(hand_over)][::-1]
                small_left -= hand_over
                pool = hand_batch(pool, files, picked, parts, busy, limits, st)
    if starter is not None:
        starter.join()
    if failed:
        log.warning("parallel_parse_unavailable", error=repr(failed[0]))
    out: list[Evidence] = []
    for bf, part in zip(files, parts, strict=True):
        if part is None:  # a bulk dump the second process could not take
            part = parse_here(st, bf, limits, progress)
        elif not isinstance(part, Evidence):
            part = _collect(part, bf, limits, progress, st)  # type: ignore[arg-type]
        else:
            out.append(part)
            continue
        done += 1
        if progress:
            progress(bf.path, done, len(files))
        out.append(part)
    if executor is not None:
        executor.shutdown(wait=True)
    return out
