"""Open what the user hands over: folders, .tar/.tar.gz/.tgz/.zip archives, gzip files, single files.

Nothing here interprets content beyond decoding. Every problem with one file (binary, too large,
unreadable, a hostile archive member) becomes a ``problem`` on that file so the run goes on;
only a missing input path or an input with no readable file at all is a :class:`BundleError`.
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
# RFC 1123 labels (no underscore) with a digit: gpu-a017, node03, tpgds-aihub0008
_HOSTLIKE = re.compile(r"^[A-Za-z][A-Za-z0-9\-]*\d[A-Za-z0-9\-]*$")
_NOT_HOSTS = re.compile(r"^(?:positive|negative|healthy|run|job|slurm|rank|log|logs|bundle|incident|case|ticket|mlx5|x86|h100|a100|h200|b200|gb200|v\d)(?:[-_]|\d|$)", re.I)


class BundleError(Exception):
    """An input the run cannot start from (missing path, nothing readable)."""


@dataclass(frozen=True)
class LoadLimits:
    max_file_bytes: int = 64 * 1024 * 1024  # larger non-streamable files: head and tail are read
    max_line_chars: int = 64 * 1024  # longer lines are clipped
    stream_bytes: int = 16 * 1024 * 1024  # larger files on disk are streamed in chunks, never read whole
    chunk_bytes: int = 8 * 1024 * 1024
    head_bytes: int = 256 * 1024  # what sniffing sees of a streamed file
    max_archive_members: int = 100_000
    max_archive_bytes: int = 1024 * 1024 * 1024  # an archive's members, uncompressed, read in all
    # a member (or a .tar.gz as a whole) expanding more than this many times its compressed size, past the floor,
    # is a compression bomb: it is cut there (logs compress 10-40:1; zeros 1000:1)
    max_ratio: int = 100
    ratio_floor_bytes: int = 16 * 1024 * 1024
    # the text held in memory for the whole input (files read whole and archive members; a streamed large file
    # is read chunk by chunk and does not count): past it, further files are listed with a problem, not read
    max_total_bytes: int = 512 * 1024 * 1024
    # the records parsed from the whole input, by their estimated size (see diagnose.budget): past it, the file that
    # passed it and the ones after it in path order are listed with a problem, not used. A 4,096-host bundle's
    # records are ~390 MiB by this estimate; their frames and the extractors' work about double it.
    max_record_bytes: int = 512 * 1024 * 1024
    max_bulk_bytes: int = 2 * 1024 * 1024 * 1024  # bulk counter dumps are read whole up to this size
    # wall time for sniffing and parsing one file (0: no limit): past it the file's records are dropped and it is
    # listed with the limit it hit, the rest of the bundle still diagnosed (see diagnose.bundle.timelimit)
    max_file_seconds: float = 60.0


@dataclass
class BundleFile:
    path: str  # bundle-relative, posix
    text: str | None
    problems: list[str] = field(default_factory=list)
    host_hint: str | None = None
    data: bytes | None = None  # raw bytes of a binary file, for parsers of binary formats (BINARY = True)
    stream: StreamSource | None = None  # set for large files: ``text`` is then only the head
    sniffed: Any = field(default=None, compare=False, repr=False)  # its formats, once asked (stages.parse.sniff)


@dataclass(frozen=True)
class StreamSource:
    """A large file read in chunks: on disk, possibly gzip-compressed."""

    path: Path
    gz: bool
    size: int


def iter_text_chunks(src: StreamSource, limits: LoadLimits, problems: list[str]) -> Iterator[tuple[int, str]]:
    """Yield (first line number, text) chunks that end on a line boundary, decoded and normalised.

    Memory stays bounded by ``chunk_bytes`` plus one line of at most ``max_line_chars``: a longer line
    (a 2 GB line) is cut, the rest of it skipped, and a problem is noted.
    """
    opener = gzip.open if src.gz else open
    line_no = 1
    carry = b""
    skipping = False
    cut = 0
    clipped = 0
    nuls = 0
    try:
        with opener(src.path, "rb") as fh:  # type: ignore[operator]
            while True:
                block = fh.read(limits.chunk_bytes)
                if not block:
                    break
                if skipping:
                    nl = block.find(b"\n")
                    if nl < 0:
                        continue
                    block = block[nl + 1:]
                    skipping = False
                data = carry + block
                last = data.rfind(b"\n")
                if last < 0:
                    if len(data) > limits.max_line_chars:
                        carry = data[: limits.max_line_chars] + b"\n"
                        data, carry = carry, b""
                        skipping, cut = True, cut + 1
                        last = len(data) - 1
                    else:
                        carry = data
                        continue
                else:
                    carry = data[last + 1:]
                    if len(carry) > limits.max_line_chars:
                        carry, skipping, cut = carry[: limits.max_line_chars] + b"\n", True, cut + 1
                text, n, z = _decode_clipped(memoryview(data)[: last + 1], limits)  # (a view: no copy of the chunk)
                clipped += n
                nuls += z
                yield line_no, text
                line_no += text.count("\n")
    except (OSError, EOFError, zlib.error) as exc:  # truncated or corrupt (a flipped byte in a gzip member)
        problems.append(f"read stopped early: {one_line(exc)}")
    if carry:
        text, n, z = _decode_clipped(carry, limits)
        clipped += n
        nuls += z
        yield line_no, text
    if clipped:  # lines longer than the limit inside a chunk, clipped as in a file read whole
        problems.append(_clipped_note(clipped, limits))
    if nuls:
        problems.append(_nul_note(nuls))
    if cut:
        problems.append(f"{cut} line(s) longer than {limits.max_line_chars} characters were cut")


def read_whole(src: StreamSource, limits: LoadLimits, mapped: bool = False) -> bytes | mmap.mmap | None:
    """All of a large file's bytes, for the columnar parsers of bulk dumps (a counter block must stay with its
    header, so they are not cut into chunks); None when the file is larger than ``max_bulk_bytes``.

    ``mapped``: a plain file is mapped instead of read (its pages are the page cache's: no copy, half the page
    faults, ~0.15 s of a 200 MB dump). Only for a process that may die: a file truncated while mapped kills
    the process that reads it (SIGBUS), so only the forked parse child maps, and its files are parsed again here
    if it dies. Close the map when done (or drop it)."""
    if not src.gz and src.size > limits.max_bulk_bytes:
        return None
    if not src.gz and mapped and src.size > 0:
        try:
            with open(src.path, "rb") as fh:
                m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            pass  # read it instead
        else:
            if len(m) <= limits.max_bulk_bytes:
                return m
            m.close()
            return None
    if not src.gz:
        # one read into one buffer of the file's size: read in blocks and joined, the bytes were copied and their
        # pages touched twice (~0.15 s of a 200 MB dump, most of it page faults)
        with open(src.path, "rb", buffering=0) as raw:
            data = raw.read(limits.max_bulk_bytes + 1)  # (a file grown since it was listed: no more than that)
        return data if len(data) <= limits.max_bulk_bytes else None
    parts: list[bytes] = []
    total = 0
    with gzip.open(src.path, "rb") as fh:
        while True:
            block = fh.read(limits.chunk_bytes)
            if not block:
                break
            total += len(block)
            if total > limits.max_bulk_bytes:
                return None
            parts.append(block)
    return b"".join(parts)


def tail_text(path: Path, chars: int) -> str:
    """The last lines of a plain file, about ``chars`` bytes of them, from the first whole line ("" if unreadable)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - chars))
            data = fh.read(chars)
    except OSError:
        return ""
    if size > chars:  # the first line read is a part of one: dropped (and all of it, when it is one long line)
        nl = data.find(b"\n")
        data = data[nl + 1:] if nl >= 0 else b""
    return str(data, "utf-8", errors="replace").replace("\r\n", "\n")


