"""``smpquery vlarb <lid|guid|dr> [<port>]`` (infiniband-diags): the VL arbitration tables of a port.

Shape (rdma-core ``infiniband-diags/smpquery.c`` ``vlarb_table`` and libibmad ``dump.c``
``mad_dump_vlarbitration``, ``0x%-2X|`` per entry)::

    # VLArbitration tables: Lid 2 port 1 LowCap 8 HighCap 8
    # Low priority VL Arbitration Table:
    VL    : |0x1 |0x2 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
    WEIGHT: |0x1C|0x4 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
    # High priority VL Arbitration Table:
    VL    : |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
    WEIGHT: |0x4 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |

A table with more than 32 entries (cap > 32) prints a second ``VL``/``WEIGHT`` pair after a blank line; the entry
index runs on. A switch port 0 without enhanced port 0 prints ``# No VLArbitration tables (BSP0): ...`` only.
Weights count 64-byte units; an entry of weight 0 is skipped by the arbiter (IBA vol. 1 7.6.9).

Records: one :class:`VlArbEntry` per table entry, cited at its ``WEIGHT`` line. ``MIXABLE``: captures of a loop
that ran ``sl2vl`` and ``vlarb`` hold both (the SL2VL rows are read by :mod:`diagnose.parsers.smpquery_sl2vl`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import ToolError, tool_error
from diagnose.parsers._lines import iter_lines
from diagnose.parsers._smp_tables import Cmd, cell_int, cells, command_state, portid_lid
from diagnose.parsers.base import guarded_parse

FORMAT = "smpquery_vlarb"
MIXABLE = True


@dataclass(frozen=True, slots=True, kw_only=True)
class VlArbEntry(Record):
    """One entry of a port's VL arbitration table: ``table`` is ``high`` or ``low``, ``index`` its slot (0-based).

    ``cap`` is the table's capacity the header gave (``LowCap``/``HighCap``), None when the header was cut off.
    """

    lid: int | None
    guid: str | None
    port: int | None
    table: str
    index: int
    vl: int
    weight: int
    cap: int | None


_HDR_RE = re.compile(
    r"^\s*#\s*VLArbitration tables:\s*(?P<portid>.*?)\s+port\s+(?P<port>\d+)"
    r"(?:\s+LowCap\s+(?P<low>\d+))?(?:\s+HighCap\s+(?P<high>\d+))?\s*$"
)
_NONE_RE = re.compile(r"^\s*#\s*No VLArbitration tables")
_TABLE_RE = re.compile(r"^\s*#\s*(?P<which>Low|High) priority VL Arbitration Table:", re.IGNORECASE)
_VL_RE = re.compile(r"^\s*VL\s*:\s*\|(?P<cells>.*)$")
_W_RE = re.compile(r"^\s*WEIGHT\s*:\s*\|(?P<cells>.*)$")

_SNIFF_HDR = re.compile(r"^[ \t]*#[ \t]*(?:VLArbitration tables:|No VLArbitration tables)", re.MULTILINE)
_SNIFF_TABLE = re.compile(r"^[ \t]*#[ \t]*(?:Low|High) priority VL Arbitration Table:", re.MULTILINE)
_SNIFF_W = re.compile(r"^[ \t]*WEIGHT[ \t]*:[ \t]*\|[ \t]*0x[0-9A-Fa-f]+[ \t]*\|", re.MULTILINE)


def sniff(head: str) -> int:
    if "VL Arbitration" not in head and "VLArbitration" not in head and "WEIGHT" not in head:
        return 0
    hdr = bool(_SNIFF_HDR.search(head))
    tables = bool(_SNIFF_TABLE.search(head))
    weights = bool(_SNIFF_W.search(head))
    if hdr and (tables or weights):
        return 95
    if tables and weights:
        return 85  # the `# VLArbitration tables:` header was cut off
    if hdr:
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cmd = Cmd(host=host)
    lid: int | None = None
    guid: str | None = None
    port: int | None = None
    caps: dict[str, int | None] = {"low": None, "high": None}
    table: str | None = None
    index = 0
    pending: list[int | None] | None = None
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        m = _W_RE.match(line)
        if m:
            weights = [cell_int(c) for c in cells(m.group("cells"))]
            if table is None or pending is None:
                problems.append(f"line {n}: WEIGHT row without its table header and VL row (cut off?)")
                pending = None
                continue
            if len(weights) != len(pending):
                problems.append(f"line {n}: {len(weights)} weights for {len(pending)} VLs (cut off?)")
            for vl, w in zip(pending, weights, strict=False):
                if vl is None or w is None:
                    continue
                records.append(VlArbEntry(source=source, line=n, text=clip(line), host=cmd.host, lid=lid, guid=guid,
                                          port=port, table=table, index=index, vl=vl & 0xF, weight=w,
                                          cap=caps[table]))
                index += 1
            pending = None
            continue
        m = _VL_RE.match(line)
        if m:
            pending = [cell_int(c) for c in cells(m.group("cells"))]
            continue
        m = _TABLE_RE.match(line)
        if m:
            table = m.group("which").lower()
            index, pending = 0, None
            continue
        m = _HDR_RE.match(line)
        if m:
            lid = portid_lid(m.group("portid"))
            guid = cmd.guid
            port = int(m.group("port"))
            caps = {"low": int(m.group("low")) if m.group("low") else None,
                    "high": int(m.group("high")) if m.group("high") else None}
            table, pending = None, None
            continue
        if _NONE_RE.match(line):
            table, pending = None, None
            continue
        err = tool_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=cmd.host, tool="smpquery",
                                     message=err))
            continue
        st = command_state(line, cmd)
        if st is not None:
            cmd = st
            lid, guid, port, table, pending = None, None, None, None, None
            caps = {"low": None, "high": None}
