"""``ibnetdiscover`` (infiniband-diags): the fabric topology, in its two text shapes.

Ports report (``ibnetdiscover -p``, rdma-core ``infiniband-diags/ibnetdiscover.c`` ``dump_ports_report``): one line
per port, ``%2s %5d %2d 0x%016x %s %s`` then either `` - <peer type> <peer lid> <peer port> <peer GUID> ( '<desc>' -
'<peer desc>' )`` or, for a port without peer, padding and ``'<desc>'``::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

Topology file (default output, ``out_switch``/``out_ca``/``out_switch_port``/``out_ca_port``)::

    vendid=0x8f1
    devid=0x5a06
    sysimgguid=0x5442ba00003000
    switchguid=0x5442ba00003080(5442ba00003080)
    Switch  24 "S-005442ba00003080"         # "ISR9024 Voltaire" base port 0 lid 6 lmc 0
    [22]    "H-0008f10403961354"[1](8f10403961355)         # "MT23108 InfiniHost Mellanox Technologies" lid 4 4xSDR
    ...
    caguid=0x8f10403960984
    Ca      2 "H-0008f10403960984"          # "MT23108 InfiniHost Mellanox Technologies"
    [1](8f10403960985)     "S-0008f10400410015"[6]         # lid 16 lmc 1 "SW-6IB4 Voltaire" lid 3 4xSDR

Records: :class:`~diagnose.parsers._fabric.FabricNode` per ``Switch``/``Ca``/``Rt`` line (node GUID from the
``S-``/``H-``/``R-`` name) and a :class:`~diagnose.parsers._fabric.FabricLink` per port line (each node lists its
own ports, so a cable appears once from each end). The ports report gives one FabricLink per connected port line
and a :class:`~diagnose.parsers._fabric.FabricPortState` per port without peer; its GUIDs are *port* GUIDs (equal
to the node GUID for switches and mlx5 HCAs). Its descriptions are stripped of the padding spaces some switches
put inside the quotes (``' 5FB0406-spine-IB02 '``); old builds print the description of an unconnected port
without quotes. Speeds: ``???`` (down port / unknown) -> None. The topology file does not show port state; its
links are connected ports, state None.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import FabricLink, FabricNode, FabricPortState, norm_width, speed_name
from diagnose.parsers._ib import iter_lines, norm_guid, shell_line

FORMAT = "ibnetdiscover"

_T = r"(?:CA|SW|RT)"
_PORTS_RE = re.compile(
    rf"^\s*(?P<type>{_T})\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]{{1,16}})\s+"
    r"(?P<width>\d+[xX])\s+(?P<speed>\S+)"
    rf"(?:\s+-\s+(?P<ptype>{_T})\s+(?P<plid>\d+)\s+(?P<pport>\d+)\s+(?P<pguid>0x[0-9a-fA-F]{{1,16}})"
    r"\s+\(\s*'(?P<desc>.*)'\s+-\s+'(?P<pdesc>.*)'\s*\)"
    r"|\s+(?P<alone>.*))?\s*$"
)
_NODE_RE = re.compile(
    r"^\s*(?P<kind>Switch|Ca|Rt)\s+(?P<nports>\d+)\s+\"(?P<pfx>[SHR])-(?P<guid>[0-9a-fA-F]{1,16})\"\s*"
    r"(?:#\s*\"(?P<desc>.*?)\"(?P<rest>.*))?$"
)
_BASE_LID_RE = re.compile(r"\bport\s+0\s+lid\s+(?P<lid>\d+)")
_LINK_RE = re.compile(
    r"^\s*\[(?P<port>\d+)\](?:\[[^\]]*\])?\s*(?:\((?P<pguid>[0-9a-fA-F]{1,16})\))?\s*"
    r"\"(?P<rpfx>[SHR])-(?P<rguid>[0-9a-fA-F]{1,16})\"\[(?P<rport>\d+)\](?:\[[^\]]*\])?"
    r"\s*(?:\((?P<rpguid>[0-9a-fA-F]{1,16})\))?\s*(?:#\s*(?P<comment>.*))?$"
)
# switch port: # "desc" lid 4 4xSDR      CA port: # lid 16 lmc 1 "desc" lid 3 4xSDR
_SW_COMMENT_RE = re.compile(r"^\"(?P<rdesc>.*)\"\s+lid\s+(?P<rlid>\d+)\s+(?P<ws>\d+x\S+)")
_CA_COMMENT_RE = re.compile(
    r"^lid\s+(?P<lid>\d+)\s+lmc\s+\d+\s+\"(?P<rdesc>.*)\"\s+lid\s+(?P<rlid>\d+)\s+(?P<ws>\d+x\S+)"
)
_WS_RE = re.compile(r"^(?P<w>\d+x)(?P<s>.+)$")
_TYPES = {"Switch": "SW", "Ca": "CA", "Rt": "RT", "S": "SW", "H": "CA", "R": "RT"}
_TOOLS = ("ibnetdiscover",)

_SNIFF_PORTS = re.compile(rf"^[ \t]*{_T}[ \t]+\d+[ \t]+\d+[ \t]+0x[0-9a-fA-F]{{16}}[ \t]+\d+x[ \t]+\S+", re.MULTILINE)
_SNIFF_NODE = re.compile(r"^(?:Switch|Ca|Rt)[ \t]+\d+[ \t]+\"[SHR]-[0-9a-fA-F]+\"", re.MULTILINE)
_SNIFF_IDS = re.compile(r"^(?:switchguid|caguid|rtguid|sysimgguid|vendid|devid)=0x[0-9a-fA-F]+", re.MULTILINE)
_SNIFF_LINK = re.compile(r"^\[\d+\](?:\([0-9a-fA-F]+\))?[ \t]+\"[SHR]-[0-9a-fA-F]+\"\[\d+\]", re.MULTILINE)


def sniff(head: str) -> int:
    ports = len(_SNIFF_PORTS.findall(head))
    nodes = len(_SNIFF_NODE.findall(head))
    ids = len(_SNIFF_IDS.findall(head))
    links = len(_SNIFF_LINK.findall(head))
    if nodes and (ids or links):
        return 95
    if links >= 2 or (ids >= 2 and links):
        return 60  # topology file cut before/after node lines
    if ports >= 2:
        return 95
    if ports == 1:
        return 70
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        _parse(text, source, host, records, problems)
    except Exception as exc:  # pragma: no cover - defensive
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _ws(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    m = _WS_RE.match(text)
    if not m:
        return None, None
    return norm_width(m.group("w")), speed_name(m.group("s"))


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    node_guid: str | None = None
    node_type: str | None = None
    node_desc: str | None = None
    node_lid: int | None = None
    node_line = 0
    node_links = 0
    last_content: tuple[int, str] | None = None
    pending_node: dict | None = None
    bad_comments: list[tuple[int, str]] = []

    def flush_node() -> None:
        nonlocal pending_node
        if pending_node is not None:
            pn = pending_node
            records.append(
                FabricNode(
                    source=source, line=pn["line"], text=clip(pn["text"]), host=pn["host"], guid=pn["guid"],
                    node_type=pn["node_type"], description=pn["description"], ports=pn["ports"], lid=pn["lid"],
                )
            )
        pending_node = None

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        last_content = (n, line)
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind is not None:
            if kind == "boundary":
                node_guid = None
            continue
        m = _PORTS_RE.match(line)
        if m:
            _ports_line(m, n, line, cur_host, source, records, problems)
            continue
        m = _NODE_RE.match(line)
        if m:
            node_guid = norm_guid(m.group("guid"))
            node_type = _TYPES[m.group("kind")]
            node_desc = m.group("desc")
            rest = m.group("rest") or ""
            lm = _BASE_LID_RE.search(rest)
            node_lid = int(lm.group("lid")) if lm else None
            node_line = n
            node_links = 0
            flush_node()
            if node_guid is not None:
                pending_node = dict(
                    line=n, text=line, host=cur_host, guid=node_guid, node_type=node_type, description=node_desc,
                    ports=int(m.group("nports")), lid=node_lid,
                )
            continue
        m = _LINK_RE.match(line)
        if m:
            if node_guid is None:
                problems.append(f"line {n}: port line outside a node block (node line missing or cut off)")
                continue
            node_links += 1
            comment = (m.group("comment") or "").strip()
            lid: int | None = node_lid
            if node_type == "SW":
                cm = _SW_COMMENT_RE.match(comment)
            else:
                cm = _CA_COMMENT_RE.match(comment)
                if cm:
                    lid = int(cm.group("lid"))
            if cm is None:
                bad_comments.append((n, comment[:60]))
            elif lid is not None and pending_node is not None and pending_node["lid"] is None:
                pending_node["lid"] = lid  # a CA's LID is only on its port lines
            width, speed = _ws(cm.group("ws") if cm else None)
            peer_guid = norm_guid(m.group("rguid"))
            if peer_guid is None:
                continue
            records.append(
                FabricLink(
                    source=source,
                    line=n,
                    text=clip(line),
                    host=cur_host,
                    guid=node_guid,
                    port=int(m.group("port")),
                    peer_guid=peer_guid,
                    peer_port=int(m.group("rport")),
                    width=width,
                    speed=speed,
                    state=None,
                    phys_state=None,
                    lid=lid,
                    peer_lid=int(cm.group("rlid")) if cm else None,
                    description=node_desc,
                    peer_description=cm.group("rdesc") if cm else None,
                )
            )
            continue
    flush_node()
    records.sort(key=lambda r: r.line)
    for n, snippet in bad_comments:
        cut = last_content is not None and n == last_content[0]
        problems.append(f"{'truncated: last ' if cut else ''}line {n}: unparseable port comment {snippet!r}")
    if last_content is not None:
        n, line = last_content
        s = line.strip()
        if node_guid is not None and node_links == 0 and n == node_line and node_type == "SW":
            problems.append(f"truncated: switch block at line {n} ends early (no port shown)")
        elif s.startswith("[") and not _LINK_RE.match(line):
            problems.append(f"truncated: last line {n} is cut ({s[:60]!r})")
        elif (s.startswith(("CA ", "SW ", "RT ")) and not _PORTS_RE.match(line)) or s.endswith(" -"):
            problems.append(f"truncated: last line {n} is cut ({s[:60]!r})")


def _clean_desc(value: str | None) -> str | None:
    if value is None:
        return None
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] == "'":
        v = v[1:-1].strip()
    return v or None


def _ports_line(
    m: re.Match[str], n: int, line: str, host: str | None, source: str, records: list[Record], problems: list[str]
) -> None:
    guid = norm_guid(m.group("guid"))
    if guid is None:
        return
    width = norm_width(m.group("width"))
    speed = speed_name(m.group("speed"))
    lid = int(m.group("lid"))
    port = int(m.group("port"))
    if m.group("pguid"):
        peer_guid = norm_guid(m.group("pguid"))
        if peer_guid is None:
            return
        records.append(
            FabricLink(
                source=source,
                line=n,
                text=clip(line),
                host=host,
                guid=guid,
                port=port,
                peer_guid=peer_guid,
                peer_port=int(m.group("pport")),
                width=width,
                speed=speed,
                state=None,
                phys_state=None,
                lid=lid,
                peer_lid=int(m.group("plid")),
                description=_clean_desc(m.group("desc")),
                peer_description=_clean_desc(m.group("pdesc")),
            )
        )
        return
    alone = m.group("alone")
    if alone is not None and alone.strip().startswith("- "):
        problems.append(f"line {n}: unparseable peer part {alone.strip()[:60]!r}")
    records.append(
        FabricPortState(
            source=source,
            line=n,
            text=clip(line),
            host=host,
            guid=guid,
            port=port,
            state=None,
            phys_state=None,
            width=width,
            speed=speed,
            lid=lid,
            description=_clean_desc(alone),
            could_be=None,
        )
    )