def read_capped(src: StreamSource, limits: LoadLimits) -> tuple[str, list[str]]:
    """The head and tail of a large file, for formats that cannot be parsed in chunks."""
    problems: list[str] = []
    half = limits.max_file_bytes // 2
    if src.gz:
        head = b""
        tail = b""
        total = 0
        with gzip.open(src.path, "rb") as fh:
            head = fh.read(half)
            total = len(head)
            while True:
                block = fh.read(limits.chunk_bytes)
                if not block:
                    break
                total += len(block)
                tail = (tail + block)[-half:]
        data = head + tail
    else:
        total = src.size
        with src.path.open("rb") as fh:
            head = fh.read(half)
            fh.seek(max(half, src.size - half))
            data = head + fh.read(half)
    if total > len(data):  # a file within the cap was read whole: nothing to say
        problems.append(f"file is {total / 1048576:.0f} MiB: only the first and last {half // 1048576} MiB were read")
    return _decode(data, limits, problems), problems


_HOST_STEM = re.compile(r"^([A-Za-z][A-Za-z0-9\-]*\d)[_.](?:ibstat|ibstatus|dmesg|perfquery|ibv_devinfo|df|ulimit|env|lspci)")


def _host_hint(rel: str) -> str | None:
    """A per-host folder (``node017/ibstat.out``) or file stem (``node017.dmesg``) names the host (``rel``: a
    bundle-relative posix path)."""
    *folders, name = [p for p in rel.split("/") if p and p != "."] or [""]
    for part in reversed(folders):
        if _HOSTLIKE.match(part) and not _NOT_HOSTS.match(part):
            return part
    m = _HOST_STEM.match(name)
    return m.group(1) if m else None


