"""``ibqueryerrors`` (infiniband-diags): PMA error counters above threshold, fabric-wide.

Shape (rdma-core ``infiniband-diags/ibqueryerrors.c``: ``print_results``, ``print_port_config``,
``print_summary``)::

    Errors for "dl380g7 mlx4_0"
       GUID 0x7cfe900300179b31 port 1: [VL15Dropped == 14] [PortXmitWait == 4294967295]
    Errors for 0x2c903006e29b0 "MF0;ys23ib4:SX6036/U1"
       GUID 0x2c903006e29b0 port ALL: [LinkErrorRecoveryCounter == 15] [LinkDownedCounter == 48]
       GUID 0x2c903006e29b0 port 5: [SymbolErrorCounter == 65535] [LinkErrorRecoveryCounter == 8]
           Link info:      2   5[  ] ==( 4X  25.78125 Gbps Active/  LinkUp)==>  0x0002c903000e0b72     15    1[  ] "exe0002 HCA-1" ( )

    ## Summary: 4 nodes checked, 4 bad nodes found
    ##          43 ports checked, 14 ports have errors beyond threshold

``Errors for 0x<guid> "<desc>"`` introduces a switch (port-0 GUID), ``Errors for "<desc>"`` a CA or router;
``Data Counters for ...`` (``--data``) the data counters. Counter entries are ``[Name == value]``, or
``[Name == value (1.234GB)]`` when the 64-bit (extended) counters were read. ``port ALL`` is the switch-wide
aggregate (``port=None``). ``Link info:`` lines (``-r``/``--report-port``) describe the port's cable.

Records: :class:`~diagnose.parsers.perfquery.PortCounter` per counter (canonical names; ``guid`` is the switch
GUID for switches and the printed *port* GUID for CAs, whose node GUID the tool does not print; ``lid`` from the
``Link info`` line when present), :class:`~diagnose.parsers._fabric.FabricLink` (or ``FabricPortState`` for a
port without peer) per ``Link info`` line, and :class:`~diagnose.parsers._fabric.ToolMessage` per ``##`` trailer
line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import (
    PORT_LINE_RE,
    FabricLink,
    FabricPortState,
    ToolMessage,
    parse_link_text,
    parse_remote_text,
)
from diagnose.parsers._ib import ToolError, norm_guid, tool_error
from diagnose.parsers._lines import command_line, iter_lines, prompt
from diagnose.parsers.base import guarded_parse
from diagnose.parsers.perfquery import PortCounter

FORMAT = "ibqueryerrors"

_HEADER_RE = re.compile(
    r"^\s*(?P<kind>Errors|Data Counters) for\s+(?:(?P<guid>0x[0-9a-fA-F]{1,16})\s+)?\"(?P<desc>.*)\"\s*$"
)
_PORT_RE = re.compile(r"^\s*GUID\s+(?P<guid>0x[0-9a-fA-F]{1,16})\s+port\s+(?P<port>\d+|ALL):(?P<rest>.*)$")
_ENTRY_RE = re.compile(r"\[\s*(?P<name>[A-Za-z][A-Za-z0-9_]*)\s*==\s*(?P<val>\d+)\s*(?:\((?P<human>[^)]*)\))?\s*\]")
_LINK_INFO_RE = re.compile(r"^\s*Link info:\s*(?P<rest>.*)$")
_TRAILER_RE = re.compile(r"^\s*##\s*(?P<msg>.*?)\s*$")
_TOOLS = ("ibqueryerrors", "ibqueryerrors.pl")

_SNIFF_HDR = re.compile(r"^[ \t]*(?:Errors|Data Counters) for (?:0x[0-9a-fA-F]+ )?\"", re.MULTILINE)
_SNIFF_PORT = re.compile(r"^[ \t]*GUID 0x[0-9a-fA-F]+ port (?:\d+|ALL):[ \t]*\[", re.MULTILINE)
_SNIFF_SUMMARY = re.compile(r"^## Summary: \d+ nodes checked, \d+ bad nodes found", re.MULTILINE)


def sniff(head: str) -> int:
    hdrs = len(_SNIFF_HDR.findall(head))
    ports = len(_SNIFF_PORT.findall(head))
    summary = bool(_SNIFF_SUMMARY.search(head))
    if (hdrs and ports) or (summary and (hdrs or ports)):
        return 95
    if summary:
        return 80
    if ports >= 2:
        return 60  # port lines whose node header was cut off
    return 0


@dataclass
class _Block:
    guid: str | None
    desc: str
    data: bool
    line: int


@dataclass
class _PortLine:
    line: int
    text: str
    host: str | None
    guid: str
    port: int | None
    entries: list[tuple[str, int, bool]] = field(default_factory=list)
    lid: int | None = None


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    block: _Block | None = None
    pend: _PortLine | None = None
    orphan_reported = False

    def flush() -> None:
        nonlocal pend
        if pend is None:
            return
        seen: set[str] = set()
        for name, value, extended in pend.entries:
            canon = canonical_counter(name)
            if canon is None or canon in seen:
                continue
            seen.add(canon)
            records.append(
                PortCounter(
                    source=source,
                    line=pend.line,
                    text=clip(pend.text),
                    host=pend.host,
                    lid=pend.lid,
                    guid=pend.guid,
                    port=pend.port,
                    counter=canon,
                    value=value,
                    extended=extended,
                    snapshot=0,
                    timestamp=None,
                )
            )
        pend = None

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        err = tool_error(line)
        if err is not None:
            flush()
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=err))
            continue
        p = prompt(line)
        if p is not None or command_line(line, _TOOLS) is not None:
            flush()
            block = None
            if p is not None and p[0]:
                cur_host = p[0]
            continue
        m = _TRAILER_RE.match(line)
        if m:
            flush()
            msg = m.group("msg")
            if msg:
                records.append(
                    ToolMessage(
                        source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, level="info",
                        message=msg, stage="Summary",
                    )
                )
            continue
        m = _HEADER_RE.match(line)
        if m:
            flush()
            block = _Block(
                guid=norm_guid(m.group("guid")), desc=m.group("desc"), data=m.group("kind") == "Data Counters", line=n
            )
            continue
        m = _PORT_RE.match(line)
        if m:
            flush()
            if block is None and not orphan_reported:
                problems.append(f"line {n}: port line before any 'Errors for' header (header missing or cut off)")
                orphan_reported = True
            line_guid = norm_guid(m.group("guid"))
            guid = block.guid if block is not None and block.guid is not None else line_guid
            if guid is None:
                continue
            port = None if m.group("port") == "ALL" else int(m.group("port"))
            pend = _PortLine(line=n, text=line, host=cur_host, guid=guid, port=port)
            rest = m.group("rest")
            for em in _ENTRY_RE.finditer(rest):
                pend.entries.append((em.group("name"), int(em.group("val")), em.group("human") is not None))
            tail = rest[rest.rfind("]") + 1 :] if "]" in rest else rest
            if "[" in tail:
                problems.append(f"truncated: line {n}: counter list cut off ({tail.strip()!r})")
            continue
        m = _LINK_INFO_RE.match(line)
        if m:
            _link_info(n, line, m.group("rest"), block, pend, cur_host, source, records, problems)
            continue
    flush()
    records.sort(key=lambda r: r.line)


def _link_info(
    n: int,
    line: str,
    rest: str,
    block: _Block | None,
    pend: _PortLine | None,
    cur_host: str | None,
    source: str,
    records: list[Record],
    problems: list[str],
) -> None:
    m = PORT_LINE_RE.match(rest)
    link = parse_link_text(m.group("link")) if m else None
    remote = parse_remote_text(m.group("remote")) if m else None
    if m is None or link is None or remote is None:
        problems.append(f"line {n}: unparseable Link info line")
        return
    lid = int(m.group("lid"))
    port = int(m.group("port"))
    guid = pend.guid if pend is not None else (block.guid if block is not None else None)
    if pend is not None and pend.port in (port, None):
        pend.lid = lid
    if guid is None:
        problems.append(f"line {n}: Link info line without a GUID line before it")
        return
    desc = block.desc if block is not None else None
    if remote.connected and remote.guid is not None and remote.port is not None:
        records.append(
            FabricLink(
                source=source,
                line=n,
                text=clip(line),
                host=cur_host,
                guid=guid,
                port=port,
                peer_guid=remote.guid,
                peer_port=remote.port,
                width=link.width,
                speed=link.speed,
                state=link.state,
                phys_state=link.phys_state,
                lid=lid,
                peer_lid=remote.lid,
                description=desc,
                peer_description=remote.description,
            )
        )
    if not remote.connected or remote.guid is None or remote.could_be:
        records.append(
            FabricPortState(
                source=source,
                line=n,
                text=clip(line),
                host=cur_host,
                guid=guid,
                port=port,
                state=link.state,
                phys_state=link.phys_state,
                width=link.width,
                speed=link.speed,
                lid=lid,
                description=desc,
                could_be=remote.could_be,
            )
        )
