"""``ibdiagnet2.db_csv`` (NVIDIA ibdiagnet): the fabric database ibdiagnet dumps after a run.

Shape (ibdiagnet user manual "ibdiagnet Dump Files"; section/column names as read by public third-party parsers
of the file, see ``tests/data/ibdiagnet_db_csv/README.md``): many CSV sections, each::

    START_NODES
    NodeDesc,NumPorts,NodeType,ClassVersion,BaseVersion,SystemImageGUID,NodeGUID,PortGUID,DeviceID,PartitionCap,revision,VendorID,LocalPortNum
    "MF0;leaf07:MQM9700/U1",65,2,1,1,0x...,0x...,0x...,54002,8,0x00a0,0x02c9,1
    END_NODES

The file is split generically into sections (:func:`sections`); the header row of each section names its columns
(names differ between sections and versions: ``NodeGUID``/``NodeGuid``, ``PortNumber``/``PortNum`` - they are
looked up case-insensitively, never by position). Mapped sections:

* ``NODES`` -> :class:`~diagnose.parsers._fabric.FabricNode` (``NodeType`` 1 CA, 2 SW, 3 RT; ``lid`` from
  ``PORTS``: port 0 for switches, the lowest port for CAs);
* ``LINKS`` (``NodeGuid1,PortNum1,NodeGuid2,PortNum2``) -> one :class:`~diagnose.parsers._fabric.FabricLink`
  per end (so two per row), enriched from ``PORTS``/``NODES``;
* ``PORTS`` -> :class:`~diagnose.parsers._fabric.FabricPortState` for ports 1..n that are in no ``LINKS`` row
  (width/speed None when the port is Down: only its state fields are valid);
  ``LinkWidthActv`` is the PortInfo width bit (1 1X, 2 4X, 4 8X, 8 12X, 16 2X), ``LinkSpeedActv`` ibdm's
  ``IBLinkSpeed`` (1 SDR, 2 DDR, 4 QDR, 0x100 FDR, 0x200 EDR, 0x400 HDR, 0x800 NDR, 0x10000 FDR10, 0x1000000 XDR),
  ``PortState`` 1..4 and ``PortPhyState`` 1..7 the PortInfo enums;
* ``PM_INFO`` -> :class:`~diagnose.parsers.perfquery.PortCounter` per known counter column (``extended=True`` for
  ``...Ext``/``...Extended`` columns, which win over the 32-bit column of the same counter; ``N/A`` skipped);
* ``SM_INFO`` -> :class:`~diagnose.parsers._fabric.SmInfo`;
* ``CABLE_INFO`` -> :class:`~diagnose.parsers._fabric.CableInfo`.

Other sections are skipped silently. A section without its ``END_`` line (truncated file) is parsed as far as
it goes and reported in ``problems``.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

from diagnose.models.counters import canonical_counter, counter_bits
from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import (
    PHYS_STATES,
    PORT_STATES,
    CableInfo,
    FabricLink,
    FabricNode,
    FabricPortState,
    SmInfo,
    norm_node_type,
    norm_sm_state,
    norm_width,
    speed_name,
)
from diagnose.parsers._ib import norm_guid, norm_phys_state, norm_state
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse
from diagnose.parsers.perfquery import PortCounter

FORMAT = "ibdiagnet_db_csv"

_START_RE = re.compile(r"^\s*START_(?P<name>[A-Z0-9_]+)\s*,*\s*$")
_END_RE = re.compile(r"^\s*END_(?P<name>[A-Z0-9_]+)\s*,*\s*$")

_SNIFF_START = re.compile(r"^START_[A-Z0-9_]+[ \t]*$", re.MULTILINE)
_SNIFF_END = re.compile(r"^END_[A-Z0-9_]+[ \t]*$", re.MULTILINE)
_SNIFF_KNOWN = re.compile(r"^START_(?:NODES|PORTS|LINKS|PM_INFO|CABLE_INFO|SM_INFO|NODES_INFO|TEMP_SENSING)\b", re.MULTILINE)

WIDTHS = {1: "1X", 2: "4X", 4: "8X", 8: "12X", 16: "2X"}
SPEEDS = {
    1: "SDR",
    2: "DDR",
    4: "QDR",
    0x100: "FDR",
    0x200: "EDR",
    0x400: "HDR",
    0x800: "NDR",
    0x10000: "FDR10",
    0x20000: "EDR20",
    0x1000000: "XDR",
}


def sniff(head: str) -> int:
    starts = len(_SNIFF_START.findall(head))
    ends = len(_SNIFF_END.findall(head))
    known = bool(_SNIFF_KNOWN.search(head))
    if known and (ends or starts >= 2):
        return 95
    if known:
        return 80
    if starts >= 2 and ends >= 1:
        return 60
    return 0


@dataclass
class Section:
    """One ``START_<NAME>`` ... ``END_<NAME>`` block; rows are (line, cells) and ``header`` the column names."""

    name: str
    start_line: int
    header: list[str] = field(default_factory=list)
    header_line: int | None = None
    rows: list[tuple[int, list[str], str]] = field(default_factory=list)
    end_line: int | None = None

    def index(self) -> dict[str, int]:
        return {h.strip().lower(): i for i, h in enumerate(self.header)}


def _cells(line: str) -> list[str]:
    try:
        return next(csv.reader([line], skipinitialspace=True))
    except (csv.Error, StopIteration):
        return line.split(",")


def sections(text: str) -> list[Section]:
    """Split a db_csv text into its sections (generic; no column knowledge)."""
    out: list[Section] = []
    cur: Section | None = None
    for n, line in iter_lines(text):
        s = line.strip()
        if not s:
            continue
        m = _START_RE.match(s)
        if m:
            cur = Section(name=m.group("name"), start_line=n)
            out.append(cur)
            continue
        m = _END_RE.match(s)
        if m:
            if cur is not None and cur.name == m.group("name"):
                cur.end_line = n
            cur = None
            continue
        if cur is None or s.startswith("#"):
            continue
        if cur.header_line is None:
            cur.header = [c.strip() for c in _cells(s)]
            cur.header_line = n
        else:
            cur.rows.append((n, _cells(line), line))
    return out


class _Row:
    def __init__(self, sec: Section, cells: list[str]) -> None:
        self.idx = sec.index()
        self.cells = cells

    def get(self, *names: str) -> str | None:
        for name in names:
            i = self.idx.get(name.lower())
            if i is not None and i < len(self.cells):
                v = self.cells[i].strip()
                if v and v.upper() not in ("N/A", "NA"):
                    return v
        return None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    v = value.strip()
    try:
        return int(v, 16) if v.lower().startswith("0x") else int(v)
    except ValueError:
        return None


def _enum(value: str | None, table: dict[int, str]) -> str | None:
    i = _int(value)
    if i is not None:
        return table.get(i)
    return None


def _width(value: str | None) -> str | None:
    return _enum(value, WIDTHS) or norm_width(value)


def _speed(value: str | None) -> str | None:
    i = _int(value)
    if i is not None:
        return SPEEDS.get(i)
    return speed_name(value)


def _state(value: str | None) -> str | None:
    return _enum(value, PORT_STATES) or (norm_state(value) if value and not value.isdigit() else None)


def _phys(value: str | None) -> str | None:
    return _enum(value, PHYS_STATES) or (norm_phys_state(value) if value and not value.isdigit() else None)


def _temperature(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.search(r"-?\d+(?:\.\d+)?", value)
    return float(m.group(0)) if m else None


_EXT_SUFFIX = re.compile(r"(?:_?ext(?:ended)?)$", re.IGNORECASE)


def _counter_column(name: str) -> tuple[str, bool] | None:
    canon = canonical_counter(name)
    if canon is not None:
        return canon, counter_bits(canon) is None  # 64-bit-only counters (PortUnicastXmitPkts ...) are extended
    base = _EXT_SUFFIX.sub("", name.strip())
    if base != name.strip():
        canon = canonical_counter(base)
        if canon is not None:
            return canon, True
    return None


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


@dataclass
class _Port:
    lid: int | None
    width: str | None
    speed: str | None
    state: str | None
    phys: str | None
    line: int
    text: str


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    secs = sections(text)
    if not secs and text.strip():
        problems.append("no START_<SECTION> line found")
    by_name: dict[str, Section] = {}
    for s in secs:
        if s.end_line is None:
            problems.append(f"truncated: section {s.name} (line {s.start_line}) has no END_{s.name} line")
        by_name.setdefault(s.name, s)

    # PORTS first: everything else is enriched from it
    ports: dict[tuple[str, int], _Port] = {}
    sec = by_name.get("PORTS")
    if sec is not None:
        for n, cells, raw in sec.rows:
            r = _Row(sec, cells)
            guid = norm_guid(r.get("NodeGuid", "NodeGUID"))
            pnum = _int(r.get("PortNum", "PortNumber"))
            if guid is None or pnum is None:
                problems.append(f"line {n}: PORTS row without NodeGuid/PortNum")
                continue
            ports[(guid, pnum)] = _Port(
                lid=_int(r.get("LID", "Lid")),
                width=_width(r.get("LinkWidthActv", "LinkWidthActive")),
                speed=_speed(r.get("LinkSpeedActv", "LinkSpeedActive")),
                state=_state(r.get("PortState")),
                phys=_phys(r.get("PortPhyState", "PhysPortState", "PortPhysState")),
                line=n,
                text=raw,
            )

    nodes: dict[str, tuple[str, str | None]] = {}  # guid -> (type, desc)
    sec = by_name.get("NODES")
    if sec is not None:
        for n, cells, raw in sec.rows:
            r = _Row(sec, cells)
            guid = norm_guid(r.get("NodeGUID", "NodeGuid"))
            ntype = norm_node_type(r.get("NodeType"))
            if guid is None or ntype is None:
                problems.append(f"line {n}: NODES row without NodeGUID/NodeType")
                continue
            desc = r.get("NodeDesc", "NodeDescription")
            nodes[guid] = (ntype, desc)
            if ntype == "SW":
                lid = ports[(guid, 0)].lid if (guid, 0) in ports else None
            else:
                own = sorted(p for (g, p) in ports if g == guid and p > 0)
                lid = ports[(guid, own[0])].lid if own else None
            records.append(
                FabricNode(
                    source=source,
                    line=n,
                    text=clip(raw),
                    host=host,
                    guid=guid,
                    node_type=ntype,
                    description=desc,
                    ports=_int(r.get("NumPorts")),
                    lid=lid,
                )
            )

    linked: set[tuple[str, int]] = set()
    sec = by_name.get("LINKS")
    if sec is not None:
        for n, cells, raw in sec.rows:
            r = _Row(sec, cells)
            g1, p1 = norm_guid(r.get("NodeGuid1", "NodeGUID1")), _int(r.get("PortNum1", "PortNumber1"))
            g2, p2 = norm_guid(r.get("NodeGuid2", "NodeGUID2")), _int(r.get("PortNum2", "PortNumber2"))
            if g1 is None or g2 is None or p1 is None or p2 is None:
                problems.append(f"line {n}: LINKS row without both ends")
                continue
            for (ga, pa), (gb, pb) in (((g1, p1), (g2, p2)), ((g2, p2), (g1, p1))):
                linked.add((ga, pa))
                pi = ports.get((ga, pa))
                records.append(
                    FabricLink(
                        source=source,
                        line=n,
                        text=clip(raw),
                        host=host,
                        guid=ga,
                        port=pa,
                        peer_guid=gb,
                        peer_port=pb,
                        width=pi.width if pi else None,
                        speed=pi.speed if pi else None,
                        state=pi.state if pi else None,
                        phys_state=pi.phys if pi else None,
                        lid=_node_lid(ports, nodes, ga, pa),
                        peer_lid=_node_lid(ports, nodes, gb, pb),
                        description=nodes.get(ga, ("", None))[1],
                        peer_description=nodes.get(gb, ("", None))[1],
                    )
                )

    for (guid, pnum), pi in ports.items():
        if pnum == 0 or (guid, pnum) in linked:
            continue
        down = pi.state == "Down"  # IBA C14-24.2.1: only the state fields of a down port are valid
        records.append(
            FabricPortState(
                source=source,
                line=pi.line,
                text=clip(pi.text),
                host=host,
                guid=guid,
                port=pnum,
                state=pi.state,
                phys_state=pi.phys,
                width=None if down else pi.width,
                speed=None if down else pi.speed,
                lid=_node_lid(ports, nodes, guid, pnum),
                description=nodes.get(guid, ("", None))[1],
                could_be=None,
            )
        )

    sec = by_name.get("PM_INFO")
    if sec is not None:
        _pm_info(sec, ports, nodes, source, host, records, problems)
    sec = by_name.get("SM_INFO")
    if sec is not None:
        for n, cells, raw in sec.rows:
            r = _Row(sec, cells)
            records.append(
                SmInfo(
                    source=source,
                    line=n,
                    text=clip(raw),
                    host=host,
                    sm_lid=_int(r.get("LID", "Lid", "SMLid", "SM_LID")),
                    sm_guid=norm_guid(r.get("GUID", "SMGuid", "PortGUID", "PortGuid", "NodeGUID", "NodeGuid")),
                    activity=_int(r.get("ActCount", "ActivityCount", "act_count", "Activity")),
                    priority=_int(r.get("Priority", "SmPriority", "priority")),
                    state=norm_sm_state(r.get("SmState", "SMState", "State", "sm_state")),
                )
            )
    sec = by_name.get("CABLE_INFO")
    if sec is not None:
        for n, cells, raw in sec.rows:
            r = _Row(sec, cells)
            guid = norm_guid(r.get("NodeGuid", "NodeGUID"))
            pnum = _int(r.get("PortNum", "PortNumber"))
            if guid is None or pnum is None:
                problems.append(f"line {n}: CABLE_INFO row without NodeGuid/PortNum")
                continue
            records.append(
                CableInfo(
                    source=source,
                    line=n,
                    text=clip(raw),
                    host=host,
                    guid=guid,
                    port=pnum,
                    vendor=r.get("Vendor"),
                    pn=r.get("PN"),
                    sn=r.get("SN"),
                    length=r.get("Length", "LengthCopper", "LengthSMFiber", "LengthOM3"),
                    temperature=_temperature(r.get("Temperature")),
                    identifier=r.get("Identifier", "TypeDesc"),
                )
            )
    records.sort(key=lambda x: x.line)


def _node_lid(ports: dict[tuple[str, int], _Port], nodes: dict[str, tuple[str, str | None]], guid: str, port: int) -> int | None:
    """A switch port's LID is the switch LID (port 0); a CA port has its own."""
    if nodes.get(guid, ("", None))[0] == "SW" and (guid, 0) in ports:
        return ports[(guid, 0)].lid
    pi = ports.get((guid, port))
    if pi is None:
        return None
    if pi.lid == 0 and (guid, 0) in ports:
        return ports[(guid, 0)].lid
    return pi.lid