_SYSFS = re.compile(
    r"^(?P<root>(?:.*/)?)(?P<dev>[A-Za-z][\w.\-]*)/(?P<rest>ports/\d+/(?:counters|hw_counters)/[\w.\-]+"
    r"|ports/\d+/(?:state|phys_state|rate|link_layer|lid|sm_lid|lid_mask_count|cap_mask|gids/\d+"
    r"|gid_attrs/types/\d+|gid_attrs/ndevs/\d+)"
    r"|fw_ver|board_id|hca_type|node_guid|node_desc|sys_image_guid|hw_rev|node_type)$"
)
SYSFS_SUFFIX = " (sysfs tree)"


def _fold_sysfs(files: list[BundleFile]) -> list[BundleFile]:
    """A captured copy of /sys/class/infiniband (one value per file) becomes one virtual file per tree,
    in the form ``grep -r . /sys/class/infiniband`` prints: ``/sys/class/infiniband/<dev>/<attr>:<value>``."""
    trees: dict[str, list[tuple[str, str, BundleFile]]] = {}
    for bf in files:
        m = _SYSFS.match(bf.path)
        if m and bf.text is not None and len(bf.text) < 512 and "\n" not in bf.text.strip():
            trees.setdefault(m["root"], []).append((m["dev"], m["rest"], bf))
    folded: set[int] = set()
    out: list[BundleFile] = []
    for root, items in sorted(trees.items()):
        if len(items) < 3:
            continue
        lines = [f"/sys/class/infiniband/{dev}/{rest}:{bf.text.strip()}" for dev, rest, bf in sorted(
            items, key=lambda t: (t[0], t[1])) if bf.text is not None]
        folded.update(id(bf) for _, _, bf in items)
        name = (root.rstrip("/") or "sysfs") + SYSFS_SUFFIX
        out.append(BundleFile(name, "\n".join(lines) + "\n", [], _host_hint(root + "x")))
    return [bf for bf in files if id(bf) not in folded] + out


# printable ASCII, the usual control characters of text, and every non-ASCII byte (UTF-8): what is left of a sample
# once these are deleted are its binary-looking bytes
_TEXTISH = bytes(range(32, 127)) + b"\n\r\t\b\f\x1b" + bytes(range(128, 256))


_NUL_RUN = re.compile(rb"\x00{2,}")


def _looks_binary(sample: bytes) -> bool:
    """Whether the first 8 KiB of a file are a binary format's, by the share of their control bytes (over 30%), a
    pickle's opening bytes, or NULs in what is not clean text: a text log with a few NULs (a run of them where a
    crash left blocks unwritten counts once) is text, whose NULs :func:`_decode_clipped` removes; random or
    compressed bytes (one NUL in 256, a tenth of control bytes, mostly invalid UTF-8) are not."""
    if not sample:
        return False
    chunk = sample[:8192]
    if len(chunk) >= 2 and chunk[0] == 0x80 and 2 <= chunk[1] <= 5:  # a pickle (a flight-recorder dump)
        return True
    if b"\x00" in chunk:
        chunk = _NUL_RUN.sub(b"\x00", chunk)
        nontext = len(chunk.translate(None, _TEXTISH))
        if nontext / len(chunk) > 0.02:
            return True
        undecodable = str(chunk, "utf-8", errors="replace").count("\ufffd")
        return undecodable / len(chunk) > 0.02
    nontext = len(chunk.translate(None, _TEXTISH))
    return nontext / max(1, len(chunk)) > 0.30


def _longest_line(data: bytes | memoryview) -> int:
    """The length in bytes of the longest line of ``data``: at least its length in characters, as decoded (UTF-8
    takes one or more bytes per character, an undecodable byte becomes one character) and with its line ends
    normalised (which only shortens lines; escape codes, whose removal can join lines, are not covered). One
    numpy pass instead of a string per line: an 8 MB chunk of a large log split into lines to measure them cost
    four times its decoding (~18 ms a chunk)."""
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    if not len(ends):
        return len(data)
    inner = int(np.diff(ends).max()) - 1 if len(ends) > 1 else 0
    return max(int(ends[0]), inner, len(data) - int(ends[-1]) - 1)


