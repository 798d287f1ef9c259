"""The record budget of a bundle: how much memory the parsed records of one input may take (``LoadLimits.max_record_bytes``).

The text budget of the loader bounds what is read; it does not bound what parsing makes of it: a log whose every
line is a record (an NCCL channel line, a counter row) costs several times its text once parsed and framed, and a
file streamed from disk is never held as text at all. So the records are counted too, as they are made, by an
estimate of their size (:func:`record_bytes`: deterministic, from their shape, never from the process's memory).

Past the budget the rule is the loader's: files are taken in path order and, once the budget is spent, the file that
spent it and every later one are listed with the limit and not used; the files before them are diagnosed as usual.
When files are parsed by two processes, which file comes first in time is not which comes first in path order, so a
process that passes the budget raises :class:`RecordBudget` and the caller parses again, in one process, in path
order (:class:`Held` ``serial``): the same bundle always leaves out the same files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from diagnose.models.records import ColumnBatch, Record

# What a row costs beyond its columns' pointers or numbers: a list slot, the str header of its line text (CPython's
# compact ASCII string: 41 bytes + its characters) and the frame's copy of each column (measured: the frames of a
# bundle cost about as much again as its records).
_ROW = 16
_STR = 41
_RECORD = 64  # a dataclass record's own header and dict-less slots


class RecordBudget(Exception):  # noqa: N818 - a limit reached, not an error of the input
    """The records parsed so far passed the budget while files were parsed in parallel: parse again, serially."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the records passed the bundle's record budget of {mib(limit)} MiB")
        self.limit = limit


def mib(n: int) -> int:
    return n >> 20


_FIELDS: dict[type, int] = {}


def _fields(cls: type) -> int:
    n = _FIELDS.get(cls)
    if n is None:
        n = _FIELDS[cls] = len(dataclasses.fields(cls))
    return n


def record_bytes(records: Iterable[Record]) -> int:
    """An estimate of the memory ``records`` hold, and their frame rows will: 8 bytes per column of each row (a
    pointer or a number), each row's line text, and a fixed cost per row. The same records always give the same
    estimate (it measures their shape, not the process)."""
    total = 0
    for r in records:
        if isinstance(r, ColumnBatch):
            cols = r.columns
            if not cols:
                continue
            first = cols["line"] if "line" in cols else next(iter(cols.values()))
            n = len(first)  # type: ignore[arg-type]
            total += n * (8 * len(cols) + _ROW)
            text = cols.get("text")
            if isinstance(text, list):
                total += sum(map(len, text)) + _STR * n
        else:
            total += _RECORD + 8 * _fields(r.__class__) + _STR + len(r.text or "")
    return total


class Held:
    """The records this process has parsed from the bundle (their :func:`record_bytes`), against ``limit`` (0: no
    limit). ``serial``: files are parsed one by one in path order, so a file that passes the limit is left out with
    the ones after it (:attr:`spent`); else passing it raises :class:`RecordBudget`."""

    def __init__(self) -> None:
        self.begin(0, serial=True)

    def begin(self, limit: int, serial: bool) -> None:
        self.limit = limit
        self.serial = serial
        self.used = 0
        self.spent = False

    def fits(self, more: int) -> bool:
        return not self.limit or self.used + more <= self.limit

    def charge(self, more: int) -> None:
        self.used += more

    def note(self) -> str:
        return (f"the bundle's record budget ({mib(self.limit)} MiB of parsed records, --max-records-mib) is spent "
                "by this file and those before it: not used")

    def skipped(self) -> str:
        return f"the bundle's record budget ({mib(self.limit)} MiB of parsed records, --max-records-mib) is spent: not read"


held = Held()  # this process's (a forked child inherits a copy, and counts its own)
