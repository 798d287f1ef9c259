"""The parallel executor: a large triage on two cores, with the result of :class:`SerialExecutor` byte for byte.

The large files that parse into column batches (counter dumps, topologies) go to a second process, a forked child
(:mod:`diagnose.runtime.forked`); small files are handed to it when it is idle. A process that runs other threads
may not fork (a fork copies one thread): it parses on one core, in path order (the service runs its large triages in
a one-thread process of their own for that, :mod:`diagnose.runtime.isolated`). Parts come back one per file and are merged in file order; a bundle whose records pass
the record budget is parsed again serially, in path order, so that which files are left out never depends on
which process was faster (see :mod:`diagnose.budget`). On triage (records not kept) the child keeps the fabric
tables' records it parsed and runs the fabric extractors on them itself (:class:`RemoteLane`); on a bundle with
many fabric rows parsed here, those extractors run in a plain forked child (:func:`~diagnose.runtime.forked.
fork_lane`). The cyclic collector is paused while the parse builds millions of objects that form no cycles, and
they are frozen once built (see :mod:`diagnose.gcpause`).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog

from diagnose.budget import RecordBudget, held
from diagnose.bundle import BundleFile, LoadLimits
from diagnose.bundle.loader import preview_inputs
from diagnose.evidence.context import Context
from diagnose.evidence.extractors import FABRIC_LANE, FABRIC_TABLES, fabric_lane_reads
from diagnose.gcpause import Pause, run_paused
from diagnose.models.diagnosis import Finding
from diagnose.models.records import Record
from diagnose.runtime.forked import ForkSecond, can_fork, fork_lane, parse_forked
from diagnose.runtime.plan import worth_a_second
from diagnose.runtime.serial import Paths, Run, SerialExecutor, Stages, parse_in_order
from diagnose.runtime.spill import SpillDir
from diagnose.stages.find import Extractor, Outcomes, merged, owned, table_of
from diagnose.stages.parse import Evidence, Progress

log = structlog.get_logger("diagnose.pipeline")


@dataclass(frozen=True)
class ParallelExecutor:
    """Two processes when the bundle is worth it, one otherwise (the CLI's and the service's executor)."""

    # bulk dumps this large together are parsed on a second core (0: never): a fork costs ~10 ms, and the two
    # dumps of a 512-host fabric (54 MB) take 0.3 s of a 1.2 s triage
    min_bytes: int = 32 * 1024 * 1024
    # counter and topology rows from which the fabric extractors run in a forked second process (0: never)
    lane_min_rows: int = 40_000
    hand_over: int = 256  # small files handed to an idle second process at a time
    # whether to fork: None asks can_fork() (no other thread runs); True forks all the same (tests whose idle
    # threads left by other tests would stop it); False never forks (one core, as from a thread)
    fork: bool | None = None
    stages: Stages = field(default_factory=Stages)

    def may_fork(self) -> bool:
        if self.fork is None:
            return can_fork()
        return self.fork and hasattr(os, "fork") and (os.cpu_count() or 1) >= 2

    @contextmanager
    def start(self, limits: LoadLimits, progress: Progress | None = None) -> Iterator[Run]:
        spill = SpillDir()
        # Loading and parsing build millions of objects that form no cycles and live until the frames are built:
        # each full collection on the way walks all of them again (0.3-0.4 s at 4,096 hosts, a forked child's parse
        # included, as it inherits the pause). The collector is paused until they are frozen (see extract) and
        # resumes, if it ran (see diagnose.gcpause: pauses on other threads overlap), for the extractors.
        with Terminated(), run_paused() as pause:
            run = _Parallel(self, limits, progress, spill, pause)
            try:
                yield run
            except BaseException:  # an error or an interrupt: the child is stopped, not waited for
                run.stop(kill=True)
                raise
            finally:
                run.stop()
                spill.close()

    def run_extractors(self, ctx: Context, spill: SpillDir | None = None, remote: RemoteLane | None = None
                       ) -> tuple[list[Finding], float]:
        """Every extractor's findings, in registry order, and the MiB a second process added (0 when none ran).

        On a large bundle the fabric extractors (those reading the counter table or the fabric graph, which only
        they build) run in a forked child while this process runs the others (``remote``: the child that parsed
        the fabric tables runs them); the findings are merged in registry order, so the result is the same either
        way."""
        st = self.stages
        todo = st.extractors()
        fabric = [(n, f) for n, f in todo if n in FABRIC_LANE]
        rest = [(n, f) for n, f in todo if n not in FABRIC_LANE]
        own = spill or SpillDir()
        try:
            if remote is not None:
                if remote.asked is None:
                    remote.ask({k: ctx.frames[k] for k in fabric_lane_reads() if k in ctx.frames}, ctx.formats)
                here = st.run_some(ctx, rest)
                got, mib = remote.collect(ctx, fabric, bool(remote.asked))
                here.update(got)
                return merged(todo, here), mib
            rows = sum(len(ctx.frames[k]) for k in FABRIC_TABLES if k in ctx.frames)
            lane = fork_lane(ctx, fabric, own, st) if fabric and 0 < self.lane_min_rows <= rows and \
                self.may_fork() else None
            here = st.run_some(ctx, todo if lane is None else rest)
            mib = 0.0
            if lane is not None:
                got, mib = lane.collect(ctx)
                here.update(got)
        finally:
            if spill is None:
                own.close()
        return merged(todo, here), mib


@dataclass
class _Parallel:
    """One triage's run of a :class:`ParallelExecutor`: the second process it started, if any."""

    ex: ParallelExecutor
    limits: LoadLimits
    progress: Progress | None
    spill: SpillDir
    pause: Pause
    second: ForkSecond | None = None
    remote: RemoteLane | None = None

    def parse(self, paths: Paths, empty_ok: bool, keep_records: bool) -> list[Evidence]:
        ex, limits, progress, st = self.ex, self.limits, self.progress, self.ex.stages
        # Without records to return (triage), the child keeps the fabric tables' records it parses (the counter
        # dumps and the topology: most of a large bundle's bytes) and later runs the fabric extractors on them
        # itself; they never cross to this process, which holds the rest. The child is forked as soon as the large
        # files are known (listed, their heads read), before the thousands of small files are read (~0.3 s at
        # 4,096 hosts): it starts on the dumps while this process reads the rest.
        held.begin(limits.max_record_bytes, serial=False)  # before the fork: the child counts its own records
        preview = preview_inputs(paths, limits) if paths and ex.may_fork() else None
        if preview is not None and worth_a_second(preview, ex.min_bytes):
            self.second = ForkSecond.start(preview, limits, self.spill, not keep_records, st, ex.min_bytes)
        files = st.load(paths, limits, empty_ok)
        if self.second is not None and not self.second.adopt(files):  # not the files it was forked with
            self.stop(kill=True)
        gc.freeze()  # the loaded texts live until the end and hold no cycles: no collection walks them again
        if self.second is None and ex.may_fork() and worth_a_second(files, ex.min_bytes):
            self.second = ForkSecond.start(files, limits, self.spill, not keep_records, st, ex.min_bytes)
        if self.second is None or not self.second.bulk:  # one process, in path order
            self.stop()
            held.serial = True
            return parse_in_order(files, limits, progress, st)
        held.serial = False
        try:
            parts = parse_forked(files, set(self.second.bulk), self.second, limits, progress, ex.hand_over)
            if self.second.own_fabric:
                self.remote = RemoteLane(self.second, files, limits, parts, self.spill)
            else:
                self.second = None  # (closed by parse_forked)
            if held.limit and sum(p.record_bytes for p in parts) > held.limit:
                raise RecordBudget(held.limit)  # each process stayed under it, but not both together
        except RecordBudget:
            # the bundle's records pass the budget: which files are left out must not depend on which process
            # parsed what first, so it is parsed again, in one process, in path order (see diagnose.budget)
            self.stop(kill=True)
            del files
            log.warning("record_budget_reparse", limit_mib=limits.max_record_bytes >> 20)
            with SerialExecutor(st).start(limits, progress) as run:
                return run.parse(paths, empty_ok, keep_records)
        return parts

    def extract(self, ev: Evidence, keep_records: bool) -> tuple[list[Finding], float]:
        build = self.ex.stages.build_frames
        if self.remote is not None:
            # the frames the child's fabric extractors read first, sent before this process builds the rest: the
            # child starts on its part ~0.5 s earlier at 4,096 hosts (each frame is built from its table alone)
            shared: list[Record] = []
            rest: list[Record] = []
            lane_reads = fabric_lane_reads()
            for r in ev.records:
                (shared if table_of(r) in lane_reads else rest).append(r)
            frames = build(shared)
            self.remote.ask(frames, ev.formats)
            frames.update(build(rest))
            del shared, rest
        else:
            frames = build(ev.records)
        ctx = Context(frames=frames, formats=ev.formats)
        if not keep_records:
            ev.records = []
        # After parsing, a big bundle holds millions of objects that live until the run ends and form no cycles;
        # each full collection triggered by the extractors' allocations would walk all of them again (seconds at
        # 4,096 hosts). Frozen, they sit in the permanent generation until the run unfreezes them. Process-wide,
        # but it only delays cycle collection.
        gc.freeze()
        self.pause.release()
        return self.ex.run_extractors(ctx, self.spill, self.remote)

    def stop(self, kill: bool = False) -> None:
        """The second process let go (``kill``: stopped first); again is nothing."""
        second, self.second, self.remote = self.second, None, None
        if second is not None:
            second.close(kill=kill)