def _pm_info(
    sec: Section,
    ports: dict[tuple[str, int], _Port],
    nodes: dict[str, tuple[str, str | None]],
    source: str,
    host: str | None,
    records: list[Record],
    problems: list[str],
) -> None:
    cols: dict[str, tuple[int, bool]] = {}
    for i, name in enumerate(sec.header):
        hit = _counter_column(name)
        if hit is None:
            continue
        canon, ext = hit
        if canon not in cols or (ext and not cols[canon][1]):
            cols[canon] = (i, ext)
    for n, cells, raw in sec.rows:
        r = _Row(sec, cells)
        guid = norm_guid(r.get("NodeGUID", "NodeGuid"))
        pnum = _int(r.get("PortNumber", "PortNum"))
        if guid is None:
            problems.append(f"line {n}: PM_INFO row without NodeGUID")
            continue
        usable = len(cells)
        if len(cells) < len(sec.header):
            usable -= 1  # the last value of a cut row may itself be cut
            problems.append(f"truncated: line {n}: PM_INFO row has {len(cells)} of {len(sec.header)} columns")
        for canon, (i, ext) in cols.items():
            if i >= usable:
                continue
            value = _int(cells[i])
            if value is None:
                continue
            records.append(
                PortCounter(
                    source=source,
                    line=n,
                    text=clip(raw),
                    host=host,
                    lid=_node_lid(ports, nodes, guid, pnum) if pnum is not None else None,
                    guid=guid,
                    port=pnum,
                    counter=canon,
                    value=value,
                    extended=ext,
                    snapshot=0,
                    timestamp=None,
                )
            )
