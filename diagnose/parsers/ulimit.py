"""``ulimit -a`` (bash): the shell's resource limits, one record per line.

Shape (bash ``builtins/ulimit.def``)::

    core file size          (blocks, -c) 0
    max locked memory       (kbytes, -l) 64
    open files                      (-n) 1024
    pipe size            (512 bytes, -p) 8

Column padding varies between bash versions (older ones print ``max locked memory (kbytes, -l) unlimited``
with single spaces); both parse. ``unlimited`` gives ``value=None, unlimited=True``. The bare number printed by
``ulimit -l`` alone is not this format (nothing names the limit) and is ignored. ``ulimit: ...`` error lines
become :class:`~diagnose.parsers._ib.ToolError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "ulimit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limit(Record):
    """One ``ulimit -a`` line, e.g. ``max locked memory (kbytes, -l) 64``."""

    name: str
    flag: str | None
    unit: str | None
    value: int | None
    unlimited: bool


_LINE_RE = re.compile(
    r"^\s*(?P<name>[A-Za-z][A-Za-z0-9 ./'-]*?)\s+\((?:(?P<unit>[^(),]*?),\s*)?(?P<flag>-[A-Za-z])\)\s+(?P<val>\S+)\s*$"
)
_PARTIAL_RE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9 ./'-]*?\s+\((?:[^()]*)?(?:\)\s*)?$")
_ERR_RE = re.compile(r"^\s*(?:[\w/.-]+:\s+)?(?:line \d+:\s+)?ulimit:\s.*$")

_SNIFF_LINE = re.compile(
    r"^[ \t]*[A-Za-z][A-Za-z0-9 ./'-]*?[ \t]+\((?:[A-Za-z0-9 ]+,[ \t]*)?-[A-Za-z]\)[ \t]+(?:unlimited|\d+)[ \t]*$",
    re.MULTILINE,
)
_KNOWN = re.compile(
    r"^[ \t]*(?:core file size|data seg size|scheduling priority|file size|pending signals|max locked memory"
    r"|max memory size|open files|pipe size|POSIX message queues|real-time priority|stack size|cpu time"
    r"|max user processes|virtual memory|file locks|real-time non-blocking time)[ \t]",
    re.MULTILINE,
)


def sniff(head: str) -> int:
    hits = len(_SNIFF_LINE.findall(head))
    if hits >= 3:
        return 95
    if hits == 2:
        return 80
    if hits == 1 and _KNOWN.search(head):
        return 50
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    last_partial: tuple[int, str] | None = None
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        last_partial = None
        p = prompt(line)
        if p is not None:
            if p[0]:
                cur_host = p[0]
            continue
        if _ERR_RE.match(line):
            records.append(
                ToolError(
                    source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=line.strip()
                )
            )
            continue
        m = _LINE_RE.match(line)
        if not m:
            if _PARTIAL_RE.match(line):
                last_partial = (n, line.strip())
            continue
        raw = m.group("val")
        unlimited = raw.lower() == "unlimited"
        if not unlimited and not raw.isdigit():
            problems.append(f"line {n}: unparseable limit value {raw!r} for {m.group('name').strip()}")
            continue
        unit = (m.group("unit") or "").strip() or None
        records.append(
            Limit(
                source=source,
                line=n,
                text=clip(line),
                host=cur_host,
                name=" ".join(m.group("name").split()),
                flag=m.group("flag"),
                unit=unit,
                value=None if unlimited else int(raw),
                unlimited=unlimited,
            )
        )
    if last_partial is not None and records:
        problems.append(f"truncated: line {last_partial[0]} ends early: {last_partial[1]!r}")