class RemoteLane:
    """The fabric extractors in the forked child that parsed the counter dumps and the topology and kept their
    records (see :func:`diagnose.runtime.forked.serve`): this process sends it the fabric tables' records it parsed
    itself and the other tables those extractors read (:func:`fabric_lane_reads`); if the child cannot answer, the
    files it parsed are parsed again here for their fabric records and the extractors run here."""

    def __init__(self, second: ForkSecond, files: list[BundleFile], limits: LoadLimits, parts: list[Evidence],
                 spill: SpillDir) -> None:
        self.second, self.files, self.limits, self.spill = second, files, limits, spill
        self.theirs = sorted(i for i in second.mine() if second.done.get(i) is not None)  # their records are there
        self.sent: dict[int, list[Record]] = {}
        for i, part in enumerate(parts):  # this process's own fabric records leave its frames
            mine, part.records = owned(part.records)
            if mine:
                self.sent[i] = mine

    asked: bool | None = None  # whether the child was asked (None: not yet)

    def ask(self, shared: dict[str, Any], formats: set[str]) -> None:
        """Send the child this process's fabric rows and ``shared`` (the frames of fabric_lane_reads())."""
        where = self.spill.get()
        self.asked = where is not None and self.second.ask_lane(self.sent, shared, set(formats), where)

    def collect(self, ctx: Context, todo: list[tuple[str, Extractor]], asked: bool) -> tuple[Outcomes, float]:
        got = self.second.lane_result() if asked else None
        if got is not None and set(got[0]) == {n for n, _ in todo}:
            return got
        log.warning("fabric_lane_failed", error="the second process gave no fabric findings; running them here")
        st = self.second.st
        by_file = dict(self.sent)
        for i in self.theirs:
            mine, _ = owned(st.parse_here(self.files[i], self.limits).records)
            if mine:
                by_file[i] = mine
        local = Context(frames={**ctx.frames, **st.build_frames([r for i in sorted(by_file) for r in by_file[i]])},
                        formats=ctx.formats)
        return st.run_some(local, todo), 0.0


class Terminated:
    """While a parallel run goes on in a process's main thread that left SIGTERM to its default (the CLI), SIGTERM
    leaves as ``SystemExit(143)`` instead of ending the process where it stands: the forked child is stopped and
    the spill folder removed on the way out, as on an error. A process that handles SIGTERM itself (the service)
    keeps its handler."""

    def __enter__(self) -> None:
        import signal

        self.previous = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self.previous = signal.signal(signal.SIGTERM, _exit_on_signal)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
