"""``iblinkinfo`` (infiniband-diags): every port of every node with its link state and its peer.

Shapes (rdma-core ``infiniband-diags/iblinkinfo.c`` ``print_node_header``/``print_port``)::

    CA: n02 HCA-1:
          0xec0d9a03003d62be      4    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       2   17[  ] "MF0;SB7700:MSB7700/U1" ( )
    Switch: 0x506b4b0300820910 MF0;SB7700:MSB7700/U1:
               2    1[  ] ==(                Down/ Polling)==>             [  ] "" ( )
               2   17[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       4    1[  ] "n02 HCA-1" ( )

and ``-l`` (one self-contained line per port)::

    0x0000000000200005 "               hxa-su2-leaf-r2"      9   33[  ] ==( 4X  2.5 Gbps Active/  LinkUp)==>  0x0000000000200000      2    4[  ] "hxa-spine01" (Could be 12X Could be 10.0 Gbps)

Records: a :class:`~diagnose.parsers._fabric.FabricLink` per connected port, a
:class:`~diagnose.parsers._fabric.FabricPortState` per port without a peer (Down/Polling, ``"Port not available"``)
and per connected port whose last parenthesis holds a ``Could be ...`` hint (``could_be``), and a
:class:`~diagnose.parsers._fabric.FabricNode` per ``CA:``/``Switch:``/``Router:`` header (default mode).

GUIDs: switch lines carry the switch GUID (header, or the ``-l`` column); HCA lines carry the *port* GUID (equal to
the node GUID on mlx5, node GUID + port on mlx4). The default mode does not print the peer's GUID: it is resolved
from the peer LID through the LIDs seen in the same output; a peer whose LID is not in the output (partial scan,
truncated capture) yields a FabricPortState and a problem instead of a link.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import (
    PORT_LINE_RE,
    FabricLink,
    FabricNode,
    FabricPortState,
    LinkText,
    RemoteEnd,
    parse_link_text,
    parse_remote_text,
)
from diagnose.parsers._ib import norm_guid, shell_line
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "iblinkinfo"

_HEADER_RE = re.compile(
    r"^\s*(?:[<>]\s+)?(?P<type>CA|Switch|Router):\s+(?:(?P<guid>0x[0-9a-fA-F]{1,16})\s+)?(?P<desc>.*?):\s*$"
)
_TYPES = {"CA": "CA", "Switch": "SW", "Router": "RT"}
_TOOLS = ("iblinkinfo", "iblinkinfo.pl")

_SNIFF_PORT = re.compile(
    r"^[ \t]*(?:0x[0-9a-fA-F]{16}[ \t]+)?(?:\"[^\"\n]*\"[ \t]+)?\d+[ \t]+\d+\[[^\]\n]*\][ \t]*==\(.*\)==>",
    re.MULTILINE,
)
_SNIFF_HEADER = re.compile(r"^(?:CA|Switch|Router): .*:[ \t]*$", re.MULTILINE)
_SNIFF_FOREIGN = re.compile(r"^\s*(?:Errors for |GUID 0x[0-9a-fA-F]+ port (?:\d+|ALL):|Link info:)", re.MULTILINE)


def sniff(head: str) -> int:
    ports = len(_SNIFF_PORT.findall(head))
    if not ports:
        return 0
    if _SNIFF_FOREIGN.search(head) or "Link info:" in head:
        return 10  # ibqueryerrors -r prints the same link string after "Link info:"
    headers = len(_SNIFF_HEADER.findall(head))
    if headers and ports:
        return 95
    return 90 if ports >= 2 else 70


@dataclass
class _Node:
    node_type: str
    guid: str | None
    desc: str
    line: int
    text: str
    host: str | None
    lid: int | None = None
    emitted: bool = False


@dataclass
class _Pending:
    line: int
    text: str
    host: str | None
    guid: str
    port: int
    lid: int
    desc: str | None
    link: LinkText
    remote: RemoteEnd


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    node: _Node | None = None
    node_ports = 0
    lid_guid: dict[int, str] = {}
    pending: list[_Pending] = []
    out: list[Record] = []
    bad: list[tuple[int, str]] = []
    last_n = 0

    def close_node(at_eof: bool) -> None:
        nonlocal node
        if node is not None and node_ports == 0 and at_eof:
            problems.append(f"truncated: block for {node.desc!r} ends early (no port shown)")
        node = None

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        last_n = n
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, out)
        if kind is not None:
            if kind == "boundary":
                close_node(False)
            continue
        m = _HEADER_RE.match(line)
        if m and "==(" not in line:
            close_node(False)
            node = _Node(
                node_type=_TYPES[m.group("type")],
                guid=norm_guid(m.group("guid")),
                desc=m.group("desc").strip(),
                line=n,
                text=line,
                host=cur_host,
            )
            node_ports = 0
            continue
        m = PORT_LINE_RE.match(line)
        if not m:
            if "==(" in line or ")==>" in line:
                bad.append((n, line.strip()[:80]))
            continue
        link = parse_link_text(m.group("link"))
        remote = parse_remote_text(m.group("remote"))
        if link is None or remote is None:
            problems.append(f"line {n}: unparseable link {line.strip()[:80]!r}")
            continue
        lid = int(m.group("lid"))
        port = int(m.group("port"))
        line_guid = norm_guid(m.group("guid"))
        if m.group("desc") is not None:  # -l line mode
            guid = line_guid
            desc: str | None = m.group("desc").strip()
        elif node is not None:
            node_ports += 1
            guid = node.guid if node.node_type == "SW" and node.guid is not None else line_guid
            desc = node.desc
            if not node.emitted and guid is not None:
                out.append(
                    FabricNode(
                        source=source,
                        line=node.line,
                        text=clip(node.text),
                        host=node.host,
                        guid=node.guid or guid,
                        node_type=node.node_type,
                        description=node.desc or None,
                        ports=None,
                        lid=lid,
                    )
                )
                node.emitted = True
        else:
            guid = line_guid
            desc = None
        if guid is None:
            problems.append(f"line {n}: port line without a GUID and outside a node block")
            continue
        lid_guid.setdefault(lid, guid)
        pending.append(
            _Pending(line=n, text=line, host=cur_host, guid=guid, port=port, lid=lid, desc=desc, link=link, remote=remote)
        )
    close_node(True)
    for n, snippet in bad:
        prefix = "truncated: last " if n == last_n else ""
        problems.append(f"{prefix}line {n}: unparseable port line {snippet!r}")

    for pd in pending:
        link, remote = pd.link, pd.remote
        peer_guid = None
        if remote.connected:
            peer_guid = remote.guid or (lid_guid.get(remote.lid) if remote.lid is not None else None)
            if peer_guid is None:
                problems.append(
                    f"line {pd.line}: peer LID {remote.lid} of {pd.guid} port {pd.port} is not in this output; "
                    "kept as a port state"
                )
        if remote.connected and peer_guid is not None and remote.port is not None:
            out.append(
                FabricLink(
                    source=source,
                    line=pd.line,
                    text=clip(pd.text),
                    host=pd.host,
                    guid=pd.guid,
                    port=pd.port,
                    peer_guid=peer_guid,
                    peer_port=remote.port,
                    width=link.width,
                    speed=link.speed,
                    state=link.state,
                    phys_state=link.phys_state,
                    lid=pd.lid,
                    peer_lid=remote.lid,
                    description=pd.desc,
                    peer_description=remote.description,
                )
            )
        if not remote.connected or peer_guid is None or remote.could_be:
            out.append(
                FabricPortState(
                    source=source,
                    line=pd.line,
                    text=clip(pd.text),
                    host=pd.host,
                    guid=pd.guid,
                    port=pd.port,
                    state=link.state,
                    phys_state=link.phys_state,
                    width=link.width,
                    speed=link.speed,
                    lid=pd.lid,
                    description=pd.desc,
                    could_be=remote.could_be,
                )
            )
    out.sort(key=lambda r: r.line)
    records.extend(out)
