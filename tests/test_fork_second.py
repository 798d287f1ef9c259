"""The forked second process that parses the large files (and small ones when it is idle): whatever it does or
fails to do, the evidence is what one process alone gives, and nothing of it is left behind."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from diagnose import pipeline
from diagnose.bundle import BundleError, LoadLimits
from diagnose.evidence.frames import build_frames
from diagnose.models.records import ColumnBatch
from diagnose.runtime import ParallelExecutor, Stages, memtune
from diagnose.runtime import forked as forking
from diagnose.stages import parse
from diagnose.stages.find import run_some

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SMALL = dict(stream_bytes=16 * 1024, chunk_bytes=4096)  # the fixture's dumps and topology count as large
LIMITS = LoadLimits(**SMALL)
# the parallel executor on every bulk file; it forks even though idle threads that other tests leave would stop it
# (only the machinery is under test here: can_fork has a test of its own)
TWO = ParallelExecutor(min_bytes=1, fork=True)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="no fork or one core")


def _bundle(tmp_path: Path, hosts: int) -> Path:
    b = tmp_path / "bundle"
    shutil.copytree(ROOT / "fixtures/link/bad_cable/positive-fattree64-hca-end", b)
    ib = sorted((DATA / "ibstat").glob("*.txt"))
    for i in range(hosts):
        d = b / f"gpu-z{i:03d}"
        d.mkdir()
        shutil.copy(ib[i % len(ib)], d / "ibstat.txt")
    return b


def _result(ev: pipeline.Evidence) -> tuple[Any, ...]:
    records = [(r.source, r.table, {k: list(v) for k, v in r.columns.items()}) if isinstance(r, ColumnBatch) else r
               for r in ev.records]
    return records, ev.files, ev.formats, [f.model_dump_json() for f in ev.findings]


@pytest.fixture
def spill_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children forked to parse (each must be reaped by the time gather returns)."""
    pids: list[int] = []
    real = forking.ForkSecond.start.__func__  # type: ignore[attr-defined]

    def start(cls: type, *a: Any, **k: Any) -> Any:
        got = real(cls, *a, **k)
        if got is not None:
            pids.append(got.pid)
        return got

    monkeypatch.setattr(forking.ForkSecond, "start", classmethod(start))
    return pids


def _reaped(pids: list[int], within: float = 10.0) -> bool:
    """Every child forked has been reaped (by gather, or by the thread it left to wait for a leaving child)."""
    assert pids, f"no child was forked; threads running: {[t.name for t in threading.enumerate()]}"
    deadline = time.monotonic() + within
    left = list(pids)
    while left:
        try:
            os.kill(left[0], 0)  # still there, if only as a zombie: not reaped yet
        except ProcessLookupError:
            left.pop(0)
            continue
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _child_first(self: forking.ForkSecond) -> None:
    """A stand-in for ``_ForkSecond.claim``: this process takes no large file, and waits until the child has one."""
    while not self.eof and not any(self.claims.owner(k) == 1 for k in range(len(self.bulk))):
        time.sleep(0.01)
        self._pump(block=False)


def _slowed_here(seconds: float) -> Stages:
    """Stages whose parse of a small file takes ``seconds`` longer in this process (not in the child)."""
    parent = os.getpid()

    def slow(bf: Any, *a: Any, **k: Any) -> None:
        if bf.stream is None and os.getpid() == parent:
            time.sleep(seconds)
        parse.parse_file(bf, *a, **k)

    return Stages(parse_file=slow)


def _handing(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], ParallelExecutor]:
    """Small files handed to the child four at a time, while this process is slowed on its own (so that the idle
    child gets some) and takes no large file: the files handed, as they are, and the executor that does it."""
    sent: list[int] = []
    real_send = forking.ForkSecond.send

    def spy(self: forking.ForkSecond, batch: list[int], costs: list[float]) -> bool:
        sent.extend(batch)
        return real_send(self, batch, costs)

    monkeypatch.setattr(forking.ForkSecond, "send", spy)
    monkeypatch.setattr(forking.ForkSecond, "claim", _child_first)
    return sent, ParallelExecutor(min_bytes=1, fork=True, hand_over=4, stages=_slowed_here(0.005))


