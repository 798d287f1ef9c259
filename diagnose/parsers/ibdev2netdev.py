"""``ibdev2netdev`` (Mellanox mlnx-tools ``ofed_scripts/ibdev2netdev``): RDMA device port -> netdev.

Shapes (the script's three ``echo`` lines)::

    mlx5_0 port 1 ==> ens1np0 (Up)                                                    # default
    0000:1a:00.0 mlx5_0 (MT4129 - MCX75310AAS-NEAT) ConnectX-7 fw 28.39.1002 port 1 (ACTIVE) ==> ibp26s0 (Up)  # -v
    mlx4_0 port 1 <===> ib0                                                           # old-style kernels

One :class:`~diagnose.parsers._host.DevNetMap` per line; ``up`` is True for ``(Up)``, False for ``(Down)``,
None otherwise (``(NA)``, ``()``, old style). Shell prompts name the host; other lines are ignored.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import DevNetMap, shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibdev2netdev"

_LINE_RE = re.compile(
    r"^\s*(?:(?P<bdf>(?:[0-9A-Fa-f]{4}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+)?"
    r"(?P<dev>[A-Za-z][\w.\-]*)"
    r"(?:\s+\((?P<devid>[^)]*)\)(?P<desc>.*?)\s+fw\s+(?P<fw>\S+))?"
    r"\s+port\s+(?P<port>\d+)"
    r"(?:\s+\((?P<ibstate>[^)]*)\))?"
    r"\s+(?P<arrow>==>|<===>)\s+(?P<netdev>[^\s()]+)"
    r"(?:\s+\((?P<state>[^)]*)\))?\s*$"
)


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    hits = 0
    lines = 0
    for line in head.split("\n"):
        if not line.strip():
            continue
        lines += 1
        if _LINE_RE.match(line):
            hits += 1
    if hits == 0:
        return 0
    if hits >= 2 and hits * 2 >= lines:
        return 95
    if hits * 2 >= lines:
        return 80
    if hits >= 3:
        return 50
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    last_partial: tuple[int, str] | None = None
    with_state = 0
    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        last_partial = None
        p = shell_prompt(line)
        if p is not None:
            if p[0]:
                cur_host = p[0]
            continue
        m = _LINE_RE.match(line)
        if not m:
            if re.match(r"^\s*[A-Za-z][\w.\-]*\s+port\s+\d+", line) or re.search(r"(?:==>|<===>)\s*$", line):
                last_partial = (n, stripped)
            continue
        if m.group("arrow") == "==>":
            if m.group("state") is not None:
                with_state += 1
            elif with_state:
                last_partial = (n, stripped)  # the script always prints `(Up)`/`(Down)`/`(NA)` after the netdev
        state = (m.group("state") or "").strip().lower()
        up = True if state == "up" else False if state == "down" else None
        records.append(
            DevNetMap(
                source=source,
                line=n,
                text=clip(line),
                host=cur_host,
                device=m.group("dev"),
                port=int(m.group("port")),
                netdev=m.group("netdev"),
                up=up,
            )
        )
    if last_partial is not None:
        problems.append(f"truncated: last line cut short (line {last_partial[0]}: {last_partial[1]!r})")
