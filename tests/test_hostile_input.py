"""Hostile and odd input: special files, links, loops, depth, corrupt and compression-bomb archives, absurd numbers.
Every case ends with one clear line or a ``files`` problem, bounded memory and time, and the rest diagnosed."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from diagnose import parsers, pipeline
from diagnose.bundle import BundleError, timelimit
from diagnose.bundle.loader import LoadLimits, load_inputs
from diagnose.bundle.timelimit import TimeLimit
from diagnose.pipeline import triage
from diagnose.stages import parse

NCCL = "gpu-a01:1:1 [0] NCCL INFO NET/IB : No device found.\n"


def _problems(files) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.path: "; ".join(f.problems) for f in files if f.problems}


def test_only_regular_files_are_read_and_links_stay_inside(tmp_path: Path) -> None:
    b = tmp_path / "b"
    (b / "sub").mkdir(parents=True)
    (b / "nccl.log").write_text(NCCL)
    os.mkfifo(b / "pipe")
    (b / "to_pipe").symlink_to(b / "pipe")
    (b / "loop1").symlink_to(b / "loop2")
    (b / "loop2").symlink_to(b / "loop1")
    (b / "out").symlink_to(tmp_path)
    (b / "in").symlink_to(b / "nccl.log")
    (b / "dirlink").symlink_to(b / "sub")
    got = _problems(load_inputs([b]))
    assert got["pipe"] == "a FIFO, not read"
    assert got["to_pipe"] == "symlink to a FIFO, not followed"
    assert "loops" in got["loop1"] and "loops" in got["loop2"]
    assert got["out"] == "symlink pointing outside the bundle, not followed"
    assert got["dirlink"] == "symlink to a folder, not followed"
    assert "in" not in got and "nccl.log" not in got  # a link to a file of the bundle is read
    d = triage([b])
    assert any(c.id == "host.container_rdma_access" or c.id.startswith("nccl.") for c in d.causes)


def test_special_paths_given_by_name_are_refused_with_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    for bad, says in ((tmp_path / "fifo", "a FIFO"), (Path("/dev/zero"), "running system's /dev"),
                      (Path("/proc/self/status"), "running system's /proc"), ("", "empty path")):
        with pytest.raises(BundleError, match=says):
            load_inputs([bad])
    (tmp_path / "nccl.log").write_text(NCCL)  # beside good evidence, the refused path is a files entry
    got = _problems(load_inputs([tmp_path / "nccl.log", "/dev/zero"]))
    assert "not a capture" in got["/dev/zero"]
    with pytest.raises(BundleError, match="cannot read"):
        load_inputs(["x" * 5000])


def test_deep_folders_are_not_entered_and_said_so(tmp_path: Path) -> None:
    d = tmp_path / "b"
    deep = d / "/".join(["d"] * 80)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x\n")
    (d / "nccl.log").write_text(NCCL)
    got = _problems(load_inputs([d]))
    assert any("nested deeper than 64" in v for v in got.values())


def test_a_corrupt_gzip_keeps_what_came_before_and_a_bomb_is_cut(tmp_path: Path) -> None:
    big = (NCCL * 400_000).encode()  # 20 MB of log: decompressed in steps
    g = bytearray(gzip.compress(big))
    g[len(g) // 2] ^= 0xFF
    (tmp_path / "flip.log.gz").write_bytes(bytes(g))
    (tmp_path / "bomb.txt.gz").write_bytes(gzip.compress(b"a" * (200 << 20)))
    files = {f.path: f for f in load_inputs([tmp_path])}
    assert "what came before was read" in files["flip.log.gz"].problems[0] and files["flip.log.gz"].text
    assert "only its first part was read" in "; ".join(files["bomb.txt.gz"].problems)
    assert len(files["bomb.txt.gz"].text or "") <= LoadLimits().max_file_bytes


def test_archive_bombs_are_cut_by_ratio_and_the_budget_bounds_the_rest(tmp_path: Path) -> None:
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("nccl.log", NCCL)
        for i in range(3):
            zf.writestr(f"zeros{i}.txt", b"0" * (40 << 20))
    got = _problems(load_inputs([z]))
    assert all("compression ratio" in got[f"bomb.zip/zeros{i}.txt"] for i in range(3))
    t = tmp_path / "bomb.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        for i in range(3):
            data = b"0" * (40 << 20)
            info = tarfile.TarInfo(f"zeros{i}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    assert any("expands more than 100:1" in v for v in _problems(load_inputs([t])).values())
    # the budget: past it, files are listed, not read
    b = tmp_path / "many"
    b.mkdir()
    for i in range(4):
        (b / f"log{i}.txt").write_text(NCCL * 2000)
    small = LoadLimits(max_total_bytes=200_000)
    got = _problems(load_inputs([b], small))
    assert sum("read budget" in v for v in got.values()) >= 2


def test_absurd_numbers_do_not_stop_the_engine(tmp_path: Path) -> None:
    (tmp_path / "t.log").write_text(
        "#  Rank  0 Group  0 Pid   2210 on     node021 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
        "#  Rank  1 Group  0 Pid   2211 on     node022 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
        "   134217728      33554432     float     sum      -1   1040.6  128.98  inf      0   1041.2  128.91"
        "  112.79      0\n"
        "    67108864      16777216     float     sum      -1   1040.6  128.98  100000000000000000000000      0"
        "   1041.2  128.91  112.79      0\n")
    triage([tmp_path])  # no OverflowError, no durable-rules error 204


def test_a_rule_that_does_not_load_stops_triage_instead_of_dropping_its_cause(tmp_path: Path) -> None:
    import subprocess
    import sys

    pack = tmp_path / "pack"
    (pack / "rules" / "link").mkdir(parents=True)
    (pack / "rules" / "link" / "broken.yaml").write_text("id: site.link.broken\ntitle: [unclosed\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update(DIAGNOSE_RULES=str(pack), HOME=str(tmp_path))
    (tmp_path / "nccl.log").write_text(NCCL)
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "triage", str(tmp_path / "nccl.log")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "rule catalog has" in r.stderr and "broken.yaml" in r.stderr
    assert "Traceback" not in r.stderr


# --- NULs and binary files -----------------------------------------------------------------------------------------

def test_a_text_log_with_nuls_is_read_and_says_so(tmp_path: Path) -> None:
    """A log with a run of NULs (blocks a crash left unwritten) and a stray NUL in its first 8 KiB is text: its
    lines are read, the NULs removed and counted; also when the file is large enough to be streamed."""
    text = NCCL + "\x00" * 4096 + "gpu-a01:1:1 [0] NCCL WARN NET/IB : Got async event : port error\x00\n" + NCCL
    (tmp_path / "nccl.log").write_bytes(text.encode())
    (tmp_path / "big.log").write_bytes((text * 40).encode())
    limits = LoadLimits(stream_bytes=64 * 1024, chunk_bytes=16 * 1024)
    got = {f.path: f for f in pipeline.gather([tmp_path], limits=limits).files}
    for name, nuls in (("nccl.log", 4097), ("big.log", 40 * 4097)):
        assert got[name].format == "nccl_log" and got[name].records >= 3, got[name]
        assert got[name].problem == f"{nuls:,} NUL byte(s) removed: read as text"


def test_binary_files_stay_binary(tmp_path: Path) -> None:
    import pickle
    import random
    import sys

    rnd = random.Random(7)
    (tmp_path / "random.bin").write_bytes(bytes(rnd.randrange(256) for _ in range(20_000)))
    (tmp_path / "dump.pickle").write_bytes(pickle.dumps({"entries": [{"a": i} for i in range(50)]}, protocol=2))
    (tmp_path / "program").write_bytes(Path(sys.executable).resolve().read_bytes()[:65536])
    (tmp_path / "nccl.log").write_text(NCCL)
    got = _problems(load_inputs([tmp_path]))
    assert got == {"random.bin": "binary file, not read", "dump.pickle": "binary file, not read",
                   "program": "binary file, not read"}


# --- the per-file time limit ---------------------------------------------------------------------------------------

BLOCK = "gpu-a01:1:1 [0] NCCL INFO NET/IB : No device found. BLOCK\n"


def _blocking(real):  # type: ignore[no-untyped-def]
    """``real`` (a parser's or sniffer's function of text), except that on a text with BLOCK in it, it never
    returns, and swallows the first stop (as a careless ``except BaseException`` in a parser would)."""
    def fn(text, *a, **k):  # type: ignore[no-untyped-def]
        if "BLOCK" not in text:
            return real(text, *a, **k)
        try:
            while True:
                time.sleep(0.01)
        except TimeLimit:
            pass
        while True:
            time.sleep(0.01)
    return fn


@pytest.fixture
def blocking_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = parsers.by_format("nccl_log")
    monkeypatch.setattr(mod, "parse", _blocking(mod.parse))


def _limited_bundle(tmp_path: Path) -> Path:
    b = tmp_path / "b"
    b.mkdir()
    (b / "a-stuck.log").write_text(BLOCK)
    (b / "b-good.log").write_text(NCCL)
    return b


def _check_limited(ev: pipeline.Evidence) -> None:
    got = {f.path: f for f in ev.files}
    stuck = got["a-stuck.log"]
    assert stuck.records == 0 and stuck.problem == parse.time_limit_note(0.3)
    assert "per-file time limit (0.3 s, --max-file-seconds)" in stuck.problem
    assert got["b-good.log"].records > 0 and got["b-good.log"].problem is None
    assert [f.summary for f in ev.findings if f.kind == "file_problem"] == [f"a-stuck.log: {stuck.problem}"]
    assert any(f.kind.startswith("nccl_ib_no_device") for f in ev.findings)  # the rest is diagnosed


def test_a_parser_past_the_time_limit_is_stopped_and_the_rest_diagnosed(tmp_path: Path, blocking_parser: None
                                                                        ) -> None:
    _check_limited(pipeline.gather([_limited_bundle(tmp_path)], limits=LoadLimits(max_file_seconds=0.3)))


def test_the_time_limit_holds_in_a_thread_too(tmp_path: Path, blocking_parser: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The incident service parses in a worker thread (no signal there): a watchdog stops the parser, and nothing
    is raised into the thread once the file is done."""
    monkeypatch.setattr(timelimit, "_IDLE", 0.05)
    b = _limited_bundle(tmp_path)
    out: list[object] = []

    def work() -> None:
        try:
            out.append(pipeline.gather([b], limits=LoadLimits(max_file_seconds=0.3)))
            for _ in range(3):  # the same thread goes on parsing: no stop left pending for it
                out.append(pipeline.gather([b / "b-good.log"], limits=LoadLimits(max_file_seconds=30)))
        except BaseException as exc:  # noqa: BLE001 - shown by the assertion
            out.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(timeout=120)
    timelimit._Watchdog.wait_idle()  # (it leaves once idle: later tests may fork)
    assert not t.is_alive() and len(out) == 4, out
    assert all(isinstance(e, pipeline.Evidence) for e in out), out
    _check_limited(out[0])  # type: ignore[arg-type]