def test_the_child_parses_large_and_handed_small_files_with_the_same_result(tmp_path: Path, spill_root: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             children: list[int]) -> None:
    bundle = _bundle(tmp_path, 40)
    serial = pipeline.gather([bundle], limits=LIMITS)
    sent, handing = _handing(monkeypatch)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=handing)
    assert _result(forked) == _result(serial)
    assert forked.second_core_peak_mib > 0  # the child did parse some of it
    # how many small files the idle child is handed depends on the scheduler (a busy machine hands none): what
    # must hold is that none is handed twice and, above, that the result is the serial one
    assert len(sent) == len(set(sent))
    assert list(spill_root.iterdir()) == []
    assert _reaped(children)


def test_a_child_that_dies_at_once_loses_nothing(tmp_path: Path, spill_root: Path,
                                                 monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS)
    monkeypatch.setattr(forking, "serve", lambda *a: os._exit(7))
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO)
    assert _result(forked) == _result(serial)
    assert forked.second_core_peak_mib == 0  # all of it was parsed here
    assert list(spill_root.iterdir()) == []
    assert _reaped(children)


def test_a_child_that_dies_midway_loses_nothing(tmp_path: Path, spill_root: Path,
                                                monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS)
    real = parse.parse_file
    parent = os.getpid()
    calls = [0]

    def dies_on_its_second_file(bf: Any, *a: Any, **k: Any) -> None:
        if os.getpid() != parent:
            calls[0] += 1
            if calls[0] == 2:
                os._exit(9)
        real(bf, *a, **k)

    monkeypatch.setattr(forking.ForkSecond, "claim", _child_first)  # the large files are the child's
    dying = ParallelExecutor(min_bytes=1, fork=True, stages=Stages(parse_file=dies_on_its_second_file))
    forked = pipeline.gather([bundle], limits=LIMITS, executor=dying)
    assert _result(forked) == _result(serial)
    assert forked.second_core_peak_mib > 0  # its first file did come back
    assert _reaped(children)


def test_results_the_child_cannot_store_are_parsed_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         children: list[int]) -> None:
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS)

    def no_room(*a: Any, **k: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", no_room)  # the child's pickles; the folder itself is made here
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO)
    assert _result(forked) == _result(serial)
    assert forked.second_core_peak_mib == 0
    assert _reaped(children)


@pytest.mark.slow
def test_this_process_takes_the_large_files_a_slow_child_has_not_started(tmp_path: Path, spill_root: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         children: list[int]) -> None:
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS)
    taken: list[int] = []
    real_claim, real_serve = forking.ForkSecond.claim, forking.serve

    def claim(self: forking.ForkSecond) -> int | None:
        got = real_claim(self)
        if got is not None:
            taken.append(got)
        return got

    def slow(*a: Any) -> None:
        time.sleep(2.0)  # this process is done with its own files long before
        real_serve(*a)

    monkeypatch.setattr(forking.ForkSecond, "claim", claim)
    monkeypatch.setattr(forking, "serve", slow)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO)
    assert len(taken) == 3  # both dumps and the topology
    assert _result(forked) == _result(serial)
    assert _reaped(children)


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forking.can_fork()  # a service's worker threads: the fork server's pool instead
    finally:
        stop.set()
        t.join()


