"""A collected bundle as lines of text, so it crosses ``srun``, ``ssh``, ``pdsh`` and ``clush`` unchanged.

``diagnose collect --out -`` writes nothing on the host: it prints its files (the manifest among them) as one framed
block on stdout::

    ==diagnose-collect== begin 1 <host>
    H4sIAAAAAAAC/+1d... (base64 of gzip of {"files": {name: text}}, 76 columns)
    ==diagnose-collect== end <bytes> <sha256 of the gzip>

Every line survives the prefixes launchers put before it (``srun --label``'s ``3: ``, pdsh's and clush's
``host: ``), and the end line's length and digest tell a complete block from one cut short by a timeout or a lost
connection. :class:`Receiver` takes the lines back (bounded: a block past :data:`MAX_STREAM` bytes is refused, as is
a file name that is not a plain relative path) and gives the files.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import io
import json
import re
import zlib
from collections.abc import Iterator
from typing import TextIO

BEGIN = "==diagnose-collect== begin"
END = "==diagnose-collect== end"
VERSION = "1"
MAX_STREAM = 256 << 20  # compressed bytes of one host's block
MAX_FILES_BYTES = 1 << 30  # its files, decompressed
_NAME = re.compile(r"^[A-Za-z0-9_][\w.+@,=-]*(?:/[A-Za-z0-9_][\w.+@,=-]*){0,3}$")


class StreamError(ValueError):
    """A block that is cut short, corrupt, too large or names a file outside its folder."""


def encode(files: dict[str, str], host: str) -> Iterator[str]:
    """The lines (without newlines) of one bundle's block."""
    payload = gzip.compress(json.dumps({"files": files}, ensure_ascii=False).encode("utf-8"), compresslevel=6)
    b64 = base64.b64encode(payload).decode("ascii")
    yield f"{BEGIN} {VERSION} {host}"
    for i in range(0, len(b64), 76):
        yield b64[i:i + 76]
    yield f"{END} {len(payload)} {hashlib.sha256(payload).hexdigest()}"


def _gunzip(payload: bytes) -> bytes:
    out = io.BytesIO()
    d = zlib.decompressobj(wbits=31)
    data = payload
    while data:
        out.write(d.decompress(data, 1 << 20))
        if out.tell() > MAX_FILES_BYTES:
            raise StreamError(f"the block's files are over {MAX_FILES_BYTES >> 20} MiB")
        data = d.unconsumed_tail
    return out.getvalue()


def decode(lines: list[str], size: int, digest: str) -> dict[str, str]:
    """The files of a complete block's base64 ``lines``; raises :class:`StreamError`."""
    try:
        payload = base64.b64decode("".join(lines), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise StreamError(f"the block is not base64 ({exc})") from None
    if len(payload) != size or hashlib.sha256(payload).hexdigest() != digest:
        raise StreamError(f"the block is damaged ({len(payload)} of {size} bytes, or its digest differs)")
    try:
        data = json.loads(_gunzip(payload).decode("utf-8", errors="replace"))
    except (zlib.error, EOFError, ValueError) as exc:
        raise StreamError(f"the block does not unpack ({exc})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise StreamError("the block holds no files")
    for name, text in files.items():
        if not isinstance(name, str) or not _NAME.match(name) or ".." in name.split("/") or not isinstance(text, str):
            raise StreamError(f"the block names a file that is not a plain relative path: {str(name)[:80]!r}")
    return files


class Receiver:
    """Takes one host's lines in order (anything before the begin line, such as a login banner, is ignored) and
    holds its files once the block is complete."""

    def __init__(self) -> None:
        self.reported_host: str | None = None
        self.files: dict[str, str] | None = None
        self.error: str | None = None
        self._lines: list[str] | None = None
        self._size = 0

    @property
    def started(self) -> bool:
        return self._lines is not None or self.files is not None

    def feed(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if self.files is not None or self.error is not None:
            return
        if line.startswith(BEGIN):
            parts = line[len(BEGIN):].split()
            if not parts or parts[0] != VERSION:
                self.error = f"a block of another collector version ({' '.join(parts[:1]) or '?'}; this one is {VERSION})"
                return
            self.reported_host = parts[1] if len(parts) > 1 else None
            self._lines, self._size = [], 0
            return
        if self._lines is None:
            return
        if line.startswith(END):
            parts = line[len(END):].split()
            try:
                size, digest = int(parts[0]), parts[1]
                self.files = decode(self._lines, size, digest)
            except (IndexError, ValueError) as exc:  # StreamError is a ValueError
                self.error = str(exc) if isinstance(exc, StreamError) else f"a bad end line {line[:80]!r}"
            self._lines = None
            return
        self._size += len(line)
        if self._size > MAX_STREAM * 4 // 3 + 4:
            self.error = f"the block is over {MAX_STREAM >> 20} MiB"
            self._lines = None
            return
        self._lines.append(line.strip())


def write(files: dict[str, str], host: str, fh: TextIO) -> None:
    """Print one bundle's block to ``fh`` (``collect --out -``)."""
    for line in encode(files, host):
        fh.write(line + "\n")
    fh.flush()
