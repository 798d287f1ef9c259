"""The forked parse child of a large triage: the second core's share of the evidence.

After listing the bundle, :class:`diagnose.runtime.parallel.ParallelExecutor` forks a child (:class:`ForkSecond`) that parses the large
files claimed through a shared byte per file (:class:`Claims`), takes batches of small files when idle, keeps the
fabric tables' rows it parsed, builds their frames and counter table (:class:`Ready`) and runs the fabric
extractors on them (:func:`serve_lane`); :func:`parse_forked` is this process's side of the parse. The protocol
is lines on two pipes (``take``, ``parsed``, ``lane`` one way; ``index path``, ``spec``, ``lane`` the other), results
in pickles in the spill folder.

The stage functions both processes call are the executor's :class:`~diagnose.runtime.serial.Stages` (the child
inherits them): one definition, and one place to put a fault in tests, for both processes. :class:`Lane` is the
plain fork of the fabric extractors (the child that parsed nothing), :func:`can_fork` says when a fork is safe.
"""

from __future__ import annotations

import collections
import gc
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from diagnose import gcpause
from diagnose.budget import RecordBudget
from diagnose.bundle import BundleFile, LoadLimits
from diagnose.evidence.context import Context
from diagnose.evidence.extractors import FABRIC_LANE, FABRIC_TABLES
from diagnose.models.records import Record
from diagnose.runtime import memtune
from diagnose.runtime.plan import file_cost, plan
from diagnose.runtime.serial import Stages
from diagnose.runtime.spill import SpillDir, leave, peak_mib, take_back
from diagnose.stages.find import Extractor, Outcomes, owned, table_of
from diagnose.stages.parse import Evidence, Progress, taken

log = structlog.get_logger("diagnose.pipeline")