def test_gather_does_not_wait_for_its_child_to_be_freed_and_the_next_triage_still_forks(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    """The child closes its results pipe before it leaves, and a thread reaps it: gather returns while the kernel
    still frees the child. A triage right after waits for that thread (a fork copies one thread) and forks."""
    real_run = forking.Reaper.run

    def slow_run(self: forking.Reaper) -> None:
        time.sleep(0.3)  # as a child with much memory to free
        real_run(self)

    monkeypatch.setattr(forking, "gone", lambda pid: False)  # not gone yet, as when the kernel is still freeing it
    monkeypatch.setattr(forking.Reaper, "run", slow_run)
    bundle = _bundle(tmp_path, 6)
    first = pipeline.gather([bundle], limits=LIMITS, executor=TWO, keep_records=False)
    assert [t for t in threading.enumerate() if isinstance(t, forking.Reaper)]  # returned before the child was reaped
    second = pipeline.gather([bundle], limits=LIMITS, executor=TWO, keep_records=False)
    assert len(children) == 2
    assert _findings(first) == _findings(second)
    assert _reaped(children)


def test_a_child_is_reaped_here_when_no_thread_can_be_started(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    def no_thread(self: forking.Reaper) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(forking, "gone", lambda pid: False)
    monkeypatch.setattr(forking.Reaper, "start", no_thread)
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS, keep_records=False)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO, keep_records=False)
    assert _findings(forked) == _findings(serial)
    assert _reaped(children, within=0)  # waited for in gather


def _findings(ev: pipeline.Evidence) -> tuple[Any, ...]:
    return [f.model_dump_json() for f in ev.findings], ev.files, ev.formats, ev.symptoms


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the child gave the fabric extractors' findings, each time they were asked for."""
    seen: list[bool] = []
    real = forking.ForkSecond.lane_result

    def spy(self: forking.ForkSecond) -> Any:
        got = real(self)
        seen.append(got is not None)
        return got

    monkeypatch.setattr(forking.ForkSecond, "lane_result", spy)
    return seen


def test_triage_leaves_the_fabric_tables_and_their_extractors_to_the_child(tmp_path: Path, spill_root: Path,
                                                                           answered: list[bool],
                                                                           children: list[int]) -> None:
    """Without records to return, the counter dumps and topology stay in the child, which runs the fabric
    extractors on them: the findings are those of one process."""
    bundle = _bundle(tmp_path, 12)
    serial = pipeline.gather([bundle], limits=LIMITS, keep_records=False)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO, keep_records=False)
    assert answered == [True]  # the child ran the fabric extractors
    assert _findings(forked) == _findings(serial)
    assert any(f.kind == "port_counter_errors" for f in forked.findings)
    assert forked.second_core_peak_mib > 0
    assert list(spill_root.iterdir()) == []
    assert _reaped(children)


@pytest.mark.parametrize("how", ["dies", "fails"])
def test_a_child_that_cannot_run_the_fabric_extractors_loses_nothing(tmp_path: Path, spill_root: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     children: list[int], how: str) -> None:
    """The child parsed the dumps and kept their records, then died (or its extractors could not run): they are
    parsed again here and the fabric extractors run here."""
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS, keep_records=False)

    def dies(*a: Any) -> None:
        os._exit(5)

    if how == "dies":
        monkeypatch.setattr(forking, "serve_lane", dies)
    failing = TWO if how == "dies" else replace(TWO, stages=Stages(build_frames=_fails_in_child(build_frames)))
    forked = pipeline.gather([bundle], limits=LIMITS, executor=failing, keep_records=False)
    assert _findings(forked) == _findings(serial)
    assert _reaped(children)


def _fails_in_child(real: Any) -> Any:
    parent = os.getpid()

    def build(records: Any) -> Any:
        if os.getpid() != parent:
            raise RuntimeError("no frames")
        return real(records)

    return build


def test_fabric_rows_that_change_after_the_child_built_its_frames_are_not_lost(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, answered: list[bool],
        children: list[int]) -> None:
    """The child builds its frames early from what this process said it had; if what arrives differs (rows parsed
    again here after a lost result), the child refuses and the fabric extractors run here on everything."""
    bundle = _bundle(tmp_path, 6)
    serial = pipeline.gather([bundle], limits=LIMITS, keep_records=False)
    real = forking.ForkSecond.parsed
    monkeypatch.setattr(forking.ForkSecond, "parsed", lambda self, tables: real(self, {"FabricPortState"}))
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO, keep_records=False)
    assert answered == [False]  # the child said no
    assert _findings(forked) == _findings(serial)
    assert _reaped(children)


