"""Helpers shared by the ``smpquery sl2vl`` and ``smpquery vlarb`` parsers (the QoS tables of a port).

Both tools print the destination with libibmad ``portid2str``: ``Lid 3`` for a LID (``-G <guid>`` is resolved to
its LID before the query, so the print is ``Lid N`` too), ``DR path slid 0; dlid 0; 0,1,3`` for a directed route.
A capture is usually a shell loop over the switches of the job's path: the prompt or ``# smpquery ...`` echo
before each table gives the host it ran on and, with ``-G``, the GUID of the node queried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.parsers._ib import norm_guid
from diagnose.parsers._lines import command_line, prompt

LID_RE = re.compile(r"\bLid\s+(?P<lid>\d+)")
_GUID_FLAG_RE = re.compile(r"(?:^|\s)(?:-G|--Guid)(?:\s|=|$)")
_GUID_TOKEN_RE = re.compile(r"(?:^|[\s=])(?P<guid>0x[0-9A-Fa-f]{1,16})\b")
TOOLS = ("smpquery",)


def portid_lid(text: str) -> int | None:
    """The LID of a ``portid2str`` print (``Lid 3``, ``Lid 3 Gid ...``); None for a bare directed route."""
    m = LID_RE.search(text)
    return int(m.group("lid")) if m else None


@dataclass
class Cmd:
    """What the last command line said: the host it ran on and the node GUID given with ``-G``."""

    host: str | None
    guid: str | None = None


def command_state(line: str, cur: Cmd) -> Cmd | None:
    """A new :class:`Cmd` when ``line`` is a prompt or an ``smpquery`` command echo, else None."""
    p = prompt(line)
    cmd = p[1] if p is not None else command_line(line, TOOLS)
    if p is None and cmd is None:
        return None
    host = p[0] if p is not None and p[0] else cur.host
    guid = None
    if cmd and _GUID_FLAG_RE.search(cmd):
        gm = _GUID_TOKEN_RE.search(cmd)
        guid = norm_guid(gm.group("guid")) if gm else None
    return Cmd(host=host, guid=guid)


def cells(row: str) -> list[str]:
    """``| 0| 1| 2|`` / ``|0x0 |0x1C|`` -> ['0', '1', '2'] (the cells between the bars, stripped)."""
    parts = row.split("|")
    if parts and not parts[-1].strip():
        parts = parts[:-1]  # the closing bar
    return [c.strip() for c in parts]


def cell_int(cell: str) -> int | None:
    c = cell.strip()
    try:
        return int(c, 16) if c.lower().startswith("0x") else int(c, 10)
    except ValueError:
        return None
