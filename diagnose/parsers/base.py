"""The parser contract.

A parser module exposes three names and no I/O:

``FORMAT``
    the format id it produces (``"ibstat"``, ``"nccl_log"``...), shown in ``files[].format``.
``sniff(head: str) -> int``
    0..100, how sure it is that ``head`` (the first 64 KiB of a file, decoded, ANSI codes removed,
    CRLF normalised) is its format. Content only: file names are a hint the bundle layer adds.
    A parser must answer 0 for formats that are not its own (property-tested).
``parse(text: str, source: str, host: str | None = None) -> ParseResult``
    turn the whole text into typed records, each stamped with ``source`` and a 1-based line.
    It never raises on any text; damage (truncation, an unparseable block) goes to
    ``ParseResult.problems``. ``host`` is the bundle's hint (a per-host folder) for formats
    that do not name their host.

Optional capabilities, module constants read once through :func:`capabilities` (nothing else asks the module):

``BINARY = True``
    the format is binary: ``sniff_bytes(data) -> int`` and ``parse_bytes(data, source, host) -> ParseResult``
    replace ``sniff``/``parse`` (a file that does not decode is offered to these parsers only).
``STREAMABLE = True``
    any chunk of the file that ends on a line boundary parses alike: a large file (or archive member) is parsed
    chunk by chunk, memory bounded by the chunk size, and the line numbers shifted.
``MIXABLE = True``
    a line log that real captures interleave with other output: it may claim a file beside another parser.
``parse_bytes_bulk(data, source, host) -> ParseResult``
    a fast path over the whole file's bytes (mapped): large counter dumps and topologies, whose result is a few
    column batches.
``COLUMNS_WHEN_LARGE = True``
    the result of a large file is column batches (cheap to send between processes) though there is no bulk path.
``PARSE_NS_PER_BYTE = <float>``
    the parse's measured cost, for sharing work between processes (see :mod:`diagnose.runtime.plan`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

from diagnose.models.records import ParseResult, Record

SNIFF_THRESHOLD = 40


class ParserModule(Protocol):
    FORMAT: str

    def sniff(self, head: str) -> int: ...

    def parse(self, text: str, source: str, host: str | None = None) -> ParseResult: ...


@dataclass(frozen=True)
class Capabilities:
    """What a parser module can do besides ``sniff`` and ``parse`` (see the module's docstring)."""

    binary: bool = False
    streamable: bool = False
    mixable: bool = False
    bulk: bool = False  # has parse_bytes_bulk
    columns_when_large: bool = False  # bulk, or COLUMNS_WHEN_LARGE
    ns_per_byte: float | None = None


CAPABILITY_NAMES = ("BINARY", "STREAMABLE", "MIXABLE", "COLUMNS_WHEN_LARGE", "PARSE_NS_PER_BYTE", "parse_bytes_bulk")
_CAPS: dict[str, Capabilities] = {}


def capabilities(mod: ModuleType) -> Capabilities:
    """``mod``'s capabilities, read from its constants once."""
    got = _CAPS.get(mod.__name__)
    if got is None:
        bulk = callable(getattr(mod, "parse_bytes_bulk", None))
        rate = getattr(mod, "PARSE_NS_PER_BYTE", None)
        got = _CAPS[mod.__name__] = Capabilities(
            binary=getattr(mod, "BINARY", False) is True, streamable=getattr(mod, "STREAMABLE", False) is True,
            mixable=getattr(mod, "MIXABLE", False) is True, bulk=bulk,
            columns_when_large=bulk or getattr(mod, "COLUMNS_WHEN_LARGE", False) is True,
            ns_per_byte=float(rate) if rate is not None else None)
    return got


def count_matches(pattern: re.Pattern[str], head: str, limit: int = 50) -> int:
    """Count regex matches in ``head`` up to ``limit`` (cheap sniff helper)."""
    n = 0
    for _ in pattern.finditer(head):
        n += 1
        if n >= limit:
            break
    return n


def score_by_hits(hits: int, strong: int = 3) -> int:
    """Map a count of characteristic lines to a sniff score."""
    if hits <= 0:
        return 0
    if hits >= strong:
        return 90
    return 50 + 15 * hits


ParseBody = Callable[[str, str, "str | None", list[Record], list[str]], None]


def guarded_parse(fmt: str, body: ParseBody, text: str, source: str, host: str | None) -> ParseResult:
    """Run a parser's ``body(text, source, host, records, problems)`` so that it never raises: an exception is a
    problem of the result (``parser error: <type>: <message>``) and the records read before it are kept."""
    records: list[Record] = []
    problems: list[str] = []
    try:
        body(text, source, host, records, problems)
    except Exception as exc:  # noqa: BLE001 - a parser reports, never raises
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=fmt, records=records, problems=problems)