def test_an_error_here_stops_the_child_and_leaves_nothing(tmp_path: Path, spill_root: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          children: list[int]) -> None:
    bundle = _bundle(tmp_path, 6)

    parent = os.getpid()

    def broken(records: Any) -> Any:
        if os.getpid() == parent:
            raise KeyboardInterrupt  # an interrupt while the child waits to run the fabric extractors
        return build_frames(records)

    with pytest.raises(KeyboardInterrupt):
        pipeline.gather([bundle], limits=LIMITS, executor=replace(TWO, stages=Stages(build_frames=broken)),
                        keep_records=False)
    assert _reaped(children)
    assert list(spill_root.iterdir()) == []


@pytest.fixture
def forked_with(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The files each child was forked with (copied when forked)."""
    got: list[list[Any]] = []
    real = forking.ForkSecond.start.__func__  # type: ignore[attr-defined]

    def start(cls: type, files: list[Any], *a: Any, **k: Any) -> Any:
        got.append([(bf.path, bf.text is not None, bf.stream is not None) for bf in files])
        return real(cls, files, *a, **k)

    monkeypatch.setattr(forking.ForkSecond, "start", classmethod(start))
    return got


def test_the_child_starts_before_the_small_files_are_read(tmp_path: Path, spill_root: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          forked_with: list[list[Any]]) -> None:
    """The child is forked once the bundle is listed and its large files' heads read: the small files it is later
    handed reach it with the batch, and the result is that of one process."""
    bundle = _bundle(tmp_path, 40)
    serial = pipeline.gather([bundle], limits=LIMITS)
    sent, handing = _handing(monkeypatch)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=handing)
    assert _result(forked) == _result(serial)
    (listed,) = forked_with  # forked once
    assert [p for p, _t, _s in listed] == [f.path for f in serial.files]
    assert {p for p, text, stream in listed if text} == {p for p, text, stream in listed if stream}  # only those
    assert any(p.endswith("ibstat.txt") for p, _t, _s in listed) and len(sent) >= 8
    assert list(spill_root.iterdir()) == []


def test_a_bundle_that_lists_otherwise_when_read_forks_again(tmp_path: Path, spill_root: Path,
                                                             forked_with: list[list[Any]],
                                                             children: list[int]) -> None:
    """An archive known only by its bytes (a tar named .txt) adds its members once read: the first child, forked
    with the listing, is stopped and another forked with the files as read."""
    import io
    import tarfile

    bundle = _bundle(tmp_path, 4)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = (DATA / "ibstat").glob("*.txt").__next__().read_bytes()
        info = tarfile.TarInfo("gpu-y001/ibstat.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (bundle / "notes.txt").write_bytes(buf.getvalue())
    serial = pipeline.gather([bundle], limits=LIMITS)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=TWO)
    assert any(f.path == "notes.txt/gpu-y001/ibstat.txt" for f in forked.files)
    assert _result(forked) == _result(serial)
    assert len(forked_with) == 2
    assert "notes.txt" in [p for p, _t, _s in forked_with[0]]  # the listing, before the archive was opened
    assert [p for p, _t, _s in forked_with[1]] == [f.path for f in serial.files]
    assert _reaped(children) and len(children) == 2
    assert list(spill_root.iterdir()) == []


def test_a_bundle_that_cannot_be_read_stops_the_child_forked_for_it(tmp_path: Path, spill_root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    children: list[int]) -> None:
    from diagnose.bundle import BundleError

    bundle = _bundle(tmp_path, 2)

    def unreadable(*a: Any, **k: Any) -> Any:
        raise BundleError("no readable file in the input")

    with pytest.raises(BundleError):
        pipeline.gather([bundle], limits=LIMITS, executor=replace(TWO, stages=Stages(load=unreadable)))
    assert _reaped(children) and len(children) == 1
    assert list(spill_root.iterdir()) == []


@pytest.fixture
def early_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file where the child notes each build of its fabric frames: 'early' (before this process said which
    fabric tables it has rows of) or 'told'."""
    notes = tmp_path / "builds"
    real = forking.Ready.build.__func__  # type: ignore[attr-defined]

    def build(cls: type, kept: Any, theirs: Any, prune: bool = True, **k: Any) -> Any:
        with notes.open("a") as fh:
            fh.write(("told" if prune else "early") + "\n")
        return real(cls, kept, theirs, prune, **k)

    monkeypatch.setattr(forking.Ready, "build", classmethod(build))
    return notes


@pytest.mark.parametrize("counter_rows_here", [False, True])
def test_frames_the_child_builds_early_are_used_only_if_this_process_has_no_rows_of_them(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, answered: list[bool],
        early_builds: Path, children: list[int], counter_rows_here: bool) -> None:
    """Idle after the dumps, the child builds its frames and counter table as if this process had no fabric rows;
    when this process has counter rows of its own (a small perfquery capture), they are built again with them."""
    bundle = _bundle(tmp_path, 30)
    if counter_rows_here:
        shutil.copy(DATA / "perfquery/perfquery_x_extended_0x7cfe9003003b4bde_hca.out", bundle / "gpu-z000/pq.out")
    serial = pipeline.gather([bundle], limits=LIMITS, keep_records=False)
    monkeypatch.setattr(forking.ForkSecond, "claim", _child_first)
    # this process is still busy when the child has parsed the dumps; no small files for the child: it stays idle
    busy = replace(TWO, stages=_slowed_here(0.01), hand_over=10_000)
    forked = pipeline.gather([bundle], limits=LIMITS, executor=busy, keep_records=False)
    assert _findings(forked) == _findings(serial)
    assert answered == [True]
    assert early_builds.read_text().split() == (["early", "told"] if counter_rows_here else ["early"])
    if counter_rows_here:
        assert any(f.path.endswith("pq.out") and f.format == "perfquery" for f in forked.files)
    assert _reaped(children)


def test_a_dump_truncated_while_the_child_maps_it_kills_the_child_not_the_triage(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    """The child maps the dumps it parses; a dump cut short under the map (a capture rewritten meanwhile) kills it
    with SIGBUS. This process then parses what the file holds by reading it, and the run goes on."""
    import gzip

    bundle = _bundle(tmp_path, 4)
    for packed in sorted((bundle / "fabric").glob("perfquery_*.txt.gz")):  # plain files: those are mapped
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    untouched = pipeline.gather([bundle], limits=LIMITS)
    dump = bundle / "fabric/perfquery_2.txt"
    parent = os.getpid()
    real_bulk = parse.run_bulk
    here: list[str] = []

    loaded = tmp_path / "loaded"

    def load(*a: Any, **k: Any) -> Any:  # (only this process loads: the child was forked before)
        got = parse.load(*a, **k)
        loaded.touch()
        return got

    def cut_first(mod: Any, data: Any, bf: Any, *a: Any) -> Any:
        if os.getpid() != parent and bf.path == "fabric/perfquery_2.txt":
            import faulthandler

            faulthandler.disable()  # the child is meant to die of SIGBUS: pytest's handler would dump its stack
            while not loaded.exists():  # once this process has read the bundle (else it reads the cut file)
                time.sleep(0.01)
            dump.write_bytes(dump.read_bytes()[:4096])  # truncated in place: the pages past 4 KiB leave the map
        return real_bulk(mod, data, bf, *a)

    def spy_here(bf: Any, *a: Any, **k: Any) -> None:
        if os.getpid() == parent:
            here.append(bf.path)
        parse.parse_file(bf, *a, **k)

    monkeypatch.setattr(parse, "run_bulk", cut_first)  # (a step inside the parse stage: no seam of its own)
    monkeypatch.setattr(forking.ForkSecond, "claim", _child_first)  # the dumps are the child's
    cutting = replace(TWO, stages=Stages(load=load, parse_file=spy_here))
    forked = pipeline.gather([bundle], limits=LIMITS, executor=cutting)
    assert dump.stat().st_size == 4096
    assert "fabric/perfquery_2.txt" in here  # the child died on it: parsed again here, from what is left
    entry = next(f for f in forked.files if f.path == "fabric/perfquery_2.txt")
    assert entry.format == "perfquery" and 0 < entry.records < next(
        f.records for f in untouched.files if f.path == entry.path)
    assert [f for f in forked.files if f.path != entry.path] == [f for f in untouched.files if f.path != entry.path]
    assert _reaped(children)
    assert list(spill_root.iterdir()) == []


def test_the_collector_is_paused_while_both_processes_parse_and_runs_for_the_extractors(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    """gather pauses the cyclic collector from loading to the frozen frames, in this process and in the child it
    forks (which inherits the pause), and each runs its extractors with it on again; it is on after the run.
    The child alone parses without transparent huge pages (diagnose.memtune): this process keeps its own."""
    seen = tmp_path / "seen"
    real_parse, real_run = parse.parse_file, run_some
    thp = memtune.thp_allowed()

    def note(what: str) -> None:
        with open(seen, "a") as fh:
            fh.write(f"{what} {os.getpid()} {gc.isenabled()} {memtune.thp_allowed()}\n")

    def parsing(*a: Any, **k: Any) -> Any:
        note("parse")
        return real_parse(*a, **k)

    def run(*a: Any, **k: Any) -> Any:
        note("extract")
        return real_run(*a, **k)

    assert gc.isenabled()
    noting = replace(TWO, stages=Stages(parse_file=parsing, run_some=run))
    pipeline.gather([_bundle(tmp_path, 6)], limits=LIMITS, executor=noting, keep_records=False)
    assert gc.isenabled()
    assert memtune.thp_allowed() is thp
    rows = [line.split() for line in seen.read_text().splitlines()]
    assert {(what, on) for what, _, on, _ in rows} == {("parse", "False"), ("extract", "True")}
    assert len({pid for what, pid, _, _ in rows if what == "extract"}) == 2  # here and in the child
    assert len({pid for what, pid, _, _ in rows if what == "parse"}) == 2
    assert {allowed for _, pid, _, allowed in rows if pid != str(os.getpid())} == {"False" if thp is not None else "None"}
    assert {allowed for _, pid, _, allowed in rows if pid == str(os.getpid())} == {str(thp)}
    assert _reaped(children)


def test_a_collector_paused_by_the_caller_stays_paused_in_both_processes_and_a_failed_gather_leaves_it_on(
        tmp_path: Path, spill_root: Path, monkeypatch: pytest.MonkeyPatch, children: list[int]) -> None:
    seen = tmp_path / "seen"
    def run(*a: Any, **k: Any) -> Any:
        with open(seen, "a") as fh:
            fh.write(f"{os.getpid()} {gc.isenabled()}\n")
        return run_some(*a, **k)

    bundle = _bundle(tmp_path, 6)
    gc.disable()
    try:
        pipeline.gather([bundle], limits=LIMITS, executor=replace(TWO, stages=Stages(run_some=run)), keep_records=False)
        assert not gc.isenabled()
    finally:
        gc.enable()
    rows = [line.split() for line in seen.read_text().splitlines()]
    assert len({pid for pid, _ in rows}) == 2 and {on for _, on in rows} == {"False"}  # here and in the child
    assert _reaped(children)
    with pytest.raises(BundleError):
        pipeline.gather([tmp_path / "missing"], limits=LIMITS, executor=TWO)
    assert gc.isenabled()

