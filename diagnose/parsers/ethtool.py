"""``ethtool -S <netdev>``: NIC driver statistics, one :class:`~diagnose.parsers._host.NicStat` per counter.

Shape (ethtool ``ethtool.c`` ``dump_stats``; mlx5 names in the kernel's
``Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst``)::

    $ ethtool -S ens1f0
    NIC statistics:
         rx_packets: 845320277
         rx_prio3_pause: 1523
         rx_pcs_symbol_err_phy: 0

The header is optional (``ethtool -S x | grep prio`` captures drop it); counter names are kept as printed,
including other drivers' nested forms (``rxq0: rx_bytes: 1``, ``[0]: rx_bytes: 1``). ``netdev`` comes from
the ``ethtool -S <if>`` command echo (prompt, ``$ ``/``# `` echo), a ``# <if>`` / ``=== <if> ===`` header,
or a bare interface name line just before ``NIC statistics:``; otherwise None. Several dumps in one file are
read in order. ethtool's error lines (``Cannot get stats strings information``, ``no stats available``,
``netlink error: ...``) become :class:`~diagnose.parsers._ib.ToolError`. A dump whose last line is cut before
its value is reported as truncated.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import NicStat, shell_prompt
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ethtool_stats"

_HEADER_RE = re.compile(r"^\s*NIC statistics:\s*$")
# indented `name: value`; name may itself hold `: ` (rxq0: rx_bytes); value is an unsigned integer
_STAT_RE = re.compile(r"^(?P<indent>[ \t]+)(?P<name>\S(?:.*?\S)?):[ \t]+(?P<val>\d+)[ \t]*(?:#.*)?$")
_CMD_RE = re.compile(r"\bethtool\s+(?:-S|--statistics)(?:\s+--all-groups|\s+--groups\s+\S+)?\s+(?P<if>[\w.\-@:]+)")
_IFHDR_RE = re.compile(
    r"^\s*(?:#+|={2,}|-{2,}|>+|\*+)?\s*(?P<if>[A-Za-z][\w.\-@]{0,30})\s*(?:={2,}|-{2,}|<+|\*+|:)?\s*$"
)
_ERR_RE = re.compile(
    r"^\s*(?:Cannot get (?:stats|driver|device|statistics)[^\n]*"
    r"|no stats available[^\n]*|netlink error:[^\n]*|Cannot get control socket[^\n]*"
    r"|ethtool: [^\n]*|bad command line argument[^\n]*)$",
    re.IGNORECASE,
)
_SNIFF_STAT = re.compile(r"^[ \t]{2,}[a-z][\w\[\]\-.]*(?:: [\w\[\]\-.]+)?: \d+[ \t]*$", re.MULTILINE)
_SNIFF_ETH = re.compile(
    r"^[ \t]+(?:(?:rx|tx)\d*_\w+|\w+_(?:packets|bytes|phy|pause|discards?|errors?|dropped|drops)): \d+[ \t]*$",
    re.MULTILINE,
)
_NOT_IF = frozenset({"nic", "statistics", "done", "end", "ok", "output"})


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    header = bool(re.search(r"^\s*NIC statistics:\s*$", head, re.MULTILINE))
    stats = len(_SNIFF_STAT.findall(head))
    eth = len(_SNIFF_ETH.findall(head))
    if header and stats >= 1:
        return 95
    cmd = bool(_CMD_RE.search(head))
    if cmd and eth >= 1:
        return 90
    if eth >= 5:
        lines = sum(1 for ln in head.split("\n") if ln.strip())
        if stats >= 0.6 * lines:
            return 75
        if stats >= 0.3 * lines:
            return 45
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    netdev: str | None = None
    in_dump = False
    dump_line = 0
    dump_stats = 0
    last_partial: tuple[int, str] | None = None

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        last_partial = None
        p = shell_prompt(line)
        cmd_m = _CMD_RE.search(line)
        if p is not None or (cmd_m and not _STAT_RE.match(line)):
            if p is not None and p[0]:
                cur_host = p[0]
            if cmd_m:
                netdev = cmd_m.group("if")
            elif p is not None:
                netdev = None
            in_dump = False
            continue
        if _HEADER_RE.match(line):
            if in_dump and dump_stats == 0:
                problems.append(f"line {dump_line}: 'NIC statistics:' with no counters")
            in_dump, dump_line, dump_stats = True, n, 0
            continue
        m = _STAT_RE.match(line)
        if m:
            dump_stats += 1
            records.append(
                NicStat(
                    source=source,
                    line=n,
                    text=clip(line),
                    host=cur_host,
                    netdev=netdev,
                    counter=m.group("name"),
                    value=int(m.group("val")),
                )
            )
            continue
        if _ERR_RE.match(line):
            records.append(
                ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="ethtool", message=stripped)
            )
            continue
        if line[:1] in (" ", "\t"):
            if re.fullmatch(r"[\w\[\]\-.:]+(?::\s*\S*)?", stripped):
                last_partial = (n, stripped)  # `     tx` / `     rx_bytes:` cut before the value
            continue
        h = _IFHDR_RE.match(line)
        if h and h.group("if").lower() not in _NOT_IF:
            netdev = h.group("if")  # `# ens1f0` / `=== ens1f0 ===` / a bare name echoed by a capture loop
            in_dump = False
            continue
    if last_partial is not None:
        problems.append(f"truncated: dump ends early (line {last_partial[0]}: {last_partial[1]!r})")
    elif in_dump and dump_stats == 0:
        problems.append(f"truncated: 'NIC statistics:' at line {dump_line} has no counters")
