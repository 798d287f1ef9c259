"""A corpus of hostile and odd inputs, built on demand (nothing of it is shipped): compression bombs, special files,
links and loops, deep folders, corrupt gzip, binary and NUL-laden text, odd names, absurd numbers.

:func:`build` writes every case under a folder, at full size (what ``diagnose bench hostile`` measures: the
bombs expand to GBs) or scaled down (what the tests run, with :data:`SMALL_LIMITS`, so that a few MB exercise the
same limits as GBs at the defaults). Each :class:`Case` names the paths to give ``diagnose triage`` and what its
``files`` table must then say.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

NCCL = "gpu-a01:1:1 [0] NCCL INFO NET/IB : No device found.\n"


@dataclass(frozen=True)
class Scale:
    """How large the cases are: a bomb's members and how many, the one long line, the folder nesting."""

    member_bytes: int  # a log-like bomb member (compresses ~30:1, under the ratio limit), uncompressed
    members: int  # of those, per archive
    zeros_bytes: int  # a member of one repeated line (~300:1), uncompressed
    zeros: int  # of those, per archive
    line_bytes: int  # the file of one long line
    gzip_bytes: int  # the gzip bomb's uncompressed size
    depth: int  # nested folders
    streamed: int  # a file past the streaming threshold (16 MiB by default; SMALL_LIMITS: 1 MiB)


FULL = Scale(member_bytes=15 << 20, members=100, zeros_bytes=64 << 20, zeros=40, line_bytes=256 << 20,
             gzip_bytes=4 << 30, depth=2500, streamed=20 << 20)
SMALL = Scale(member_bytes=256 << 10, members=24, zeros_bytes=1 << 20, zeros=4, line_bytes=3 << 20,
              gzip_bytes=16 << 20, depth=120, streamed=3 << 19)
# LoadLimits for SMALL: each limit the bombs hit at FULL with the defaults, hit at a 64th of the size
SMALL_LIMITS = dict(max_file_bytes=1 << 20, max_line_chars=16 * 1024, stream_bytes=1 << 20, chunk_bytes=256 << 10,
                    head_bytes=64 << 10, max_archive_bytes=4 << 20, ratio_floor_bytes=512 << 10,
                    max_total_bytes=4 << 20, max_archive_members=64, max_record_bytes=8 << 20)


@dataclass
class Case:
    name: str
    paths: list[str]
    says: list[str] = field(default_factory=list)  # what the files table or the one error line must contain
    usage_error: bool = False  # exit 2 with one line, as the only input is refused


