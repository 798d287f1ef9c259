"""The executor seam: how a triage's parse and extractors are spread over processes. The stages are the same
whichever executor runs them, and so is the result, byte for byte (tests/test_executors.py holds every fixture and
field case to it); :class:`SerialExecutor` is the reference: one process, every file in path order."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

from diagnose.budget import held
from diagnose.bundle import BundleFile, LoadLimits
from diagnose.evidence.context import Context
from diagnose.evidence.frames import build_frames
from diagnose.gcpause import Pause, run_paused
from diagnose.models.diagnosis import Finding
from diagnose.models.records import Record
from diagnose.stages import find, parse
from diagnose.stages.find import Extractor, Outcomes
from diagnose.stages.parse import Evidence, Progress

Paths = Sequence[str | os.PathLike[str]]


@dataclass(frozen=True)
class Stages:
    """The stage functions an executor calls, in whichever process it calls them (a forked child inherits them):
    the seam where a test puts a fault (a parse that fails in the second process only, an extractor that dies
    there)."""

    load: Callable[[Paths, LoadLimits, bool], list[BundleFile]] = parse.load
    parse_file: Callable[..., None] = parse.parse_file
    build_frames: Callable[[list[Record]], dict] = build_frames  # type: ignore[type-arg]
    extractors: Callable[[], list[tuple[str, Extractor]]] = find.all_extractors  # (name, function), registry order
    run_some: Callable[[Context, list[tuple[str, Extractor]]], Outcomes] = find.run_some

    def parse_here(self, bf: BundleFile, limits: LoadLimits, progress: Progress | None = None) -> Evidence:
        """``bf`` parsed in this process into an Evidence of its own (see :func:`diagnose.stages.parse.parse_here`).
        A large file's records are frozen: they live until the run ends and hold no cycles, so the collections the
        rest of the parse triggers do not walk them again (the run unfreezes everything at its end)."""
        part = parse.parse_here(bf, limits, progress, self.parse_file)
        if bf.stream is not None:
            gc.freeze()
        return part


def parse_in_order(files: list[BundleFile], limits: LoadLimits, progress: Progress | None, st: Stages
                   ) -> list[Evidence]:
    """Every file parsed in this process, in path order (one Evidence per file)."""
    parts = []
    for k, bf in enumerate(files):
        parts.append(st.parse_here(bf, limits, progress))
        if progress:
            progress(bf.path, k + 1, len(files))
    return parts


class Run(Protocol):
    """One triage's use of an executor (see :meth:`Executor.start`)."""

    def parse(self, paths: Paths, empty_ok: bool, keep_records: bool) -> list[Evidence]:
        """Load ``paths`` and parse every file: one Evidence per file, in file order (``keep_records``: the caller
        keeps the records after the frames are built; else an executor may keep some of them elsewhere)."""
        ...

    def extract(self, ev: Evidence, keep_records: bool) -> tuple[list[Finding], float]:
        """Every extractor's findings on ``ev`` (in registry order, see :func:`diagnose.stages.find.merged`) and
        the MiB a second process added (0 when none ran); ``ev.records`` is emptied once the frames hold them
        unless ``keep_records``."""
        ...


class Executor(Protocol):
    def start(self, limits: LoadLimits, progress: Progress | None) -> AbstractContextManager[Run]:
        """A run for one triage; leaving it (on an error too) leaves no process, file or collector state behind."""
        ...


@dataclass(frozen=True)
class SerialExecutor:
    """Everything in this process, every file in path order: the default for library callers, the reference in
    tests. The cyclic collector is paused while the parse builds objects that form no cycles, and those are frozen
    once the frames hold them (:func:`diagnose.gcpause.run_paused`): it only changes how long a large bundle takes."""

    stages: Stages = Stages()

    @contextmanager
    def start(self, limits: LoadLimits, progress: Progress | None = None) -> Iterator[Run]:
        with run_paused() as pause:
            yield _Serial(self.stages, limits, progress, pause)


@dataclass
class _Serial:
    stages: Stages
    limits: LoadLimits
    progress: Progress | None
    pause: Pause

    def parse(self, paths: Paths, empty_ok: bool, keep_records: bool) -> list[Evidence]:
        files = self.stages.load(paths, self.limits, empty_ok)
        held.begin(self.limits.max_record_bytes, serial=True)
        return parse_in_order(files, self.limits, self.progress, self.stages)

    def extract(self, ev: Evidence, keep_records: bool) -> tuple[list[Finding], float]:
        ctx = Context(frames=self.stages.build_frames(ev.records), formats=ev.formats)
        if not keep_records:
            ev.records = []
        gc.freeze()
        self.pause.release()
        todo = self.stages.extractors()
        return find.merged(todo, self.stages.run_some(ctx, todo)), 0.0
