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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from diagnose.models.records import ParseResult, Record

SNIFF_THRESHOLD = 40


class ParserModule(Protocol):
    FORMAT: str

    def sniff(self, head: str) -> int: ...

    def parse(self, text: str, source: str, host: str | None = None) -> ParseResult: ...


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