class ForkSecond:
    """A forked child that parses files of the bundle by index (in the list it was forked with: the bundle as
    listed, its large files' heads read, see :meth:`adopt`), leaving each file's Evidence in a pickle in the spill
    folder and reporting ``index path`` lines on a pipe (``index -`` when it could not).

    The large files (``bulk``, most expensive first) are claimed one at a time through a shared byte per file: the
    child takes them from the front; this process takes one from the back when the cost estimates say the child
    would still be busy after it (:meth:`behind`), and whatever is left once it has nothing else to do. Batches of
    small files are sent, pickled, when the child is idle (it was forked before they were read). It inherits every
    module already imported and starts in milliseconds, where a fork server first imports the pipeline (~1.5 s
    measured at 4,096 hosts while this process parses)."""

    def __init__(self, pid: int, jobs: int, results: int, files: list[BundleFile], bulk: list[int], claims: Claims,
                 costs: dict[int, float], own_fabric: bool, where: str, st: Stages | None = None) -> None:
        self.pid = pid
        self.st = st or Stages()  # the stage functions both processes call
        self.files = files  # what the child was forked with (see adopt)
        self.where = where  # the spill folder: batches of small files go through it
        self.costs = costs  # estimated seconds per bulk file
        self.jobs = jobs
        self.results = results
        self.bulk = bulk
        self.claims = claims
        self.sent: dict[int, float] = {}  # small files sent, with their estimated cost
        self.unanswered = 0  # how many of those the child has not reported yet
        self.done: dict[int, tuple[str, int] | None] = {}  # file -> (pickle, place in it); None: not parsed there
        self.loaded: dict[str, list[Evidence] | None] = {}
        self.eof = False
        self._buf = b""
        self.own_fabric = own_fabric  # the child keeps the fabric tables' records and runs the fabric extractors
        self.lane: str | None = None  # where the child left the fabric extractors' results ("-": it could not)
        self.building = False  # the child is building its frames early (see serve)

    @classmethod
    def start(cls, files: list[BundleFile], limits: LoadLimits, spill: SpillDir, own_fabric: bool = False,
              st: Stages | None = None, min_bytes: int = 1) -> ForkSecond | None:
        """Fork the child on ``files``, its bulk files (together at least ``min_bytes``) planned (:func:`plan`)
        here first, so that it inherits the plan and the sniffed formats; it calls the stages ``st``."""
        where = spill.get()
        if where is None:
            return None
        bulk, costs = plan(files, limits, min_bytes)  # before the fork: the child inherits the sniffed formats
        claims = Claims(len(bulk))
        jr, jw = os.pipe()
        rr, rw = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (jr, jw, rr, rw):
                os.close(fd)
            log.warning("parallel_parse_unavailable", error=repr(exc))
            return None
        if pid == 0:  # the child: parse what it is given, then leave without running this process's exit code
            code = 1
            try:
                os.close(jw)
                os.close(rr)
                serve(files, limits, claims, where, jr, rw, own_fabric, bulk, st or Stages())
                code = 0
            finally:
                # the parent reads the results pipe to its end before it goes on: closed here, its end comes now,
                # not once the kernel has torn down this process's memory (~0.08 s for a 4,096-host fabric's)
                try:
                    os.close(rw)
                finally:  # whatever the close raises (an error, a signal), this process leaves here
                    os._exit(code)
        os.close(jr)
        os.close(rw)
        return cls(pid, jw, rr, files, bulk, claims, costs, own_fabric, where, st or Stages())

    def adopt(self, files: list[BundleFile]) -> bool:
        """Take ``files`` (what :func:`load_inputs` gave) for the ones the child was forked with (those of
        :func:`preview_inputs`: the same paths, the large files only read): True when they are the same list and the
        same large files (the sniffed formats of those are then kept); False when they differ (an archive known by
        its magic bytes, a file changed meanwhile): the child must then be stopped."""
        if len(files) != len(self.files) or any(a.path != b.path for a, b in zip(files, self.files, strict=True)):
            return False
        for i in self.bulk:
            if files[i].stream is None or files[i].stream != self.files[i].stream or files[i].text is None:
                return False
        for bf, seen in zip(files, self.files, strict=True):  # the large files sniffed to choose the bulk ones
            if seen.sniffed is not None and bf.stream is not None and bf.stream == seen.stream and bf.text == seen.text:
                bf.sniffed = seen.sniffed
        self.files = files
        return True

    def claim(self) -> int | None:
        """A bulk file nobody has started, for this process (the smallest left), or None."""
        for k in range(len(self.bulk) - 1, -1, -1):
            if self.claims.take(k, 2):
                return self.bulk[k]
        return None

    def next_free(self) -> int | None:
        """The bulk file :meth:`claim` would take now, or None."""
        return next((i for k, i in reversed(list(enumerate(self.bulk))) if not self.claims.owner(k)), None)

    def behind(self) -> float:
        """Estimated seconds of work the child still has: what is left of the bulk files it is on (their estimates
        less the time since it took them), the bulk files nobody has taken and the small files sent."""
        self._pump(block=False)
        left = 0.0
        for k, i in enumerate(self.bulk):
            owner = self.claims.owner(k)
            if owner == 0:
                left += self.costs[i]
            elif owner == 1 and i not in self.done:
                left += max(0.0, self.costs[i] - self.claims.since(k))
        return left + sum(c for i, c in self.sent.items() if i not in self.done)

    def mine(self) -> set[int]:
        """Files the child has taken or been sent."""
        return {i for k, i in enumerate(self.bulk) if self.claims.owner(k) == 1} | set(self.sent)

    def idle(self) -> bool:
        """The child has nothing left to do (every bulk file taken, all it took reported)."""
        self._pump(block=False)
        if self.eof or self.building or self.unanswered:  # (asked after every small file: no set built here)
            return False
        owners = list(map(self.claims.owner, range(len(self.bulk))))
        return all(owners) and all(self.bulk[k] in self.done for k, o in enumerate(owners) if o == 1)

    def send(self, batch: list[int], costs: list[float]) -> bool:
        """Hand the small files ``batch`` to the child (left in a pickle: it may not have read them itself)."""
        try:
            path = leave([self.files[i] for i in batch], self.where)
        except Exception:  # noqa: BLE001 - no room: parsed here
            return False
        try:
            os.write(self.jobs, f"take {','.join(map(str, batch))} {path}\n".encode())
        except OSError:
            os.unlink(path)
            return False
        self.sent.update(zip(batch, costs, strict=True))
        self.unanswered += len(batch)
        return True

    def result(self, i: int) -> Evidence | None:
        """The child's Evidence of file ``i``; None if it could not parse it (then it is parsed here)."""
        while i not in self.done and not self.eof:
            self._pump(block=True)
        got = self.done.get(i)
        if got is None:
            return None
        path, pos = got
        if path not in self.loaded:
            try:
                self.loaded[path] = take_back(path)
            except Exception as exc:  # noqa: BLE001 - a result that cannot be read is parsed again here
                log.warning("parallel_parse_failed", file=i, error=repr(exc))
                self.loaded[path] = None
            gc.freeze()  # as for a large file parsed here (see Stages.parse_here)
        batch = self.loaded[path]
        return batch[pos] if batch is not None else None

    def parsed(self, tables: set[str]) -> None:
        """Tell the child this process is done parsing and which fabric tables it has rows of."""
        try:
            os.write(self.jobs, ("parsed " + " ".join(sorted(tables)) + "\n").encode())
        except OSError:
            pass

    def ask_lane(self, sent: dict[int, list[Record]], shared: dict[str, Any], formats: set[str], where: str
                 ) -> bool:
        """Ask the child for the fabric extractors' findings (see :func:`serve_lane`)."""
        try:
            path = leave((sent, shared, formats), where)
            os.write(self.jobs, f"lane {path}\n".encode())
        except Exception as exc:  # noqa: BLE001
            log.warning("fabric_lane_failed", error=repr(exc))
            return False
        return True

    def lane_result(self) -> tuple[Outcomes, float] | None:
        """The child's fabric findings (and its private MiB), or None if it could not give them."""
        while self.lane is None and not self.eof:
            self._pump(block=True)
        if self.lane in (None, "-"):
            return None
        try:
            return take_back(self.lane)  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001
            log.warning("fabric_lane_failed", error=repr(exc))
            return None

    def wait_any(self, files: list[int]) -> None:
        """Until one of ``files`` is reported (or the child is gone)."""
        while not self.eof and not any(i in self.done for i in files):
            self._pump(block=True)

    def _pump(self, block: bool) -> None:
        import select

        if self.eof:
            return
        if not block and not select.select([self.results], [], [], 0)[0]:
            return
        data = os.read(self.results, 1 << 16)
        if not data:
            self.eof = True
            return
        *lines, self._buf = (self._buf + data).split(b"\n")
        for ln in lines:
            batch, _, path = ln.decode().partition(" ")
            if batch == "lane":
                self.lane = path
                continue
            if batch == "spec":  # building its frames early (see serve): not idle meanwhile
                self.building = path == "1"
                continue
            for pos, i in enumerate(map(int, batch.split(","))):
                if i in self.sent and i not in self.done:
                    self.unanswered -= 1
                self.done[i] = None if path == "-" else (path, pos)

    def close(self, kill: bool = False) -> None:
        """Let the child finish (it leaves when the batch pipe closes) and reap it; ``kill``: stop it first (this
        process is leaving on an error)."""
        import signal

        try:
            os.close(self.jobs)
        except OSError:
            pass
        if kill:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        while not self.eof:  # what it still reports is not needed: read to its end so that it never blocks
            try:
                self._pump(block=True)
            except OSError:
                break
        try:
            os.close(self.results)
        except OSError:
            pass
        reap(self.pid)
        self.claims.close()


