"""``ibswitches``, ``ibhosts``, ``ibrouters`` and ``ibnodes`` (infiniband-diags): the nodes of the fabric, one a line.

The scripts (rdma-core ``infiniband-diags/scripts/ibswitches.in``, ``ibhosts.in``, ``ibrouters.in``; ``ibnodes.in``
runs ``ibhosts`` then ``ibswitches``) rewrite ibnetdiscover's node lines with awk::

    print $1 "\\t: 0x" substr($3, 4, 16) " ports " $2 " " <the text after '#'>

so a line is the node type, the node GUID, the port count and the quoted node description; a switch line keeps
the port-0 information (``base``/``enhanced port 0 lid N lmc M``)::

    Switch	: 0x0002c90200482d08 ports 36 "MF0;switch-a:SX6036/U1" enhanced port 0 lid 4 lmc 0
    Ca	: 0x0002c903000e0b72 ports 2 "gpu-a101 HCA-1"

Records: one :class:`~diagnose.parsers._fabric.FabricNode` per line (``guid`` is the *node* GUID, ``lid`` the
switch's port-0 LID; CAs and routers carry no LID here). ``ibwarn:``/``iberror:``/``ibpanic:`` lines, which the
scripts pass through, become :class:`~diagnose.parsers._ib.ToolError`.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import FabricNode, norm_node_type
from diagnose.parsers._ib import norm_guid, shell_line
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibnodes"

_TOOLS = ("ibswitches", "ibhosts", "ibnodes", "ibrouters")
_LINE_RE = re.compile(
    r"^\s*(?P<type>Switch|Ca|Rt)\s*:\s*0x(?P<guid>[0-9a-fA-F]{1,16})\s+ports\s+(?P<ports>\d+)\s+"
    r"\"(?P<desc>.*)\"(?P<rest>.*?)\s*$"
)
_REST_RE = re.compile(
    r"^\s*(?:(?P<p0>base|enhanced)\s+port\s+0)?\s*(?:port\s+0\s+)?(?:lid\s+(?P<lid>\d+)(?:\s+lmc\s+(?P<lmc>\d+))?)?\s*$"
)
_SNIFF_RE = re.compile(r"^[ \t]*(?:Switch|Ca|Rt)[ \t]*:[ \t]*0x[0-9a-fA-F]{1,16}[ \t]+ports[ \t]+\d+[ \t]+\"",
                       re.MULTILINE)


def sniff(head: str) -> int:
    n = len(_SNIFF_RE.findall(head))
    if n >= 2:
        return 95
    return 85 if n == 1 else 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        m = _LINE_RE.match(line)
        if m is None:
            kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
            if kind is None and len(problems) < 20:
                problems.append(f"line {n}: not a node line: {clip(line.strip())}")
            continue
        rest = _REST_RE.match(m.group("rest"))
        lid = int(rest.group("lid")) if rest is not None and rest.group("lid") else None
        desc = m.group("desc").strip()
        records.append(
            FabricNode(
                source=source,
                line=n,
                text=clip(line),
                host=cur_host,
                guid=norm_guid("0x" + m.group("guid")) or "0x" + m.group("guid").lower().zfill(16),
                node_type=norm_node_type(m.group("type")) or m.group("type"),
                description=desc or None,
                ports=int(m.group("ports")),
                lid=lid,
            )
        )
