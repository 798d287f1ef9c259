"""``ibroute`` and ``dump_lfts.sh`` / ``dump_fts`` (infiniband-diags): switch unicast forwarding tables (LFTs).

Shape (rdma-core ``infiniband-diags/ibroute.c`` and ``dump_fts.c``, ``dump_unicast_tables``)::

    Unicast lids [0x0-0x16f] of switch Lid 17 guid 0x00066a00ec002eec (ibcore1 L109):
      Lid  Out   Destination
           Port     Info
    0x0001 028 : (Channel Adapter portguid 0x001175000077ed40: 'hype355 qib0')
    0x0002 026 : (Switch portguid 0x00066a00ec002d00: 'ibcore1 L113')
    0x0003 026 : (path #2 out of 2: portguid 0x00066a00ec002d00)
    171 valid lids dumped

The switch is ``Lid N`` or ``DR path slid 0; dlid 0; 0,1,19`` (``portid2str``); rows are
``printf("0x%04x %03u %s\\n", lid, outport, dump_lid(...))`` where the info is ``: (<type> portguid <guid>: '<desc>')``,
``: (path #k out of n[: portguid g])`` for LMC > 0 lids, ``: (illegal port)`` (only with ``-a``; skipped),
``: (unknown node and type)`` / ``: (node info not available fabric scan)``, or empty with ``-n``. ``dump_lfts.sh``
(now a wrapper of ``dump_fts``) prints one such block per switch and a ``*** WARNING ***`` trailer. OpenSM's own
``opensm-lfts.dump`` has the same header (name in single quotes) and rows ``0x0001 001 # Channel Adapter portguid
0x...: 'desc'``; it is read too. Multicast blocks (``Multicast mlids [...]``) are skipped.

OpenSM's older routing dump, which ibdiagnet also writes as ``ibdiagnet2.fdbs`` (a real file in ibutils
``ibdm/Clusters/osm.fdbs``; ``UNREACHABLE`` rows quoted in a UCAR parser, see ``tests/data/ibroute/README.md``)::

    osm_ucast_mgr_dump_ucast_routes: Switch 0x0002c90109fb0000
    LID    : Port : Hops : Optimal
    0x0001 : 005  : 05   : yes
    0x0002 : UNREACHABLE

names neither the switch nor the destinations (the fabric model resolves the LIDs); it has no footer, and its
``UNREACHABLE`` rows (no route to that LID) become :class:`~diagnose.parsers._fabric.ToolMessage` errors.

Records: one :class:`~diagnose.parsers._fabric.LftEntry` per valid row. A block whose ``N valid lids dumped``
footer is missing (a cut paste) or disagrees with the rows read is reported in ``problems``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import LftEntry, ToolMessage, norm_node_type
from diagnose.parsers._ib import norm_guid, shell_line
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibroute"

_TOOLS = ("ibroute", "dump_lfts.sh", "dump_lfts", "dump_fts")
_HDR_RE = re.compile(
    r"^\s*Unicast\s+lids\s+\[(?:0x)?(?P<lo>[0-9a-fA-F]+)-(?:0x)?(?P<hi>[0-9a-fA-F]+)\]\s+of\s+switch\s+"
    r"(?P<portid>.*?)\s*guid\s+0x(?P<guid>[0-9a-fA-F]{1,16})\s*(?:\((?P<name>.*)\))?\s*:\s*$"
)
_MCAST_RE = re.compile(r"^\s*Multicast\s+mlids\s+\[")
_PORTID_LID_RE = re.compile(r"^Lid\s+(?P<lid>\d+)\b")
_COLHDR_RE = re.compile(r"^\s*(?:Lid\s+Out\s+Destination|Port\s+Info)\s*$")
_ROW_RE = re.compile(r"^\s*0x(?P<lid>[0-9a-fA-F]{1,4})\s+(?P<port>\d{3})(?:\s+(?P<sep>[:#])\s*(?P<info>.*?))?\s*$")
_FOOT_RE = re.compile(r"^\s*(?P<n>\d+)\s+(?:valid\s+)?lids\s+dumped\s*$")
_DEST_RE = re.compile(
    r"^\(?\s*(?P<type>Channel Adapter|Switch|Router)\s+portguid\s+0x(?P<guid>[0-9a-fA-F]{1,16})\s*:\s*'(?P<desc>.*)'\s*\)?$"
)
_PATH_RE = re.compile(r"^\(\s*path\s+#\d+\s+(?:out\s+of\s+\d+(?::\s*portguid\s+0x(?P<guid>[0-9a-fA-F]{1,16}))?"
                      r"|-\s+illegal\s+port)\s*\)$")
_ILLEGAL_RE = re.compile(r"^\(\s*(?:reserved LID - )?illegal port\s*\)$")
_WARN_TRAILER_RE = re.compile(r"^\s*\*\*\*\s*WARNING\s*\*\*\*")
_FDB_HDR_RE = re.compile(r"^\s*osm_ucast_mgr_dump_ucast_routes:\s+Switch\s+0x(?P<guid>[0-9a-fA-F]{1,16})\s*$")
_FDB_SKIP_RE = re.compile(r"^\s*(?:LID\s*:\s*Port\s*:\s*Hops\s*:\s*Optimal|PLFT_NUM:\s*\d+)\s*$")
_FDB_ROW_RE = re.compile(r"^\s*0x(?P<lid>[0-9a-fA-F]{1,4})\s*:\s*(?:(?P<port>\d+)\s*:\s*\d+\s*:\s*\w+|(?P<unr>UNREACHABLE))\s*$")

_SNIFF_HDR = re.compile(r"^[ \t]*Unicast lids \[(?:0x)?[0-9a-fA-F]+-(?:0x)?[0-9a-fA-F]+\] of switch ", re.MULTILINE)
_SNIFF_ROW = re.compile(r"^0x[0-9a-fA-F]{4} \d{3} (?::|#) (?:\((?:Channel Adapter|Switch|Router|path #)"
                        r"|(?:Channel Adapter|Switch|Router) portguid)", re.MULTILINE)


_SNIFF_FDB = re.compile(r"^[ \t]*osm_ucast_mgr_dump_ucast_routes: Switch 0x", re.MULTILINE)


def sniff(head: str) -> int:
    if _SNIFF_HDR.search(head) or _SNIFF_FDB.search(head):
        return 95
    if len(_SNIFF_ROW.findall(head)) >= 2:
        return 70  # rows of a table whose header was cut off
    return 0


@dataclass
class _Block:
    guid: str
    lid: int | None
    name: str | None
    line: int
    rows: int = 0
    footer: bool = False
    fdb: bool = False  # OpenSM's osm_ucast_mgr_dump_ucast_routes layout


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _close(block: _Block | None, problems: list[str]) -> None:
    if block is None or block.footer:
        return
    problems.append(f"line {block.line}: table of switch {block.guid} ends without its 'lids dumped' line "
                    f"({block.rows} rows read; cut?)")


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    block: _Block | None = None
    in_mcast = False
    last: tuple[str | None, str | None, str | None] = (None, None, None)  # kind, guid, name of the last base row
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        h = _HDR_RE.match(line)
        if h is not None:
            _close(block, problems)
            pid = _PORTID_LID_RE.match(h.group("portid"))
            name = h.group("name")
            if name is not None:
                name = name.strip()
                if len(name) >= 2 and name[0] == name[-1] == "'":
                    name = name[1:-1]
            block = _Block(guid=norm_guid("0x" + h.group("guid")) or "0x" + h.group("guid").lower().zfill(16),
                           lid=int(pid.group("lid")) if pid else None, name=name or None, line=n)
            in_mcast = False
            last = (None, None, None)
            continue
        fh = _FDB_HDR_RE.match(line)
        if fh is not None:
            _close(block, problems)
            block = _Block(guid=norm_guid("0x" + fh.group("guid")) or "0x" + fh.group("guid").lower().zfill(16),
                           lid=None, name=None, line=n, footer=True, fdb=True)  # no footer to check
            in_mcast = False
            continue
        if block is not None and block.fdb and (fr := _FDB_ROW_RE.match(line)):
            lid = int(fr.group("lid"), 16)
            if fr.group("unr"):
                records.append(ToolMessage(source=source, line=n, text=clip(line), host=cur_host, tool="opensm",
                                           level="error", stage=None,
                                           message=f"LID {lid} UNREACHABLE from switch {block.guid}"))
            else:
                records.append(LftEntry(source=source, line=n, text=clip(line), host=cur_host,
                                        switch_guid=block.guid, switch_lid=None, switch_name=None, dest_lid=lid,
                                        out_port=int(fr.group("port")), dest_kind=None, dest_guid=None,
                                        dest_name=None))
            continue
        if _FDB_SKIP_RE.match(line):
            continue
        if _MCAST_RE.match(line):
            _close(block, problems)
            block, in_mcast = None, True
            continue
        if _COLHDR_RE.match(line) or _WARN_TRAILER_RE.match(line):
            continue
        f = _FOOT_RE.match(line)
        if f is not None:
            if block is not None:
                block.footer = True
                if "valid" in line and int(f.group("n")) != block.rows:  # opensm's dump prints its top LID
                    problems.append(f"line {n}: switch {block.guid}: footer says {f.group('n')} lids, "
                                    f"{block.rows} rows read")
                block = None
            in_mcast = False
            continue
        r = _ROW_RE.match(line)
        if r is not None and block is not None and not in_mcast:
            info = (r.group("info") or "").strip()
            block.rows += 1  # the footer counts every row printed, illegal ones too (-a)
            if _ILLEGAL_RE.match(info) or (info.startswith("(path") and "illegal" in info):
                continue
            kind = guid = name = None
            d = _DEST_RE.match(info)
            if d is not None:
                kind = norm_node_type(d.group("type"))
                guid = norm_guid("0x" + d.group("guid"))
                name = d.group("desc").strip() or None
                last = (kind, guid, name)
            elif _PATH_RE.match(info):
                kind, guid, name = last
            records.append(
                LftEntry(source=source, line=n, text=clip(line), host=cur_host, switch_guid=block.guid,
                         switch_lid=block.lid, switch_name=block.name, dest_lid=int(r.group("lid"), 16),
                         out_port=int(r.group("port")), dest_kind=kind, dest_guid=guid, dest_name=name)
            )
            continue
        if in_mcast:
            continue
        kind_, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind_ == "boundary":
            _close(block, problems)
            block = None
        elif kind_ is None and len(problems) < 20:
            problems.append(f"line {n}: not an LFT line: {clip(line.strip())}")
    _close(block, problems)
