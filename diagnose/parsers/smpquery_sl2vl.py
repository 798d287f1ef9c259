"""``smpquery sl2vl <lid|guid|dr> [<out port>]`` (infiniband-diags): the SL-to-VL mapping table of a port.

Shape (rdma-core ``infiniband-diags/smpquery.c`` ``sl2vl_table`` and libibmad ``dump.c`` ``mad_dump_sltovl``)::

    # SL2VL table: Lid 1
    #                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|
    ports: in  0, out  1: | 0| 0| 0| 0| 0| 0| 1| 1| 1| 1| 1| 2| 2| 2| 2| 2|
    ports: in  1, out  1: | 0| 0| 0| 0| 0| 0| 1| 1| 1| 1| 1| 2| 2| 2| 2| 2|

A channel adapter prints one row, ``in 0, out 0`` (its one table); a switch prints one row per input port
``0..NumPorts`` for the output port given (0 when none is given). Cell ``s`` of a row is the VL a packet of SL ``s``
takes when it enters on ``in`` and leaves on ``out`` (IBA vol. 1 7.6.6; VL 15 there means the packet is dropped).

Records: one :class:`Sl2VlEntry` per ``ports:`` row, ``vls`` holding the 16 VLs indexed by SL. A row with fewer
than 16 cells (a cut paste) is a problem, not a record. ``MIXABLE``: a capture of a loop that ran ``sl2vl`` and
``vlarb`` for each switch holds both tables; the VLArb lines are left to :mod:`diagnose.parsers.smpquery_vlarb`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import ToolError, tool_error
from diagnose.parsers._lines import iter_lines
from diagnose.parsers._smp_tables import Cmd, cell_int, cells, command_state, portid_lid
from diagnose.parsers.base import guarded_parse

FORMAT = "smpquery_sl2vl"
MIXABLE = True
NUM_SL = 16
DROP_VL = 15  # the highest VL; in an SL2VL table it means 'drop' (IBA vol. 1 7.6.6)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sl2VlEntry(Record):
    """One SL2VL table row of a port: ``vls[sl]`` is the VL of SL ``sl`` from ``in_port`` to ``out_port``.

    ``lid`` is the LID of the node queried (None under a directed route or a cut-off header); ``guid`` its node GUID
    when the command line gave it with ``-G``.
    """

    lid: int | None
    guid: str | None
    in_port: int
    out_port: int
    vls: tuple[int, ...]


_HDR_RE = re.compile(r"^\s*#\s*SL2VL table:\s*(?P<portid>.*?)\s*$")
_SL_RE = re.compile(r"^\s*#\s*SL:\s*\|(?P<cells>.*)$")
_ROW_RE = re.compile(r"^\s*ports:\s*in\s+(?P<inp>\d+),\s*out\s+(?P<outp>\d+):\s*\|(?P<cells>.*)$")

_SNIFF_HDR = re.compile(r"^[ \t]*#[ \t]*SL2VL table:", re.MULTILINE)
_SNIFF_SL = re.compile(r"^[ \t]*#[ \t]+SL:[ \t]*\|[ \t]*0\|[ \t]*1\|", re.MULTILINE)
_SNIFF_ROW = re.compile(r"^[ \t]*ports:[ \t]*in[ \t]+\d+,[ \t]*out[ \t]+\d+:[ \t]*\|(?:[ \t]*\d+\|){4}", re.MULTILINE)


def sniff(head: str) -> int:
    if "ports:" not in head and "SL2VL" not in head:
        return 0
    hdr = bool(_SNIFF_HDR.search(head))
    rows = len(_SNIFF_ROW.findall(head))
    if hdr and (rows or _SNIFF_SL.search(head)):
        return 95
    if rows and _SNIFF_SL.search(head):
        return 85  # the `# SL2VL table:` line was cut off
    if rows >= 2:
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cmd = Cmd(host=host)
    lid: int | None = None
    guid: str | None = None
    cols: list[int] = list(range(NUM_SL))
    in_table = False
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        m = _ROW_RE.match(line)
        if m:
            vals = [cell_int(c) for c in cells(m.group("cells"))]
            if len(vals) < NUM_SL:
                problems.append(f"line {n}: SL2VL row with {len(vals)} of {NUM_SL} cells (cut off?)")
                continue
            if any(v is None or not 0 <= v <= DROP_VL for v in vals[:NUM_SL]):
                problems.append(f"line {n}: SL2VL row with a cell that is not a VL 0-15")
                continue
            if not in_table:
                problems.append(f"line {n}: SL2VL row without its '# SL2VL table:' header (cut off?)")
                in_table = True
            by_sl = dict(zip(cols, vals, strict=False))
            vls = tuple(int(by_sl.get(s, vals[s])) for s in range(NUM_SL))  # type: ignore[arg-type]
            records.append(Sl2VlEntry(source=source, line=n, text=clip(line), host=cmd.host, lid=lid, guid=guid,
                                      in_port=int(m.group("inp")), out_port=int(m.group("outp")), vls=vls))
            continue
        m = _HDR_RE.match(line)
        if m:
            lid = portid_lid(m.group("portid"))
            guid = cmd.guid
            cols = list(range(NUM_SL))
            in_table = True
            continue
        m = _SL_RE.match(line)
        if m:
            got = [cell_int(c) for c in cells(m.group("cells"))]
            if len(got) >= NUM_SL and all(g is not None for g in got[:NUM_SL]):
                cols = [int(g) for g in got[:NUM_SL]]  # type: ignore[arg-type]
            continue
        err = tool_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=cmd.host, tool="smpquery",
                                     message=err))
            continue
        st = command_state(line, cmd)
        if st is not None:
            cmd = st
            lid, guid, in_table = None, None, False
            continue
        if not line.lstrip().startswith("#"):
            in_table = False  # another tool's output: a later row has no header of its own
