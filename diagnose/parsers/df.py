"""``df`` / ``df -h`` / ``df -k`` / ``df -P`` / ``df -T`` / ``df /dev/shm`` (GNU coreutils): filesystem usage.

Shapes::

    Filesystem                     Size  Used Avail Use% Mounted on
    tmpfs                         1008G  253M 1008G   1% /dev/shm

    Filesystem     1K-blocks    Used Available Use% Mounted on
    /dev/sda2       17813504 2127172  15686332  12% /

    Filesystem     1024-blocks    Used Available Capacity Mounted on        (df -P)

Older coreutils wrap a long filesystem name onto its own line (never with ``-P``)::

    /dev/mapper/VolGroup-lv_root
                           19G  1.6G   16G   9% /

Sizes become bytes: ``N-blocks`` columns are multiplied by the block size in the header (``1K``/``1024`` = 1024,
``512``, ``1M`` = 1024^2, ``2MB`` = 2x10^6); ``-h`` values use powers of 1024 (``K M G T P E``; a lowercase ``k``,
as printed by ``--si``, is 1000). ``-h`` rounds up, so those byte counts are approximate. ``-`` (pseudo
filesystems) becomes None. A wrapped row is cited at its filesystem-name line, and its ``text`` is the two lines
joined by one space. ``df -i`` (inodes) tables are not this format and are ignored. ``df: ...`` error lines
become :class:`~diagnose.parsers._ib.ToolError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import command_line, iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "df"


@dataclass(frozen=True, slots=True, kw_only=True)
class Filesystem(Record):
    """One ``df`` row."""

    filesystem: str
    size_bytes: int | None
    used_bytes: int | None
    avail_bytes: int | None
    use_pct: int | None
    mount: str


_HDR_RE = re.compile(
    r"^\s*Filesystem\s+(?P<type>Type\s+)?(?P<size>Size|\d*[KkMGTPEZY]?B?-blocks)\s+Used\s+(?:Avail|Available)"
    r"\s+(?:Use%|Capacity)\s+Mounted\s+on\s*$"
)
_BLOCKS_RE = re.compile(r"^(?P<n>\d*)(?P<unit>[KkMGTPEZY]?)(?P<si>B?)-blocks$")
_HUMAN_RE = re.compile(r"^(?P<num>\d+(?:[.,]\d+)?)(?P<unit>[BKkMGTPEZY]?)(?:i?B)?$")
_PCT_RE = re.compile(r"^(?:(?P<pct>\d+)%|-)$")
_ERR_RE = re.compile(r"^\s*(?:/[\w/.-]*/)?df:\s.*$")
_POWERS = {"": 0, "B": 0, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6, "Z": 7, "Y": 8}

_SNIFF_HDR = re.compile(
    r"^[ \t]*Filesystem[ \t]+(?:Type[ \t]+)?(?:Size|\d*[KkMGTPEZY]?B?-blocks)[ \t]+Used[ \t]+(?:Avail|Available)"
    r"[ \t]+(?:Use%|Capacity)[ \t]+Mounted on[ \t]*$",
    re.MULTILINE,
)
_SNIFF_ROW = re.compile(
    r"^\S+[ \t]+(?:\S+[ \t]+)?\S+[ \t]+\S+[ \t]+\S+[ \t]+(?:\d+%|-)[ \t]+\S", re.MULTILINE
)


def sniff(head: str) -> int:
    if not _SNIFF_HDR.search(head):
        return 0
    return 95 if _SNIFF_ROW.search(head) else 60


class _Table:
    def __init__(self, human: bool, factor: int, typed: bool) -> None:
        self.human = human
        self.factor = factor
        self.typed = typed

    @property
    def ncols(self) -> int:  # columns after the filesystem name, before the mount point
        return 5 if self.typed else 4

    def to_bytes(self, value: str) -> tuple[bool, int | None]:
        """(ok, bytes); ``-`` is ok with None."""
        if value == "-":
            return True, None
        if not self.human:
            if value.isdigit():
                return True, int(value) * self.factor
            return False, None
        m = _HUMAN_RE.match(value)
        if not m:
            return False, None
        num = float(m.group("num").replace(",", "."))
        unit = m.group("unit")
        base = 1000 if unit == "k" else 1024
        return True, round(num * base ** _POWERS[unit])


def _table_for(m: re.Match[str]) -> _Table | None:
    size = m.group("size")
    if size == "Size":
        return _Table(human=True, factor=1, typed=bool(m.group("type")))
    bm = _BLOCKS_RE.match(size)
    if not bm:
        return None
    n = int(bm.group("n") or "1")
    base = 1000 if bm.group("si") else 1024
    return _Table(human=False, factor=n * base ** _POWERS[bm.group("unit")], typed=bool(m.group("type")))


def _row(
    table: _Table, fs: str, rest: str
) -> tuple[int | None, int | None, int | None, int | None, str] | None:
    """Parse the columns after the filesystem name; None when they do not fit."""
    parts = rest.split(None, table.ncols)
    if len(parts) != table.ncols + 1:
        return None
    if table.typed:
        parts = parts[1:]
    size, used, avail, pct, mount = parts
    vals = [table.to_bytes(v) for v in (size, used, avail)]
    pm = _PCT_RE.match(pct)
    if not all(ok for ok, _ in vals) or pm is None:
        return None
    use_pct = int(pm.group("pct")) if pm.group("pct") else None
    return vals[0][1], vals[1][1], vals[2][1], use_pct, mount.strip()


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    table: _Table | None = None
    pending: tuple[int, str] | None = None  # (line, filesystem name) of a wrapped row
    last_bad: tuple[int, str, int] | None = None  # (line, filesystem, index of its problem)

    def emit(
        n: int, raw: str, fs: str, row: tuple[int | None, int | None, int | None, int | None, str]
    ) -> None:
        size, used, avail, pct, mount = row
        records.append(
            Filesystem(
                source=source,
                line=n,
                text=clip(raw),
                host=cur_host,
                filesystem=fs,
                size_bytes=size,
                used_bytes=used,
                avail_bytes=avail,
                use_pct=pct,
                mount=mount,
            )
        )

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        last_bad = None
        if _ERR_RE.match(line):
            records.append(
                ToolError(
                    source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=line.strip()
                )
            )
            continue
        m = _HDR_RE.match(line)
        if m:
            if pending is not None:
                problems.append(f"line {pending[0]}: row for {pending[1]} has no values")
                pending = None
            table = _table_for(m)
            continue
        p = prompt(line)
        if p is not None or command_line(line, ("df",)) is not None:
            if pending is not None:
                problems.append(f"line {pending[0]}: row for {pending[1]} has no values")
            table, pending = None, None
            if p is not None and p[0]:
                cur_host = p[0]
            continue
        if table is None:
            continue
        if pending is not None and line[:1].isspace():
            row = _row(table, pending[1], line.strip())
            pn, pfs = pending
            pending = None
            if row is not None:
                emit(pn, f"{pfs} {line.strip()}", pfs, row)
            else:
                last_bad = (n, pfs, len(problems))
                problems.append(f"line {n}: unparseable df row for {pfs}: {line.strip()!r}")
            continue
        if pending is not None:
            problems.append(f"line {pending[0]}: row for {pending[1]} has no values")
            pending = None
        fields = line.split(None, 1)
        if len(fields) == 1:
            pending = (n, fields[0])  # long name wrapped onto its own line
            continue
        row = _row(table, fields[0], fields[1])
        if row is None:
            last_bad = (n, fields[0], len(problems))
            problems.append(f"line {n}: unparseable df row: {line.strip()!r}")
            continue
        emit(n, line, fields[0], row)
    if pending is not None:
        problems.append(f"truncated: row for {pending[1]} ends early (line {pending[0]}: no values)")
    elif last_bad is not None:  # the damaged row is the last one: a cut capture, not a stray line
        problems[last_bad[2]] = f"truncated: row for {last_bad[1]} ends early (line {last_bad[0]})"