def _log_block(n: int) -> bytes:
    """``n`` bytes of NCCL log lines that differ a little (they compress ~30:1, as real logs do)."""
    line = "gpu-a01:2210:2210 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC seq {}\n"
    unit = "".join(line.format(i) for i in range(20_000)).encode()
    return (unit * (n // len(unit) + 1))[:n]


def _zeros_block(n: int) -> bytes:
    unit = NCCL.encode() * 1000
    return (unit * (n // len(unit) + 1))[:n]


def _zip_bomb(path: Path, s: Scale) -> None:
    log, zeros = _log_block(s.member_bytes), _zeros_block(s.zeros_bytes)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("nccl.log", NCCL)
        for i in range(s.zeros):
            zf.writestr(f"zeros/{i:03d}.log", zeros)
        for i in range(s.members):
            zf.writestr(f"logs/rank{i:03d}.log", log)


def _tar_bomb(path: Path, s: Scale, logs: bool = True) -> None:
    """A .tar.gz of the zeros-like members, and the log-like ones (``logs``)."""
    log, zeros = _log_block(s.member_bytes), _zeros_block(s.zeros_bytes)
    with tarfile.open(path, "w:gz", compresslevel=6) as tf:
        for name, data in [("nccl.log", NCCL.encode())] + [(f"zeros/{i:03d}.log", zeros) for i in range(s.zeros)] \
                + [(f"logs/rank{i:03d}.log", log) for i in range(s.members if logs else 0)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _gzip_stream(path: Path, n: int, block: bytes) -> None:
    with gzip.open(path, "wb", compresslevel=6) as fh:
        for _ in range(n // len(block)):
            fh.write(block)
        fh.write(block[: n % len(block)])


def _nccl_tests_with(value: str) -> str:
    return ("#  Rank  0 Group  0 Pid   2210 on     node021 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
            "#  Rank  1 Group  0 Pid   2211 on     node022 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n"
            f"   134217728      33554432     float     sum      -1   1040.6  128.98  {value}      0   1041.2  128.91"
            "  112.79      0\n")


_PERFQUERY = """# Port extended counters: Lid 12 port 1 (CapMask: 0x5A00)
PortSelect:......................1
CounterSelect:...................0x0000
PortXmitData:....................{big}
PortRcvData:.....................18446744073709551615
PortXmitPkts:....................inf
PortRcvPkts:.....................-1
SymbolErrorCounter:..............99999999999999999999999999999999999999
LinkDownedCounter:...............nan
"""


def build(root: Path, scale: Scale = SMALL) -> list[Case]:
    """Write every case under ``root`` (an empty folder); the cases, in a fixed order."""
    root.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = []

    def case(name: str, says: list[str], usage_error: bool = False, paths: list[str] | None = None
             ) -> Callable[[Callable[[Path], None]], None]:
        def make(fn: Callable[[Path], None]) -> None:
            d = root / name
            d.mkdir()
            fn(d)
            cases.append(Case(name, paths if paths is not None else [str(d)], says, usage_error))
        return make

    ratio = "compression ratio"

    @case("zip_bomb", [ratio, "archive expands beyond"])
    def _(d: Path) -> None:
        _zip_bomb(d / "bomb.zip", scale)

    @case("tar_gz_bomb", ["expands more than 100:1", "read budget"])
    def _(d: Path) -> None:
        # first (by name) one stopped by its ratio; then one of log-like members, under 100:1 as a whole, stopped by
        # the input's read budget (or the archive's, whichever is the lower)
        _tar_bomb(d / "a-zeros.tar.gz", scale, logs=False)
        _tar_bomb(d / "bomb.tar.gz", scale)

    @case("folder_of_three_bombs", [ratio, "read budget"])
    def _(d: Path) -> None:
        _zip_bomb(d / "a.zip", scale)
        for name in ("b.zip", "c.zip"):
            os.link(d / "a.zip", d / name)  # (the same bytes three times)

    @case("gzip_bomb", ["only its first part was read"])
    def _(d: Path) -> None:
        _gzip_stream(d / "nccl.log.gz", scale.gzip_bytes, _zeros_block(1 << 20))
        (d / "small.txt.gz").write_bytes(gzip.compress(b"\0" * (scale.gzip_bytes // 64)))

    @case("dense_logs", ["record budget"])
    def _(d: Path) -> None:
        # logs whose every line is a record, under the read budget as text, past the record budget once parsed
        (d / "a-first.log").write_text(NCCL)
        block = _log_block(scale.member_bytes)
        for i in range(12):
            (d / f"rank{i:02d}.log").write_bytes(block)

    @case("dense_streamed_log", ["record budget"])
    def _(d: Path) -> None:
        # one such log streamed from disk (past the streaming size): never held as text, stopped mid-file
        (d / "a-first.log").write_text(NCCL)
        block = _log_block(scale.member_bytes)
        with open(d / "job.log", "wb") as fh:
            for _ in range(12):
                fh.write(block)

    cases.append(Case("dev_zero", ["/dev/zero"], ["running system's /dev"], usage_error=True))

    @case("fifo_by_path", ["a FIFO"], usage_error=True, paths=[str(root / "fifo_by_path" / "pipe")])
    def _(d: Path) -> None:
        os.mkfifo(d / "pipe")

    @case("fifo_symlink_in_bundle", ["symlink to a FIFO, not followed", "a FIFO, not read"])
    def _(d: Path) -> None:
        (d / "nccl.log").write_text(NCCL)
        os.mkfifo(d / "pipe")
        (d / "link").symlink_to(d / "pipe")

    @case("symlinks_and_loops", ["loops", "outside the bundle", "symlink to a folder"])
    def _(d: Path) -> None:
        (d / "sub").mkdir()
        (d / "nccl.log").write_text(NCCL)
        (d / "in").symlink_to("nccl.log")
        (d / "loop1").symlink_to("loop2")
        (d / "loop2").symlink_to("loop1")
        (d / "self").symlink_to("self")
        (d / "out").symlink_to("/etc/hostname")
        (d / "up").symlink_to("..")
        (d / "dirlink").symlink_to("sub")
        (d / "dangling").symlink_to("nothing-here")

    @case("nested_folders", ["nested deeper than 64"])
    def _(d: Path) -> None:
        (d / "nccl.log").write_text(NCCL)
        here = os.open(d, os.O_RDONLY)
        try:  # one level at a time, relative to the last (the whole path passes PATH_MAX)
            for _ in range(scale.depth):
                os.mkdir("d", dir_fd=here)
                nxt = os.open("d", os.O_RDONLY, dir_fd=here)
                os.close(here)
                here = nxt
            fd = os.open("f.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here)
            os.write(fd, NCCL.encode())
            os.close(fd)
        finally:
            os.close(here)

    @case("truncated_gzip", ["truncated or corrupt gzip"])
    def _(d: Path) -> None:
        g = gzip.compress(_log_block(scale.member_bytes))
        (d / "nccl.log.gz").write_bytes(g[: len(g) // 2])
        (d / "empty.gz").write_bytes(g[:10])

    @case("flipped_byte_gzip", ["truncated or corrupt gzip"])
    def _(d: Path) -> None:
        g = bytearray(gzip.compress(_log_block(scale.member_bytes)))
        g[len(g) // 2] ^= 0xFF
        (d / "nccl.log.gz").write_bytes(bytes(g))
        (d / "big.log.gz").write_bytes(bytes(g) + gzip.compress(_log_block(scale.streamed)))

    @case("binary_files", ["binary file, not read"])
    def _(d: Path) -> None:
        rnd = random.Random(3)
        (d / "random.bin").write_bytes(rnd.randbytes(1 << 16))
        (d / "big.bin").write_bytes(rnd.randbytes(scale.streamed))
        (d / "nccl.log").write_text(NCCL)

    @case("huge_single_line", ["longer than"])
    def _(d: Path) -> None:
        with open(d / "line.log", "wb") as fh:
            block = b"x" * (1 << 20)
            for _ in range(scale.line_bytes >> 20):
                fh.write(block)
            fh.write(b"\n" + NCCL.encode())
        (d / "small.log").write_bytes(NCCL.encode() + b"y" * (200 << 10) + b"\n")

    @case("invalid_utf8", [])
    def _(d: Path) -> None:
        (d / "nccl.log").write_bytes(NCCL.encode() + b"\xff\xfe\xc3\x28 \xe2\x82 bad \xf0\x28\x8c\x28\n" + NCCL.encode())
        (d / "latin1.log").write_bytes("gpu-a01 h\xf6st \xe9t\xe9\n".encode("latin-1"))

    @case("nuls_mid_text", ["NUL byte(s) removed"])
    def _(d: Path) -> None:
        (d / "nccl.log").write_bytes((NCCL + "\0" * 3000 + NCCL + "a\0b\n").encode())

    @case("odd_names", [])
    def _(d: Path) -> None:
        for name in ("with space.log", "ünïcödé-日本.log", "new\nline.log", "-dash.log", "tab\tname.log", " ", "..."):
            (d / name).write_text(NCCL)
        (d / "sub dir").mkdir()
        (d / "sub dir" / "x\r.log").write_text(NCCL)
        (d / "bad\udcffbyte.log").write_text(NCCL)  # a name that is not UTF-8 (the byte 0xff)

    @case("unreadable_folders", [])
    def _(d: Path) -> None:
        (d / "nccl.log").write_text(NCCL)
        for name, mode in (("locked", 0o000), ("noexec", 0o600)):
            (d / name).mkdir()
            (d / name / "ibstat.txt").write_text("CA 'mlx5_0'\n")
            (d / name).chmod(mode)
        (d / "unreadable.log").write_text(NCCL)
        (d / "unreadable.log").chmod(0)

    @case("inf_and_huge_numbers", [])
    def _(d: Path) -> None:
        (d / "inf.txt").write_text(_nccl_tests_with("inf"))
        (d / "nan.txt").write_text(_nccl_tests_with("nan"))
        (d / "huge.txt").write_text(_nccl_tests_with("1" + "0" * 400))
        (d / "perfquery.txt").write_text(_PERFQUERY.format(big="9" * 5000))
        (d / "ibnetdiscover.txt").write_text(
            'Switch  36 "S-0002c90300000000"   # "leaf1" base port 0 lid 99999999999999999999 lmc 0\n'
            '[1]  "H-0002c90300000001"[1](2c90300000002)   # "gpu-a01 mlx5_0" lid 18446744073709551617 4xNDR\n')

    @case("archive_members", ["unsafe archive path", "archive link or special file", "has more than"])
    def _(d: Path) -> None:
        with tarfile.open(d / "odd.tar", "w") as tf:
            for name, kind in (("../escape.log", tarfile.REGTYPE), ("/abs.log", tarfile.REGTYPE),
                               ("link", tarfile.SYMTYPE), ("dev", tarfile.CHRTYPE), ("fifo", tarfile.FIFOTYPE),
                               ("ok.log", tarfile.REGTYPE)):
                info = tarfile.TarInfo(name)
                info.type = kind
                data = NCCL.encode() if kind == tarfile.REGTYPE else b""
                info.size = len(data)
                if kind == tarfile.SYMTYPE:
                    info.linkname = "/etc/shadow"
                tf.addfile(info, io.BytesIO(data))
        with zipfile.ZipFile(d / "many.zip", "w") as zf:
            for i in range(SMALL_LIMITS["max_archive_members"] * 2 if scale is SMALL else 100_050):
                zf.writestr(f"m{i}.txt", "x\n")
        with zipfile.ZipFile(d / "nested.zip", "w") as zf:
            inner = io.BytesIO()
            with zipfile.ZipFile(inner, "w") as z2:
                z2.writestr("nccl.log", NCCL)
            zf.writestr("inner.zip", inner.getvalue())
            zf.writestr("../../evil.log", NCCL)

    cases.append(Case("long_path", ["x" * 5000], ["cannot read"], usage_error=True))
    cases.append(Case("empty_path", [""], ["empty path"], usage_error=True))
    assert tuple(c.name for c in cases) == NAMES
    return cases


NAMES = ("zip_bomb", "tar_gz_bomb", "folder_of_three_bombs", "gzip_bomb", "dense_logs", "dense_streamed_log", "dev_zero", "fifo_by_path",
         "fifo_symlink_in_bundle", "symlinks_and_loops", "nested_folders", "truncated_gzip", "flipped_byte_gzip",
         "binary_files", "huge_single_line", "invalid_utf8", "nuls_mid_text", "odd_names", "unreadable_folders",
         "inf_and_huge_numbers", "archive_members", "long_path", "empty_path")  # what build() makes, in order


__all__ = ["FULL", "NAMES", "SMALL", "SMALL_LIMITS", "Case", "Scale", "build"]
