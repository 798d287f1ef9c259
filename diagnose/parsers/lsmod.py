"""``lsmod`` output (also ``cat /proc/modules``): which kernel modules are loaded.

Format (kmod ``tools/lsmod.c``): a header ``Module                  Size  Used by`` then one line per
module ``<name> <size> <refcount> [<user>,<user>...]``. ``/proc/modules`` has no header and more columns
(``<name> <size> <refcount> <users>, <state> <address>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip

FORMAT = "lsmod"

_HEADER = re.compile(r"^Module\s+Size\s+Used by\s*$", re.M)
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9_]+)\s+(?P<size>\d+)\s+(?P<ref>-?\d+)(?:\s+(?P<users>\S+))?(?:\s+(?P<state>Live|Loading|Unloading))?")
_PROC = re.compile(r"^[A-Za-z0-9_]+ \d+ -?\d+ (?:-|\S+,) (?:Live|Loading|Unloading) 0x[0-9a-f]+", re.M)


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelModule(Record):
    name: str
    size: int
    refcount: int
    used_by: tuple[str, ...]


def sniff(head: str) -> int:
    if _HEADER.search(head):
        lines = head.split("\n")[1:20]
        ok = sum(1 for ln in lines if _LINE.match(ln))
        return 90 if ok >= 3 else 55 if ok else 40
    procs = len(_PROC.findall(head))
    return 85 if procs >= 5 else 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or _HEADER.match(line):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        users = m["users"] or ""
        used = tuple(u for u in users.rstrip(",").split(",") if u and u != "-" and not u.startswith("["))
        records.append(KernelModule(source=source, line=lineno, text=clip(raw), host=host, name=m["name"],
                                    size=int(m["size"]), refcount=int(m["ref"]), used_by=used))
    if not records:
        problems.append("no module lines found")
    return ParseResult(format=FORMAT, records=records, problems=problems)
