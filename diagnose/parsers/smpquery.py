"""``smpquery`` / ``ibportstate`` (infiniband-diags): NodeInfo / PortInfo / NodeDescription dumps.

Shape (rdma-core ``infiniband-diags/smpquery.c``, fields from libibmad ``fields.c``/``dump.c``)::

    # Node info: Lid 2
    BaseVers:........................1
    NodeType:........................Channel Adapter
    NumPorts:........................1
    SystemGuid:......................0xec0d9a03000c8983
    Guid:............................0xec0d9a03000c8980
    PortGuid:........................0xec0d9a03000c8981
    # Port info: Lid 12 port 2
    LinkState:.......................Active
    PhysLinkState:...................LinkUp
    Lid:.............................12
    LinkWidthActive:.................4X
    LinkSpeedActive:.................10.0 Gbps
    LinkSpeedExtActive:..............14.0625 Gbps
    Node Description:.................b1nstcx02 HCA-1

``ibportstate <lid> <port> [query]`` prints the same ``# Port info:`` dump after a ``CA/RT PortInfo:`` (or
``Initial ... PortInfo:`` / ``After PortInfo set:``) line. ``# MLNX ext Port info:`` and ``# Switch info:`` blocks
are skipped.

Records: :class:`PortInfo` per PortInfo dump (LID-keyed: a PortInfo carries no GUID), a
:class:`~diagnose.parsers._fabric.FabricPortState` per PortInfo dump whose GUID is known: the node GUID of a
NodeInfo dump of the same LID in the capture, or the (port) GUID of a ``-G``/``--Guid`` command line, and a
:class:`~diagnose.parsers._fabric.FabricNode` per NodeInfo dump (description from a ``Node Description:`` line of
the same LID when present). Speed: ``LinkSpeedExtActive`` when it is a rate, else ``LinkSpeedActive``; width and speed are None for a Down
port (IBA C14-24.2.1: only the state fields of a down port are valid).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import FabricNode, FabricPortState, norm_node_type, norm_width, port_state, speed_name
from diagnose.parsers._ib import ToolError, norm_guid, norm_phys_state, to_int, tool_error
from diagnose.parsers._lines import command_line, iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "smpquery"


@dataclass(frozen=True, slots=True, kw_only=True)
class PortInfo(Record):
    """One PortInfo dump (``smpquery portinfo`` / ``ibportstate``), keyed by LID and port.

    ``guid`` is the node GUID when the capture shows it (NodeInfo of the same LID, ``-G`` argument), else None.
    """

    lid: int | None
    port: int
    guid: str | None
    state: str | None
    phys_state: str | None
    width: str | None
    speed: str | None
    sm_lid: int | None
    width_supported: str | None
    speed_supported: str | None
    # ibportstate on an active switch port also dumps the far end (``Peer PortInfo:``, reached by a directed route
    # out of ``peer_of_port``); that dump's own LID is only known from its ``Lid:`` field
    peer_of_lid: int | None = None
    peer_of_port: int | None = None
    width_enabled: str | None = None
    speed_ext_supported: str | None = None  # LinkSpeedExtSupported (FDR and later), e.g. '14.0625 Gbps or 53.125 Gbps'


_HDR_RE = re.compile(
    r"^\s*#\s*(?P<attr>Node info|Port info|Port info Extended|MLNX ext Port info|Switch info)\s*:\s*"
    r"(?P<portid>.*?)(?:\s+port\s+(?P<port>\d+))?\s*$"
)
_LID_RE = re.compile(r"\bLid\s+(?P<lid>\d+)")
_FIELD_RE = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9 ]*?):\.+(?P<val>.*?)\s*$")
_ND_RE = re.compile(r"^\s*Node Description:\.+(?P<desc>.*?)\s*$")
_GUID_FLAG_RE = re.compile(r"(?:^|\s)(?:-G|--Guid)(?:\s|=|$)")
_GUID_TOKEN_RE = re.compile(r"(?:^|[\s=])(?P<guid>0x[0-9A-Fa-f]{1,16})\b")
_LID_ARG_RE = re.compile(
    r"(?:^|\s)(?:smpquery|ibportstate)\s+(?:-\S+\s+)*(?:(?:nd|nodedesc|ni|nodeinfo|pi|portinfo|query)\s+)?"
    r"(?:-L\s+)?(?P<lid>\d+)\b",
    re.IGNORECASE,
)
_TOOLS = ("smpquery", "ibportstate")

_SNIFF_HDR = re.compile(r"^[ \t]*#[ \t]*(?:Node info|Port info|Switch info):[ \t]*(?:Lid \d+|DR path)", re.MULTILINE)
_SNIFF_FIELD = re.compile(
    r"^[ \t]*(?:LinkState|PhysLinkState|LinkWidthActive|LinkSpeedActive|LinkSpeedExtActive|NodeType|NumPorts"
    r"|PortGuid|SMLid|Node Description):\.{2,}\S",
    re.MULTILINE,
)


def sniff(head: str) -> int:
    hdrs = len(_SNIFF_HDR.findall(head))
    fields = len(_SNIFF_FIELD.findall(head))
    if hdrs and fields:
        return 95
    if fields >= 3 and ("LinkState:" in head or "NodeType:" in head):
        return 50  # dump whose header was cut off
    if fields == 1 and "Node Description:." in head:
        return 60  # `smpquery nd`
    return 0


@dataclass
class _Dump:
    attr: str
    lid: int | None
    port: int | None
    line: int
    text: str
    host: str | None
    arg_guid: str | None
    fields: dict[str, str] = field(default_factory=dict)
    peer_of: tuple[int | None, int | None] | None = None  # (LID, port) of the switch port this is the peer dump of


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    arg_guid: str | None = None
    arg_lid: int | None = None
    dumps: list[_Dump] = []
    cur: _Dump | None = None
    descs: dict[int | None, str] = {}
    peer_next = False  # a 'Peer PortInfo:' line was seen: the next PortInfo dump is the far end of the last one
    last_port: _Dump | None = None

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        err = tool_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=err))
            continue
        m = _HDR_RE.match(line)
        if m:
            lm = _LID_RE.search(m.group("portid"))
            peer = peer_next and m.group("attr") == "Port info" and last_port is not None
            cur = _Dump(
                attr=m.group("attr"),
                # a peer dump's 'Lid N DR path ...' names the switch it was reached through, not the peer
                lid=int(lm.group("lid")) if lm and not peer else None,
                port=int(m.group("port")) if m.group("port") else None,
                line=n,
                text=line,
                host=cur_host,
                arg_guid=None if peer else arg_guid,
                peer_of=(last_port.lid, last_port.port) if peer and last_port is not None else None,
            )
            if m.group("attr") == "Port info":
                peer_next = False
                if not peer:
                    last_port = cur
            dumps.append(cur)
            continue
        m = _ND_RE.match(line)
        if m:
            descs[arg_lid] = m.group("desc")
            cur = None
            continue
        p = prompt(line)
        cmd = p[1] if p is not None else command_line(line, _TOOLS)
        if p is not None or cmd is not None:
            cur = None
            peer_next, last_port = False, None
            if p is not None and p[0]:
                cur_host = p[0]
            gm = _GUID_TOKEN_RE.search(cmd or "") if _GUID_FLAG_RE.search(cmd or "") else None
            arg_guid = norm_guid(gm.group("guid")) if gm else None
            lm2 = _LID_ARG_RE.search(" " + (cmd or ""))
            arg_lid = int(lm2.group("lid")) if lm2 and not gm else None
            continue
        m = _FIELD_RE.match(line)
        if m and cur is not None:
            cur.fields.setdefault(m.group("name").strip(), m.group("val"))
            continue
        if line.strip() == "Peer PortInfo:":
            peer_next = True
        elif line.strip().endswith("PortInfo:"):
            peer_next, last_port = False, None
        if line.strip().startswith("#") or line.strip().endswith("PortInfo:"):
            cur = None

    # node GUID per LID from NodeInfo dumps
    lid_guid: dict[int, str] = {}
    for d in dumps:
        if d.attr == "Node info":
            g = norm_guid(d.fields.get("Guid")) or d.arg_guid
            if g is not None and d.lid is not None:
                lid_guid.setdefault(d.lid, g)

    for d in dumps:
        f = d.fields
        if d.attr == "Node info":
            guid = norm_guid(f.get("Guid")) or d.arg_guid
            ntype = norm_node_type(f.get("NodeType"))
            if guid is None or ntype is None:
                problems.append(f"line {d.line}: NodeInfo dump without Guid/NodeType (cut off?)")
                continue
            records.append(
                FabricNode(
                    source=source,
                    line=d.line,
                    text=clip(d.text),
                    host=d.host,
                    guid=guid,
                    node_type=ntype,
                    description=descs.get(d.lid),
                    ports=to_int(f.get("NumPorts")),
                    lid=d.lid,
                )
            )
        elif d.attr == "Port info":
            if not f:
                problems.append(f"truncated: PortInfo dump at line {d.line} has no fields")
                continue
            ext = speed_name(f.get("LinkSpeedExtActive"))
            speed = ext or speed_name(f.get("LinkSpeedActive"))
            lid = to_int(f.get("Lid")) if f.get("Lid") is not None else d.lid
            port = d.port if d.port is not None else 0
            guid = d.arg_guid or (lid_guid.get(d.lid) if d.lid is not None else None)
            state = port_state(f.get("LinkState"))
            phys = norm_phys_state(f.get("PhysLinkState"))
            width = norm_width(f.get("LinkWidthActive"))
            if state == "Down":  # IBA C14-24.2.1: a down port's other PortInfo fields are not valid
                width = speed = None
            if state is None and phys is None:
                problems.append(f"truncated: PortInfo dump at line {d.line} has no LinkState")
            records.append(
                PortInfo(
                    source=source,
                    line=d.line,
                    text=clip(d.text),
                    host=d.host,
                    lid=lid,
                    port=port,
                    guid=guid,
                    state=state,
                    phys_state=phys,
                    width=width,
                    speed=speed,
                    sm_lid=to_int(f.get("SMLid")),
                    width_supported=f.get("LinkWidthSupported"),
                    speed_supported=f.get("LinkSpeedSupported"),
                    peer_of_lid=d.peer_of[0] if d.peer_of else None,
                    peer_of_port=d.peer_of[1] if d.peer_of else None,
                    width_enabled=f.get("LinkWidthEnabled"),
                    speed_ext_supported=f.get("LinkSpeedExtSupported"),
                )
            )
            if guid is not None:
                records.append(
                    FabricPortState(
                        source=source,
                        line=d.line,
                        text=clip(d.text),
                        host=d.host,
                        guid=guid,
                        port=port,
                        state=state,
                        phys_state=phys,
                        width=width,
                        speed=speed,
                        lid=lid,
                        description=descs.get(d.lid),
                        could_be=None,
                    )
                )
    records.sort(key=lambda r: r.line)