def reap(pid: int) -> None:
    """Reap the child ``pid``, which has closed its pipes and is leaving: at once if it is gone, else from a thread
    that waits for it (the kernel tearing down a child's memory takes as long as this process's next steps), or
    here if no thread can be started."""
    if gone(pid):
        return
    try:
        Reaper(pid).start()
    except RuntimeError:  # no thread to be had (a process or memory limit)
        _wait(pid)


def gone(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def _wait(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class Reaper(threading.Thread):
    """Waits for one leaving child (see :func:`join_reapers`)."""

    def __init__(self, pid: int) -> None:
        super().__init__(name=f"diagnose-reap-{pid}", daemon=True)
        self.pid = pid

    def run(self) -> None:
        _wait(self.pid)


def join_reapers() -> None:
    """Wait until the children left to :class:`Reaper` threads are reaped (each thread ends with its child's exit),
    so that a fork after it forks a process with one thread."""
    for t in threading.enumerate():
        if isinstance(t, Reaper):
            t.join()


def can_fork() -> bool:
    """Whether a child may be forked here: a POSIX process with no thread but this one (a fork copies only the
    calling thread; a lock another thread holds, such as a stream's, would stay held in the child forever). The
    threads reaping earlier children are waited for first: each ends when the kernel has freed its child (a triage
    right after another waits up to ~0.1 s for that)."""
    join_reapers()
    return hasattr(os, "fork") and threading.active_count() == 1 and (os.cpu_count() or 1) >= 2


@dataclass
class Lane:
    """Fabric extractors running in a forked child (:func:`fork_lane`), whose results land in ``path``."""

    pid: int
    path: str
    todo: list[tuple[str, Extractor]]
    st: Stages

    def collect(self, ctx: Context) -> tuple[Outcomes, float]:
        """The child's results (and its peak memory in MiB); the extractors run here if it failed."""
        try:
            _, status = os.waitpid(self.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"fabric lane exited with status {os.waitstatus_to_exitcode(status)}")
            out, mib = take_back(self.path)
            if set(out) != {n for n, _ in self.todo}:
                raise RuntimeError("fabric lane returned another set of extractors")
            return out, mib
        except Exception as exc:  # noqa: BLE001 - a lost child costs time, never findings (the spill folder
            log.warning("fabric_lane_failed", error=repr(exc))  # goes with what it may hold)
            return self.st.run_some(ctx, self.todo), 0.0


def fork_lane(ctx: Context, todo: list[tuple[str, Extractor]], spill: SpillDir, st: Stages) -> Lane | None:
    """Fork a child that runs ``todo`` on the same (copy-on-write) frames and leaves its findings in a file (the
    caller has checked that it may fork, :func:`can_fork`). The child never logs and leaves by ``os._exit``."""
    where = spill.get()
    if where is None:
        return None
    import tempfile

    try:
        fd, path = tempfile.mkstemp(dir=where, suffix=".pickle")
    except OSError as exc:  # no room for its result: the extractors run here
        log.warning("fabric_lane_unavailable", error=repr(exc))
        return None
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(fd)
        log.warning("fabric_lane_unavailable", error=repr(exc))
        return None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(fd)
            leave((st.run_some(ctx, todo), peak_mib()), where, path)
            code = 0
        finally:
            os._exit(code)
    os.close(fd)
    return Lane(pid, path, todo, st)


class Claims:
    """Who parses each bulk file, shared by this process and its forked child: a byte per file (0 free, 1 the
    child, 2 this process) and the time it was taken (the child's progress, for this process's estimates), in an
    anonymous shared map, set under a lock that both inherit."""

    def __init__(self, n: int) -> None:
        import mmap

        self.n = n
        self.base = (n + 7) // 8 * 8
        self.map = mmap.mmap(-1, self.base + 8 * n or 1)
        self.lock = multiprocessing.get_context("fork").Lock()

    def take(self, k: int, who: int) -> bool:
        import struct
        import time

        with self.lock:
            if self.map[k]:
                return False
            self.map[k] = who
            struct.pack_into("d", self.map, self.base + 8 * k, time.monotonic())
            return True

    def owner(self, k: int) -> int:
        return self.map[k]

    def since(self, k: int) -> float:
        import struct
        import time

        return time.monotonic() - struct.unpack_from("d", self.map, self.base + 8 * k)[0]

    def close(self) -> None:
        self.map.close()


def serve(files: list[BundleFile], limits: LoadLimits, claims: Claims, where: str, jobs_fd: int,
          results_fd: int, own_fabric: bool, bulk: list[int], st: Stages) -> None:
    """The child's loop: the bulk files (``files[i]`` for ``i`` in ``bulk``) it can claim, front first, then the
    batches of small files sent (``take I,J... PATH``: the files, pickled) until the pipe closes. Each file or
    batch is left in one pickle (a list of Evidence, one per file) and reported on one line.

    ``own_fabric``: the records of the fabric tables stay here (never pickled); a ``lane PATH`` line then asks for
    the fabric extractors' findings, run here on them (see :func:`serve_lane`)."""

    gc.freeze()
    collecting = gcpause.collecting()  # whether the collector ran before the parent's pauses (it is off now)
    gcpause.forget_holds()
    memtune.tune_child()  # no huge pages, freed columns reused: this process only (see diagnose.runtime.memtune)
    kept: dict[int, list[Record]] = {}
    early: Ready | None = None  # built before this process said which fabric tables it has rows of

    def parse(batch: list[int]) -> None:
        nonlocal early
        parts = []
        try:
            for i in batch:
                part = Evidence()
                st.parse_file(files[i], part, limits, mapped=True)  # if a dump shrinks under it, this process dies
                if own_fabric:
                    mine, part.records = owned(part.records)
                    if mine:
                        kept[i] = mine
                        early = None  # rows it was not built with
                parts.append(part)
        except RecordBudget:  # past this process's share of the budget: the parent parses them, and finds it spent
            for i in batch:
                if kept.pop(i, None) is not None:
                    early = None
            os.write(results_fd, f"{','.join(map(str, batch))} -\n".encode())
            return
        mib = peak_mib()
        for part in parts:
            part.second_core_peak_mib = mib
        try:
            path = leave(parts, where)
        except Exception:  # noqa: BLE001 - no room, or a value that cannot be pickled: parsed again there
            path = "-"
        os.write(results_fd, f"{','.join(map(str, batch))} {path}\n".encode())

    for k, i in enumerate(bulk):
        if claims.take(k, 1):
            parse([i])
    ready: Ready | None = None
    told = False  # a `parsed` line came

    def build_early() -> None:
        """While nothing is asked of it, the child builds its frames as if this process had no fabric rows (true
        when the child parsed every bulk file, as at scale); told otherwise, it builds them again. Meanwhile it is
        not idle: no small files are handed to it (``spec 1`` / ``spec 0``)."""
        nonlocal early
        if told:
            return  # this process has said which tables it has: built then
        os.write(results_fd, b"spec 1\n")
        early = Ready.build(kept, frozenset(), prune=False, frames_of=st.build_frames)
        os.write(results_fd, b"spec 0\n")

    wants_early = own_fabric and bool(kept) and all(claims.owner(k) == 1 for k in range(len(bulk)))
    for line in _lines(jobs_fd, build_early if wants_early else None):
        if line.startswith(b"lane "):
            serve_lane(kept, line[5:].strip().decode(), where, results_fd, ready, st, collecting)
        elif line.startswith(b"parsed"):
            told = True
            theirs = frozenset(t.decode() for t in line.split()[1:])
            ready = early.told(kept, theirs) if early is not None and early.fits(theirs) else \
                Ready.build(kept, theirs, frames_of=st.build_frames)
            early = None
        elif line.startswith(b"take "):
            _, ids, path = line.decode().split()
            batch = [int(i) for i in ids.split(",")]
            try:
                handed = take_back(path)
            except Exception:  # noqa: BLE001 - not readable: parsed there
                os.write(results_fd, f"{ids} -\n".encode())
                continue
            for i, bf in zip(batch, handed, strict=True):
                files[i] = bf
            parse(batch)


def _lines(fd: int, when_idle: Callable[[], None] | None, wait: float = 0.02) -> Iterator[bytes]:
    """The lines read from ``fd`` until its end; ``when_idle`` is called once, the first time no line has come for
    ``wait`` seconds."""
    import select

    buf = b""
    while True:
        while b"\n" not in buf:
            if when_idle is not None and not select.select([fd], [], [], wait)[0]:
                when_idle()
                when_idle = None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                if buf:
                    yield buf
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        yield line + b"\n"


@dataclass
class Ready:
    """What the child builds of its own fabric records while this process finishes its part (told by a ``parsed
    T...`` line which fabric tables ``T`` it has records of): the frames of the other fabric tables, and the
    counter table when this process has no counter rows. Each frame is built from one table's rows alone, so
    those built early are the frames the merged rows would give."""

    theirs: frozenset[str]  # the fabric tables this process has rows of (built once its rows arrive)
    frames: dict[str, Any]
    counters: Any  # the counter table, or None

    @classmethod
    def build(cls, kept: dict[int, list[Record]], theirs: frozenset[str], prune: bool = True, *,
              frames_of: Callable[[list[Record]], dict[str, Any]]) -> Ready | None:
        """``prune``: the rows now in the frames are dropped from ``kept`` (else :meth:`told` does it);
        ``frames_of``: the stage that builds frames (:attr:`Stages.build_frames`)."""
        from diagnose.evidence.counters import build_counter_table

        try:
            mine = [r for i in sorted(kept) for r in kept[i] if table_of(r) not in theirs]
            frames = frames_of(mine)
            counters = None if theirs & _COUNTER_TABLES else build_counter_table(frames)
        except Exception:  # noqa: BLE001 - built again with the rest
            return None
        del mine
        if counters is not None:  # nothing reads the counter rows but the table (evidence/counters.py)
            frames.pop("PortCounter", None)
            frames.pop("PortCounterWide", None)
        ready = cls(theirs, frames, counters)
        return ready.told(kept, theirs) if prune else ready

    def fits(self, theirs: frozenset[str]) -> bool:
        """Whether what was built holds for ``theirs``: none of those tables built here, and no counter table
        built if this process has counter rows."""
        return not theirs & set(self.frames) and not (self.counters is not None and theirs & _COUNTER_TABLES)

    def told(self, kept: dict[int, list[Record]], theirs: frozenset[str]) -> Ready:
        """This, for this process's fabric tables ``theirs`` (see :meth:`fits`); the kept rows now in the frames are
        dropped (the dumps' columns: ~230 MB)."""
        for i in list(kept):
            kept[i] = [r for r in kept[i] if table_of(r) in theirs]
        memtune.trim()  # the dumps' columns just dropped (glibc keeps a freed heap's pages otherwise)
        return Ready(theirs, self.frames, self.counters)


_COUNTER_TABLES = frozenset({"PortCounter", "PortCounterWide"})


def serve_lane(kept: dict[int, list[Record]], request: str, where: str, results_fd: int, ready: Ready | None,
               st: Stages, collecting: bool = True) -> None:
    """Run the fabric extractors in the child on the fabric tables' records it kept plus those this process sends
    (``request``: a pickle of (records by file, the other frames the extractors read, formats)), all in file order;
    their results are left in a pickle reported as ``lane PATH`` (``lane -`` when they could not be).
    ``collecting``: the collector ran before the parent paused it, and runs again for the extractors."""
    path = "-"
    try:
        sent, shared, formats = take_back(request)
        theirs = frozenset(table_of(r) for rs in sent.values() for r in rs)
        if ready is None:
            ready = Ready(theirs=frozenset(FABRIC_TABLES), frames={}, counters=None)  # nothing built early
        elif ready.theirs != theirs:  # rows this process parsed again after saying it was done: the kept rows
            raise RuntimeError("fabric rows changed after the parse")  # are gone; it runs the lane itself
        by_file = {**kept, **sent}
        frames = dict(ready.frames)
        frames.update(st.build_frames([r for i in sorted(by_file) for r in by_file[i]
                                       if table_of(r) in ready.theirs]))
        frames.update(shared)
        ctx = Context(frames=frames, formats=formats)
        if ready.counters is not None:
            ctx.use_counters(ready.counters)
        gc.freeze()
        if collecting:  # (paused since the fork, as the parent pauses it while parsing)
            gc.enable()
        out = st.run_some(ctx, [(n, f) for n, f in st.extractors() if n in FABRIC_LANE])
        path = leave((out, peak_mib()), where)
    except Exception:  # noqa: BLE001 - this process then runs them on what it parses again
        path = "-"
    os.write(results_fd, f"lane {path}\n".encode())


def parse_forked(files: list[BundleFile], offload: set[int], second: ForkSecond, limits: LoadLimits,
                 progress: Progress | None, hand_over: int) -> list[Evidence]:
    """Parse ``files`` here and in the forked ``second``; one Evidence per file, in file order (``hand_over``: small
    files handed to an idle child at a time)."""
    st = second.st
    parts: list[Evidence | None] = [None] * len(files)
    done = 0

    def here(i: int) -> None:
        nonlocal done
        parts[i] = st.parse_here(files[i], limits, progress)
        done += 1
        if progress:
            progress(files[i].path, done, len(files))

    def take(i: int) -> None:
        nonlocal done
        got = second.result(i)
        if got is None:
            here(i)
            return
        taken(got)
        parts[i] = got
        done += 1
        if progress:
            progress(files[i].path, done, len(files))

    try:
        # small files last, so that batches for an idle child come off the back of the queue: the cheapest last
        # (a batch is then a few hundred alike files, never a 3 MB nccl-tests table the child is still on at the end)
        small = [i for i, bf in enumerate(files) if i not in offload and bf.stream is None and bf.text is not None]
        cost = {i: file_cost(files[i]) for i in small}
        small.sort(key=lambda i: -cost[i])  # stable: alike files stay in file order
        smalls = set(small)
        queue = collections.deque([i for i in range(len(files)) if i not in offload and i not in smalls] + small)
        small_left = len(small)
        small_cost = sum(cost.values())  # estimated seconds of the small files left here
        claimed = False
        while queue:
            if not claimed and len(queue) == small_left:
                # this process's own large files are done; before the small ones (the work either side can take at
                # the end), a bulk file the child has not started, when the estimates say the child would still be
                # busy after this process had parsed it and all its small files
                claimed = True
                while (i := second.next_free()) is not None and small_cost + second.costs[i] < second.behind():
                    if (i := second.claim()) is None:
                        break
                    here(i)
            i = queue.popleft()
            small_left = min(small_left, len(queue))
            small_cost -= cost.get(i, 0.0)
            here(i)
            if small_left >= 2 * hand_over and second.idle():
                picked = [queue.pop() for _ in range(hand_over)][::-1]
                if second.send(picked, [cost[j] for j in picked]):
                    small_left -= hand_over
                    small_cost -= sum(cost[j] for j in picked)
                else:
                    queue.extend(picked)
        while (i := second.claim()) is not None:  # the bulk files the child has not started
            here(i)
        if second.own_fabric:  # the child may start on its fabric tables (see Ready)
            second.parsed({table_of(r) for p in parts if p is not None for r in p.records} & FABRIC_TABLES)
        theirs = sorted(second.mine())
        while theirs:  # in the order they are ready (placed in file order all the same)
            second.wait_any(theirs)
            ready = [i for i in theirs if i in second.done] or theirs[:1]
            theirs = [i for i in theirs if i not in set(ready)]
            for i in ready:
                take(i)
    except BaseException:
        second.close(kill=True)
        raise
    if not second.own_fabric:  # else it stays for the fabric extractors (the run closes it)
        second.close()
    return [p if p is not None else st.parse_here(files[j], limits, progress) for j, p in enumerate(parts)]