def test_a_sniffer_past_the_time_limit_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also for a large file, sniffed before the parse to choose the second core's share."""
    mod = parsers.by_format("ibstat")
    monkeypatch.setattr(mod, "sniff", _blocking(mod.sniff))
    b = _limited_bundle(tmp_path)
    (b / "a-stuck.log").write_text(BLOCK * 2000)  # streamed at these limits
    ev = pipeline.gather([b], limits=LoadLimits(max_file_seconds=0.3, stream_bytes=16 * 1024, chunk_bytes=4096))
    _check_limited(ev)


def test_the_forked_child_stops_its_own_parse_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second core's child enforces the limit on what it parses (it is forked with the same limits): its
    Evidence of a stuck bulk dump says so, and this process does not parse it again."""
    from diagnose.runtime import forked
    from diagnose.runtime.spill import SpillDir

    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("no fork or one core")
    mod = parsers.by_format("perfquery")
    stuck = _blocking(mod.parse_bytes_bulk)
    monkeypatch.setattr(mod, "parse_bytes_bulk", lambda data, *a: stuck(
        "BLOCK" if b"BLOCK" in bytes(data[:200]) else data, *a))
    dump = (Path(__file__).parent / "data/perfquery/perfquery_x_extended_0x7cfe9003009ce5b0.out").read_text()
    (tmp_path / "perfquery.out").write_text("# BLOCK\n" + dump * 40)
    limits = LoadLimits(max_file_seconds=0.3, stream_bytes=16 * 1024, chunk_bytes=4096)
    files = load_inputs([tmp_path], limits)
    spill = SpillDir()
    second = forked.ForkSecond.start(files, limits, spill)
    try:
        assert second is not None and second.bulk == [0]
        part = second.result(0)  # this process claimed nothing: the child parsed it
    finally:
        if second is not None:
            second.close(kill=True)
        spill.close()
    assert part is not None and [(f.records, f.problem) for f in part.files] == [(0, parse.time_limit_note(0.3))]


def test_call_limited_returns_raises_and_leaves_nothing_armed() -> None:
    assert timelimit.call_limited(5, lambda x: x * 2, 21) == 42
    with pytest.raises(ValueError):
        timelimit.call_limited(5, int, "x")
    with pytest.raises(TimeLimit):
        timelimit.call_limited(0.2, _blocking(str), "BLOCK")
    with pytest.raises(TimeLimit):  # nested: the outer limit holds
        timelimit.call_limited(0.2, lambda: timelimit.call_limited(1000, _blocking(str), "BLOCK"))
    assert timelimit.call_limited(0, lambda: "unlimited") == "unlimited"
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_max_file_seconds_is_checked_on_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from diagnose.interfaces.cli import app

    (tmp_path / "nccl.log").write_text(NCCL)
    for bad in ("-1", "nan", "inf"):
        r = CliRunner().invoke(app, ["triage", str(tmp_path), "--max-file-seconds", bad])
        assert r.exit_code == 2 and "--max-file-seconds must be 0" in r.output
    r = CliRunner().invoke(app, ["evidence", str(tmp_path), "--max-file-seconds", "0", "--format", "json"])
    assert r.exit_code == 0 and '"nccl_log"' in r.output


# --- folders that cannot be read, and SIGTERM --------------------------------------------------------------------

def test_an_unreadable_subfolder_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from diagnose.bundle import loader

    b = tmp_path / "b"
    (b / "locked" / "inner").mkdir(parents=True)
    (b / "locked" / "inner" / "x.log").write_text(NCCL)
    (b / "nccl.log").write_text(NCCL)
    real = os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]  # as for a folder of mode 000 (tests may run as root)
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(loader.os, "scandir", scandir)
    ev = pipeline.gather([b])
    got = {f.path: f for f in ev.files}
    assert got["locked"].problem == "unreadable folder, not entered" and got["nccl.log"].records > 0
    assert any(f.kind == "file_problem" and "locked" in f.summary for f in ev.findings)


_TERM_SCRIPT = """
import functools, sys, time
import diagnose.interfaces.cli as cli
from diagnose import pipeline
from diagnose.bundle import LoadLimits
from diagnose.runtime import parallel
marker = sys.argv[1]
cli.LoadLimits = functools.partial(LoadLimits, stream_bytes=1024, chunk_bytes=4096)  # the dump counts as large
pipeline.ParallelExecutor = functools.partial(parallel.ParallelExecutor, min_bytes=1)  # and goes to a forked child

def stuck(files, offload, second, *a):  # this process's side of the parse: the child forked, the spill folder made
    open(marker, 'w').close()
    while True:
        time.sleep(0.05)

parallel.parse_forked = stuck
sys.argv = ['diagnose', 'triage', sys.argv[2]]
cli.main()
"""


def test_sigterm_mid_triage_leaves_no_spill_folder(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "nccl.log").write_text(NCCL)
    shutil.copy(Path(__file__).parent / "data/perfquery/perfquery_x_extended_0x7cfe9003009ce5b0.out", bundle / "pq.out")
    marker = tmp_path / "stuck"
    env = {**os.environ, "TMPDIR": str(tmp)}
    p = subprocess.Popen([sys.executable, "-c", _TERM_SCRIPT, str(marker), str(bundle)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # a safety net: the child gets there in a second or two
        while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists() and [d.name[:15] for d in tmp.iterdir()] == ["diagnose-parts-"]
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert list(tmp.iterdir()) == []
