"""The link list ``ibdiagnet2.lst`` / ``ibdiagnet.lst`` (ibutils ``subnet.lst``): every cable of the fabric, one a line.

ibdiagnet writes it with each run (ibutils2 ``ibdiag_file_names.h``: ``LST_FILE "ibdiagnet2.lst"``); ibdm's
``IBFabric::parseSubnetLine`` (ibutils ``ibdm/ibdm/Fabric.cpp``) reads it back and fixes its grammar::

    { CA Ports:02 SystemGUID:0002c90300165e63 NodeGUID:0002c90300165e60 PortGUID:0002c90300165e61 VenID:000002c9
      DevID:1003 Rev:00000000 {c0104 HCA-1} LID:0005 PN:01 } { SW Ports:24 SystemGUID:0002c90300688830 ... LID:0002
      PN:14 } PHY=4x LOG=ACT SPD=2.5

(one line). Each end is a brace group: the node type (``CA``/``SW``), its port count, system, node and port GUIDs,
vendor, device and revision, the node description in braces (absent on some installations), the port's LID and
its port number. ``Ports``, ``LID`` and ``PN`` are hexadecimal (``PN:14`` is port 20). After both ends: the
link's physical width (``PHY=4x``), logical state (``LOG=ACT``/``INI``/``ARM``/``DOWN``) and speed (``SPD=``, one
of ibdm's ``speed2char`` strings: ``2.5 5 10 14 25 50 100 200 FDR10 EDR20``, the lane rate in Gb/s; absent means
2.5). A real line is quoted in ``tests/data/ibdiagnet_lst/README.md``.

Records: one :class:`~diagnose.parsers._fabric.FabricLink` per line (the first end as the local one: the list
names each cable once) and one :class:`~diagnose.parsers._fabric.FabricNode` per node the first time it appears,
with the *node* GUID (the port GUID of an mlx4 HCA port differs).
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import FabricLink, FabricNode, ibdiag_speed, norm_node_type, norm_width
from diagnose.parsers._ib import norm_guid, norm_state
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibdiagnet_lst"

_END = (  # one end; "@" stands for the group-name prefix of that end
    r"\{\s*(?P<@type>CA|SW|RT)\s+Ports:(?P<@ports>[0-9a-fA-F]+)\s+SystemGUID:(?P<@sys>[0-9a-fA-F]+)\s+"
    r"NodeGUID:(?P<@node>[0-9a-fA-F]+)\s+PortGUID:(?P<@pg>[0-9a-fA-F]+)\s+VenID:[0-9a-fA-F]+\s+"
    r"DevID:(?P<@dev>[0-9a-fA-F]+)\s+Rev:[0-9a-fA-F]+\s+(?:\{(?P<@desc>[^{}]*)\}\s+)?"
    r"LID:(?P<@lid>[0-9a-fA-F]+)\s+PN:(?P<@pn>[0-9a-fA-F]+)\s*\}"
)
_LINE_RE = re.compile(
    r"^\s*" + _END.replace("@", "a") + r"\s*" + _END.replace("@", "b")
    + r"\s*PHY=(?P<phy>\w+)\s+LOG=(?P<log>\w+)(?:\s+SPD=(?P<spd>\S+))?\s*$"
)
_SNIFF_RE = re.compile(r"\{ ?(?:CA|SW) Ports:[0-9a-fA-F]+ SystemGUID:[0-9a-fA-F]+ NodeGUID:[0-9a-fA-F]+ ")
# ibdm portstate2char: DOWN INI ARM ACT (a link line always has a physical link, so LinkUp unless DOWN)
_STATE = {"ACT": "Active", "INI": "Init", "ARM": "Armed", "DOWN": "Down", "DWN": "Down"}


def sniff(head: str) -> int:
    n = len(_SNIFF_RE.findall(head))
    if n == 0:
        return 0
    return 95 if "PHY=" in head and "LOG=" in head else 70


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _guid(hexdigits: str) -> str:
    return norm_guid("0x" + hexdigits) or "0x" + hexdigits.lower()[-16:].zfill(16)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    seen: set[str] = set()
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        m = _LINE_RE.match(line)
        if m is None:
            if "{" in line and len(problems) < 20:
                problems.append(f"line {n}: not a link line: {clip(line.strip())}")
            continue
        t = clip(line)
        for p in ("a", "b"):
            g = _guid(m.group(p + "node"))
            if g in seen:
                continue
            seen.add(g)
            records.append(FabricNode(
                source=source, line=n, text=t, host=host, guid=g,
                node_type=norm_node_type(m.group(p + "type")) or m.group(p + "type"),
                description=(m.group(p + "desc") or "").strip() or None, ports=int(m.group(p + "ports"), 16),
                lid=int(m.group(p + "lid"), 16) if m.group(p + "type") == "SW" else None,
            ))
        log = m.group("log").upper()
        state = _STATE.get(log) or norm_state(log)
        records.append(FabricLink(
            source=source, line=n, text=t, host=host,
            guid=_guid(m.group("anode")), port=int(m.group("apn"), 16),
            peer_guid=_guid(m.group("bnode")), peer_port=int(m.group("bpn"), 16),
            width=norm_width(m.group("phy")), speed=ibdiag_speed(m.group("spd") or "2.5"),
            state=state, phys_state="LinkUp" if state != "Down" else None,
            lid=int(m.group("alid"), 16), peer_lid=int(m.group("blid"), 16),
            description=(m.group("adesc") or "").strip() or None,
            peer_description=(m.group("bdesc") or "").strip() or None,
        ))
