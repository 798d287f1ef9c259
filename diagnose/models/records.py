"""Typed evidence records produced by the parsers.

Records are frozen, slotted dataclasses rather than pydantic models: a large bundle yields
hundreds of thousands of them and they are built in tight parser loops. Every record carries
the bundle-relative ``source`` path, the 1-based ``line`` it came from and the raw ``text`` of
that line (clipped), so any finding built on it can cite file:line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

TEXT_CLIP = 240


def clip(text: str) -> str:
    """Clip a raw line for storage in a record (evidence is shown, never reparsed)."""
    text = text.rstrip("\r\n")
    return text if len(text) <= TEXT_CLIP else text[: TEXT_CLIP - 1] + "\u2026"


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """Base of every parsed record."""

    source: str
    line: int
    text: str
    host: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as (class, field values) and rebuilt by :func:`positional_maker`: the records the parse child
        sends back are unpickled ~7x faster than through the dataclass's own ``__setstate__`` (one
        ``dataclasses.fields`` call and a keyed ``setattr`` loop per record), which cost this process as much
        time as parsing the files itself."""
        cls = type(self)
        return _remake, (cls, tuple(map(self.__getattribute__, field_names(cls))))


R = TypeVar("R", bound=Record)
_NAMES: dict[type, tuple[str, ...]] = {}
_MAKERS: dict[type, Callable[..., Any]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """The names of a record class's fields, in order (worked out once per class)."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _remake(cls: type[R], values: tuple[Any, ...]) -> R:
    make = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS[cls] = positional_maker(cls)
    return make(*values)  # type: ignore[no-any-return]


def positional_maker(cls: type[R]) -> Callable[..., R]:
    """A constructor of the frozen, slotted record class ``cls`` that takes every field positionally, in field
    order, and stores each value straight into its slot.

    A frozen dataclass's own ``__init__`` steps around the class's blocking ``__setattr__`` with one
    ``object.__setattr__`` call per field, after matching keywords: for the 20 fields of an :class:`IbPort` that
    costs more than reading the port's block, and a 4,096-host bundle has 32,768 ports. The record made is the
    same (same class, same slot values, so equal and hashed alike); only the way in differs. No default is
    applied: every field is passed.
    """
    names = field_names(cls)
    scope: dict[str, object] = {"_new": object.__new__, "_cls": cls}
    scope.update({f"_set_{name}": getattr(cls, name).__set__ for name in names})
    body = "".join(f"    _set_{name}(rec, {name})\n" for name in names)
    exec(f"def make({', '.join(names)}):\n    rec = _new(_cls)\n{body}    return rec\n", scope)
    return scope["make"]  # type: ignore[return-value]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseResult:
    """What a parser returns for one file."""

    format: str
    records: list[Record] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class LineIndex:
    """The raw lines of one bulk file, kept as bytes plus line offsets, so that the text of any line can be
    cited later without building a Python string for each of millions of lines up front."""

    __slots__ = ("data", "starts", "ends", "first_line", "path")

    def __init__(self, data: bytes | None, starts: object, ends: object, first_line: int = 1) -> None:
        self.data = data
        self.starts = starts  # numpy arrays: byte offsets of each line's start and end (exclusive)
        self.ends = ends
        self.first_line = first_line
        self.path: str | None = None

    def detach(self, path: str) -> None:
        """Drop the bytes and read cited lines back from ``path`` (an uncompressed file on disk): a 4,096-host
        counter dump is hundreds of MB, of which a few dozen lines are ever cited."""
        self.path, self.data = path, None

    def text(self, line: int) -> str:
        return self.texts([line])[0]

    def texts(self, lines: list[int]) -> list[str]:
        """The (clipped) text of each of ``lines``, "" for a line outside the file. A detached file is opened once
        and read in offset order: a finding set over a big fabric cites tens of thousands of counter lines, and
        one open per line costs seconds."""
        spans: list[tuple[int, int] | None] = []
        for n in lines:
            i = int(n) - self.first_line
            ok = 0 <= i < len(self.starts)  # type: ignore[arg-type]
            spans.append((int(self.starts[i]), int(self.ends[i])) if ok else None)  # type: ignore[index]
        out = [""] * len(lines)
        if self.data is not None:
            for k, sp in enumerate(spans):
                if sp is not None:
                    out[k] = clip(self.data[sp[0]:sp[1]].decode("utf-8", errors="replace"))
            return out
        if self.path is None:
            return out
        try:
            with open(self.path, "rb") as fh:
                for k, (lo, hi) in sorted(((k, sp) for k, sp in enumerate(spans) if sp is not None),
                                          key=lambda ksp: ksp[1]):
                    fh.seek(lo)
                    out[k] = clip(fh.read(hi - lo).decode("utf-8", errors="replace"))
        except OSError:
            return [""] * len(lines)
        return out


def int64_column(values: list[Any] | np.ndarray) -> np.ndarray | None:
    """``values`` as int64 when they are all Python ints within int64, else None: what pandas infers for such a
    column, without its general check of every value (~5x slower: 38 ms for 200k values), and what it hashes
    ~5x faster than the same ints as objects."""
    if not len(values) or type(values[0]) is not int or set(map(type, values)) != {int}:
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:  # beyond int64
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnBatch(Record):
    """Many rows of one table held as columns (numpy arrays of equal length): what a bulk parser returns
    instead of one record per line. ``build_frames`` turns the batches of one ``table`` into that frame.

    ``line_columns`` name the columns holding 1-based line numbers (shifted when a file is parsed in chunks);
    ``lines`` resolves the text of those lines for evidence.
    """

    table: str
    columns: dict[str, object]
    line_columns: tuple[str, ...] = ()
    lines: LineIndex | None = None

    def shift_lines(self, offset: int) -> None:
        for name in self.line_columns:
            col = self.columns[name]
            col[col > 0] += offset  # type: ignore[index,operator]  # in place; 0 marks "no such line"
        if self.lines is not None:
            self.lines.first_line += offset