def _decode(data: bytes | memoryview, limits: LoadLimits, problems: list[str]) -> str:
    text, clipped, nuls = _decode_clipped(data, limits)
    if clipped:
        problems.append(_clipped_note(clipped, limits))
    if nuls:
        problems.append(_nul_note(nuls))
    return text


def _nul_note(nuls: int) -> str:
    return f"{nuls:,} NUL byte(s) removed: read as text"


def _clipped_note(clipped: int, limits: LoadLimits) -> str:
    return f"{clipped} line(s) longer than {limits.max_line_chars} characters were clipped"


def _decode_clipped(data: bytes | memoryview, limits: LoadLimits) -> tuple[str, int, int]:
    """The text of ``data`` (UTF-8, undecodable bytes replaced; line ends normalised, escape codes and NULs
    removed), every line cut to ``limits.max_line_chars``, how many lines were cut and how many NULs removed."""
    text = str(data, "utf-8", errors="replace")
    nuls = 0
    if "\x00" in text:  # (text with a few NULs: see _looks_binary)
        nuls = text.count("\x00")
        text = text.replace("\x00", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    escaped = "\x1b" in text  # (an OSC sequence may run over a line end and join two lines: measured whole)
    if escaped:
        text = ANSI_RE.sub("", text)
    if len(text) > limits.max_line_chars and (escaped or _longest_line(data) > limits.max_line_chars):
        lines = text.split("\n")
        clipped = 0
        for i, ln in enumerate(lines):
            if len(ln) > limits.max_line_chars:
                lines[i] = ln[: limits.max_line_chars]
                clipped += 1
        if clipped:
            return "\n".join(lines), clipped, nuls
    return text, 0, nuls


def _gunzip_capped(data: bytes, cap: int) -> tuple[bytes, str | None]:
    """A gzip file's bytes, at most ``cap`` of them, and a note when not all was read: decompressed in steps, so a
    member that expands a thousandfold costs ``cap`` bytes of memory, not its full size, and a corrupt or truncated
    stream keeps what came before the damage."""
    out: list[bytes] = []
    total = 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
            while total <= cap:
                block = fh.read(min(8 << 20, cap + 1 - total))
                if not block:
                    return b"".join(out), None
                out.append(block)
                total += len(block)
    except (OSError, EOFError, zlib.error) as exc:
        if not out:
            raise
        return b"".join(out), f"truncated or corrupt gzip after {total:,} bytes ({one_line(exc)}): what came before was read"
    return b"".join(out)[:cap], (f"gzip member decompresses to more than {cap // 1048576} MiB: only its first part"
                                 " was read")


def _from_bytes(rel: str, data: bytes, limits: LoadLimits, total_size: int | None = None) -> BundleFile:
    problems: list[str] = []
    if data[:2] == b"\x1f\x8b" and not rel.endswith((".tar.gz", ".tgz")):
        try:
            data, note = _gunzip_capped(data, limits.max_file_bytes)  # never more than the cap (a gzip bomb)
        except (OSError, EOFError, zlib.error) as exc:
            return BundleFile(rel, None, [f"truncated or corrupt gzip ({one_line(exc)})"], _host_hint(rel))
        if note:
            problems.append(note)
    if _looks_binary(data[:8192]):
        return BundleFile(rel, None, ["binary file, not read"], _host_hint(rel), data=data)
    text = _decode(data, limits, problems)
    if total_size is not None and total_size > limits.max_file_bytes:
        mib = limits.max_file_bytes // (2 * 1024 * 1024)
        problems.append(
            f"file is {total_size / 1048576:.0f} MiB: only the first and last {mib} MiB were read"
        )
    return BundleFile(rel, text, problems, _host_hint(rel))


def _read_file(p: str | Path, rel: str, limits: LoadLimits) -> BundleFile | str:
    """One file on disk as a BundleFile, or the kind of archive it is by its magic bytes ("tar" / "zip"): the
    file is opened once either way."""
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read forever, a device never end
            return BundleFile(rel, None, [f"not a regular file ({_kind_of(st.st_mode)}), not read"], _host_hint(rel))
        size = st.st_size
        if size > limits.stream_bytes:
            with open(p, "rb") as fh:
                magic = fh.read(_MAGIC_BYTES)
            kind = _archive_magic(magic)
            if kind:
                return kind
            gz = magic[:2] == b"\x1f\x8b"
            opener = gzip.open if gz else open
            with opener(p, "rb") as fh:  # type: ignore[operator]
                head = fh.read(limits.head_bytes)
                # a binary format (a flight-recorder pickle) is only read from all of its bytes: read on, whole, as
                # a file below the streaming size is, up to the cap on files read whole
                data = head + fh.read(limits.max_file_bytes + 1 - len(head)) if _looks_binary(head[:8192]) else None
            if data is not None:
                if len(data) > limits.max_file_bytes:
                    return BundleFile(rel, None, [f"binary file larger than {limits.max_file_bytes // 1048576} MiB, "
                                                  "not read"], _host_hint(rel))
                return _from_bytes(rel, data, limits)
            head = head[: head.rfind(b"\n") + 1] or head
            return BundleFile(rel, _decode(head, limits, []), [], _host_hint(rel),
                              stream=StreamSource(Path(p), gz, size))
        with open(p, "rb") as fh:
            if size > limits.max_file_bytes:
                kind = _archive_magic(fh.read(_MAGIC_BYTES))
                if kind:
                    return kind
                half = limits.max_file_bytes // 2
                fh.seek(0)
                head = fh.read(half)
                fh.seek(size - half)
                tail = fh.read(half)
                head = head[: head.rfind(b"\n") + 1] or head
                nl = tail.find(b"\n")
                tail = tail[nl + 1:] if nl >= 0 else tail
                return _from_bytes(rel, head + tail, limits, total_size=size)
            data = fh.read()
    except OSError as exc:
        return BundleFile(rel, None, [f"unreadable: {exc.strerror or exc}"], _host_hint(rel))
    return _archive_magic(data[:_MAGIC_BYTES]) or _from_bytes(rel, data, limits)


def _safe_member(name: str) -> str | None:
    p = PurePosixPath(name.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return str(p)


def _iter_tar(path: str | Path, prefix: str, limits: LoadLimits) -> Iterator[BundleFile]:
    total = 0
    try:
        packed = max(os.stat(path).st_size, 1)
    except OSError:
        packed = 1
    try:
        with tarfile.open(path, "r:*") as tf:
            members = 0
            for m in tf:
                members += 1
                if members > limits.max_archive_members:
                    yield BundleFile(prefix, None, [f"archive has more than {limits.max_archive_members} members; rest skipped"])
                    return
                safe = _safe_member(m.name)
                rel = f"{prefix}/{safe}" if safe else f"{prefix}/{m.name}"
                if m.isdir():
                    continue
                if safe is None:
                    yield BundleFile(rel, None, ["unsafe archive path (absolute or '..'), not extracted"])
                    continue
                if m.issym() or m.islnk() or not m.isfile():
                    yield BundleFile(rel, None, ["archive link or special file, not followed"])
                    continue
                total += m.size
                if total > limits.max_archive_bytes:
                    yield BundleFile(rel, None, [f"archive expands beyond {limits.max_archive_bytes >> 20} MiB; rest"
                                                 " skipped"])
                    return
                if total > limits.ratio_floor_bytes and total / packed > limits.max_ratio:
                    yield BundleFile(rel, None, [f"archive expands more than {limits.max_ratio}:1 (a compression"
                                                 " bomb?); rest skipped"])
                    return
                fh = tf.extractfile(m)
                if fh is None:
                    continue
                if m.size > limits.max_file_bytes:
                    half = limits.max_file_bytes // 2
                    head = fh.read(half)
                    fh.seek(m.size - half)
                    data = head + fh.read(half)
                    yield _from_bytes(rel, data, limits, total_size=m.size)
                else:
                    yield _from_bytes(rel, fh.read(), limits)
    except (tarfile.TarError, OSError, EOFError) as exc:
        yield BundleFile(prefix, None, [f"archive could not be read completely: {one_line(exc)}"])


def _iter_zip(path: str | Path, prefix: str, limits: LoadLimits) -> Iterator[BundleFile]:
    total = 0
    try:
        with zipfile.ZipFile(path) as zf:
            for i, info in enumerate(zf.infolist()):
                if i >= limits.max_archive_members:
                    yield BundleFile(prefix, None, [f"archive has more than {limits.max_archive_members} members; rest skipped"])
                    return
                if info.is_dir():
                    continue
                safe = _safe_member(info.filename)
                rel = f"{prefix}/{safe or info.filename}"
                if safe is None:
                    yield BundleFile(rel, None, ["unsafe archive path (absolute or '..'), not extracted"])
                    continue
                ratio = info.file_size / max(info.compress_size, 1)
                if info.file_size > limits.ratio_floor_bytes and ratio > limits.max_ratio:
                    yield BundleFile(rel, None, [f"compression ratio {ratio:,.0f}:1 beyond the {limits.max_ratio}:1"
                                                 " limit (a compression bomb?), not read"])
                    continue  # (costs nothing: a zip's members are read apart, and this one is not)
                total += info.file_size
                if total > limits.max_archive_bytes:
                    yield BundleFile(rel, None, [f"archive expands beyond {limits.max_archive_bytes >> 20} MiB; rest"
                                                 " skipped"])
                    return
                with zf.open(info) as fh:
                    data = fh.read(limits.max_file_bytes + 1)
                if len(data) > limits.max_file_bytes:
                    yield _from_bytes(rel, data[: limits.max_file_bytes], limits, total_size=info.file_size)
                else:
                    yield _from_bytes(rel, data, limits)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        yield BundleFile(prefix, None, [f"archive could not be read completely: {one_line(exc)}"])


_MAGIC_BYTES = 262  # enough for a tar header's "ustar" at offset 257


def _archive_by_name(name: str) -> str | None:
    name = name.lower()
    if name.endswith((".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".tbz2", ".txz")):
        return "tar"
    if name.endswith(".zip"):
        return "zip"
    return None


def _archive_magic(magic: bytes) -> str | None:
    if magic[:4] == b"PK\x03\x04":
        return "zip"
    if len(magic) > 261 and magic[257:262] == b"ustar":
        return "tar"
    return None


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _load_file(p: str | Path, rel: str, limits: LoadLimits) -> Iterable[BundleFile]:
    """A file of the input: the members of an archive (known by its name or its magic bytes), else the file."""
    kind = _archive_by_name(os.path.basename(p))
    if kind is None:
        read = _read_file(p, rel, limits)
        if isinstance(read, BundleFile):
            return (read,)
        kind = read
    return _iter_tar(p, rel, limits) if kind == "tar" else _iter_zip(p, rel, limits)


def _walk(root: Path) -> list[tuple[str, str, bool]]:
    """Every file and every symlink under ``root`` as (posix path relative to root, path, is a symlink), sorted
    by path components: what ``sorted(f for f in root.rglob("*") if f.is_file() or f.is_symlink())`` lists, from
    one ``scandir`` per folder whose entries know their own type (no stat per file, no Path per entry).
    Symlinked folders are not entered; an unreadable folder is skipped."""
    found: list[tuple[list[str], str, bool]] = []
    folders = [(str(root), "", 0)]  # a stack, not a recursive closure (a reference cycle, left to the collector)
    while folders:
        folder, prefix, depth = folders.pop()
        if depth > MAX_FOLDER_DEPTH:
            found.append(((prefix.rstrip("/") or ".").split("/"), folder, False))  # reported by load_inputs
            continue
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:  # unreadable (permissions), or a path the system cannot open (too long)
            if prefix:
                found.append((prefix.rstrip("/").split("/"), folder, False))  # reported by load_inputs
            continue
        for e in entries:
            rel = prefix + e.name
            try:
                if e.is_dir(follow_symlinks=False):
                    folders.append((e.path, rel + "/", depth + 1))
                elif e.is_symlink():
                    found.append((rel.split("/"), e.path, True))
                else:  # a regular file, or a FIFO, socket or device: load_inputs says which
                    found.append((rel.split("/"), e.path, False))
            except OSError:
                found.append((rel.split("/"), e.path, False))
    found.sort(key=lambda t: t[0])
    return [("/".join(parts), path, link) for parts, path, link in found]


_NOT_EVIDENCE = ("expect.yaml", "README.md")  # a fixture bundle's own metadata, at its top
MAX_FOLDER_DEPTH = 64  # folders nested deeper are not entered (a real bundle is a few levels deep)
# given by path, these are the running system's, not evidence: /dev/zero never ends, /proc and /sys change as read
_LIVE_ROOTS = ("/dev", "/proc", "/sys")


def _given(raw: str | os.PathLike[str]) -> Path | str:
    """A path the user gave, or why it is not read (a one-line reason: ``path: why``)."""
    text = os.fspath(raw)
    if not str(text).strip():
        return "'': an empty path names nothing (the working directory is not read unless given as '.')"
    p = Path(text)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise BundleError(f"no such file or folder: {_short(str(text))}") from None
    except OSError as exc:  # a name too long, a symlink loop, no permission
        raise BundleError(f"cannot read {_short(str(text))}: {exc.strerror or exc}") from None
    try:
        real = p.resolve()
    except (OSError, RuntimeError):
        real = p
    if any(str(real) == r or str(real).startswith(r + "/") for r in _LIVE_ROOTS):
        return f"{_short(str(text))}: the running system's /{str(real).split('/')[1]}, not a capture of it, not read"
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return f"{_short(str(text))}: {_kind_of(st.st_mode)}, not a file or folder of evidence, not read"
    return p


def _short(text: str, n: int = 120) -> str:
    text = printable(text)
    return text if len(text) <= n else text[: n // 2] + "..." + text[-n // 2:]


def one_line(what: object) -> str:
    """``str(what)`` on one line (tarfile's and some parsers' messages run over several): its lines joined."""
    text = str(what)
    if "\n" not in text and "\r" not in text:
        return text
    return "; ".join(ln.strip(" -\t") for ln in text.splitlines() if ln.strip(" -\t"))


def printable(name: str) -> str:
    """``name`` as it is shown: control characters (a newline, an escape sequence) and bytes that are not UTF-8
    (decoded as surrogates) written as escapes (``\\n``, ``\\x1b``, ``\\udcff``), so that a file name is one line,
    cannot drive the terminal, and can be written out as UTF-8."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _not_readable(name: str, link: bool, root: Path) -> str | None:
    """Why a file found in a bundle folder is not read (None: it is): a special file, an unreadable or too deep
    folder, a symlink that leaves the bundle, loops or points at something that is not a regular file."""
    if link:
        try:
            target = Path(name).resolve(strict=True)
            target.relative_to(root.resolve())
        except ValueError:
            return "symlink pointing outside the bundle, not followed"
        except (OSError, RuntimeError):  # missing target, or a loop (RuntimeError before Python 3.13)
            return "symlink that loops or points at nothing, not followed"
        try:
            mode = target.stat().st_mode
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        return None if stat.S_ISREG(mode) else f"symlink to {_kind_of(mode)}, not followed"
    try:
        mode = os.lstat(name).st_mode
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return (f"folder nested deeper than {MAX_FOLDER_DEPTH} levels, not entered"
                if name.count(os.sep) - str(root).count(os.sep) > MAX_FOLDER_DEPTH else "unreadable folder, not entered")
    return None if stat.S_ISREG(mode) else f"{_kind_of(mode)}, not read"


class _Manifests:
    """The hosts ``diagnose collect`` recorded: a folder with its ``manifest.json`` is that host's, whatever its
    name (no guessing from folder names); the manifest itself is no evidence."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, str | None] = {}

    def _host(self, folder: str) -> str | None:
        if folder not in self.cache:
            from diagnose.collect import manifest_host

            self.cache[folder] = manifest_host(self.root / folder)  # a regular file inside the bundle only
        return self.cache[folder]

    def is_manifest(self, rel: str) -> bool:
        folder, _, name = rel.rpartition("/")
        if name != "manifest.json":
            return False
        from diagnose.collect import is_manifest  # a host's, the fabric's (no host) or a job's (its hosts' outcomes)

        return self._host(folder) is not None or is_manifest(self.root / folder)

    def failures(self, rel: str) -> list[BundleFile]:
        """What the job manifest ``rel`` records as not collected, one entry per host, each with its problem."""
        from diagnose.collect import job_failures

        folder = rel.rpartition("/")[0]
        prefix = f"{folder}/" if folder else ""
        return [BundleFile(f"{prefix}{where}/", None, [problem], host) for where, host, problem in
                job_failures(self.root / folder)]

    def host_of(self, rel: str) -> str | None:
        parts = rel.split("/")[:-1]
        for i in range(len(parts), -1, -1):
            host = self._host("/".join(parts[:i]))
            if host:
                return host
        return None


class _Budget:
    """The text held in memory for the whole input: past ``cap`` bytes, no further file or archive member is read
    (each is listed with the limit it hit), so memory stays bounded whatever the bundle holds."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0

    def add(self, out: list[BundleFile], files: Iterable[BundleFile], rel: str) -> None:
        if self.used > self.cap:
            out.append(BundleFile(rel, None, [self._note()], _host_hint(rel)))
            return
        it = iter(files)
        for bf in it:
            out.append(bf)
            if bf.stream is None:
                self.used += len(bf.text or "") + len(bf.data or b"")
            if self.used > self.cap:
                close = getattr(it, "close", None)
                if close is not None:
                    close()  # an archive: its other members are not read
                    out.append(BundleFile(rel, None, [self._note() + "; the rest of this archive skipped"]))
                return

    def _note(self) -> str:
        return f"the input's read budget ({self.cap >> 20} MiB of text in memory) is spent: not read"


def load_inputs(paths: Sequence[str | os.PathLike[str]], limits: LoadLimits | None = None) -> list[BundleFile]:
    """Load every input into BundleFiles, sorted by path (deterministic)."""
    limits = limits or LoadLimits()
    out: list[BundleFile] = []
    if not paths:
        raise BundleError("no input given: pass a bundle folder, an archive or files")
    refused: list[str] = []
    budget = _Budget(limits.max_total_bytes)
    for raw in paths:
        p = _given(raw)
        if isinstance(p, str):
            refused.append(p)
            continue
        if p.is_dir():
            hosts = _Manifests(p)
            for rel, name, link in _walk(p):
                if rel in _NOT_EVIDENCE or hosts.is_manifest(rel):
                    out.extend(hosts.failures(rel) if rel not in _NOT_EVIDENCE else [])
                    continue
                problem = _not_readable(name, link, p)
                if problem:
                    out.append(BundleFile(rel, None, [problem], _host_hint(rel)))
                    continue
                before = len(out)
                budget.add(out, _load_file(name, rel, limits), rel)
                host = hosts.host_of(rel)
                if host:
                    for bf in out[before:]:
                        bf.host_hint = host
        else:
            budget.add(out, _load_file(p, p.name, limits), p.name)
    if refused and not out:
        raise BundleError("; ".join(refused))
    for r in refused:
        out.append(BundleFile(r.split(":", 1)[0], None, [r.split(": ", 1)[-1]]))
    if not out:
        raise BundleError("no readable file in the input: " + ", ".join(_short(str(p)) for p in paths))
    for bf in out:
        bf.path = printable(bf.path)
    return _in_order(_fold_sysfs(out))


def _in_order(files: list[BundleFile]) -> list[BundleFile]:
    """``files`` sorted by path, a name given twice from different folders made distinguishable (``name#2``)."""
    files.sort(key=lambda b: b.path)
    seen: dict[str, int] = {}
    for b in files:
        n = seen.get(b.path, 0)
        seen[b.path] = n + 1
        if n:
            b.path = f"{b.path}#{n + 1}"
    return files


def preview_inputs(paths: Sequence[str | os.PathLike[str]], limits: LoadLimits) -> list[BundleFile] | None:
    """What :func:`load_inputs` will return, as far as the list of files and the large ones go, without reading
    the others: the same paths in the same order, each large (streamed) file as ``load_inputs`` gives it (its
    head read, its stream source), every other one a placeholder without text. None when the list cannot be
    known without reading the files: an archive by its name (its members), a captured sysfs tree (folded into one
    file), a symlink, a path that does not exist. An archive known only by its magic bytes, or a file changed in
    between, shows only in the list ``load_inputs`` then gives: compare the two."""
    listed: list[tuple[str, str]] = []
    for raw in paths:
        p = Path(raw)
        try:
            st = p.stat() if os.fspath(raw).strip() else None
        except OSError:  # missing, a name too long, a loop: load_inputs says which
            return None
        if st is None:  # '' (refused by load_inputs): not the working directory
            return None
        if stat.S_ISDIR(st.st_mode):
            for rel, f, link in _walk(p):
                if link:
                    return None
                if rel not in _NOT_EVIDENCE:
                    listed.append((rel, f))
        elif stat.S_ISREG(st.st_mode):
            listed.append((p.name, str(p)))
        else:
            return None
    out: list[BundleFile] = []
    for rel, f in listed:
        if _archive_by_name(rel.rsplit("/", 1)[-1]) or _SYSFS.match(rel):
            return None
        try:
            size = os.stat(f).st_size
        except OSError:
            size = 0
        if size > limits.stream_bytes:
            read = _read_file(Path(f), rel, limits)
            if not isinstance(read, BundleFile):
                return None  # an archive by its magic bytes
            read.path = printable(read.path)
            out.append(read)
        else:
            out.append(BundleFile(printable(rel), None))
    return _in_order(out) if out else None


