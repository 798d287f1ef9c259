"""``ibstat`` (infiniband-diags): per-HCA blocks with per-port state, rate, LIDs and GUIDs.

Shape (rdma-core ``infiniband-diags/ibstat.c``)::

    CA 'mlx5_0'
    <tab>CA type: MT4129
    <tab>Number of ports: 1
    <tab>Firmware version: 28.39.1002
    <tab>Hardware version: 0
    <tab>Node GUID: 0x946dae0300cde72c
    <tab>System image GUID: 0x946dae0300cde72c
    <tab>Port 1:
    <tab><tab>State: Active
    <tab><tab>Physical state: LinkUp
    <tab><tab>Rate: 400
    <tab><tab>Base lid: 75
    <tab><tab>LMC: 0
    <tab><tab>SM lid: 334
    <tab><tab>Capability mask: 0xa751e848
    <tab><tab>Port GUID: 0x946dae0300cde72c
    <tab><tab>Link layer: InfiniBand

Indentation is ignored (captures use tabs or 8 spaces). ``ibstat <ca> <port>`` prints ``CA: '<ca>'`` and an
unindented port block; ``ibstat -l``/``-p`` lists (bare names/GUIDs) are ignored. ``ibpanic:``/``ibwarn:``
lines become :class:`~diagnose.parsers._ib.ToolError`. ibstat shows neither width nor speed: those stay None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import (
    IbPort,
    iter_lines,
    norm_guid,
    norm_link_layer,
    norm_phys_state,
    norm_state,
    shell_line,
    to_int,
)

FORMAT = "ibstat"

_NODE_RE = re.compile(r"^\s*(?P<kind>CA|Switch|Router|iWARP RNIC)(?P<alone>:)?\s+'(?P<dev>[^']+)'\s*$")
_PORT_RE = re.compile(r"^\s*Port\s+(?P<port>\d+):\s*$")
_KV_RE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<val>.*?)\s*$")
_RATE_RE = re.compile(r"^(?P<rate>\d+(?:\.\d+)?)(?:\s*\((?P<speed>[A-Za-z0-9]+)\))?$")

_NODE_KEYS = frozenset(
    {
        "CA type",
        "Switch type",
        "Router type",
        "Number of ports",
        "Firmware version",
        "Hardware version",
        "Node GUID",
        "System image GUID",
    }
)
_PORT_KEYS = frozenset(
    {
        "State",
        "Physical state",
        "Rate",
        "Effective speed",
        "Base lid",
        "LMC",
        "SM lid",
        "Capability mask",
        "Port GUID",
        "Link layer",
    }
)
_TOOLS = ("ibstat",)

_SNIFF_NODE = re.compile(r"^\s*(?:CA|Switch|Router):?\s+'[^'\n]+'[ \t]*$", re.MULTILINE)
_SNIFF_KEY = re.compile(
    r"^[ \t]*(?:CA type|Number of ports|Firmware version|Node GUID|System image GUID|Physical state|Base lid"
    r"|SM lid|Capability mask|Port GUID|Link layer): \S",
    re.MULTILINE,
)
_SNIFF_PORT = re.compile(r"^[ \t]*Port \d+:[ \t]*$", re.MULTILINE)


def sniff(head: str) -> int:
    nodes = len(_SNIFF_NODE.findall(head))
    keys = len(_SNIFF_KEY.findall(head))
    ports = len(_SNIFF_PORT.findall(head))
    if nodes and keys >= 2:
        return 95 if keys >= 5 else 80
    if not nodes and ports and keys >= 4 and "Physical state: " in head:
        return 45  # a port block whose CA header was cut off
    return 0


@dataclass
class _Port:
    number: int
    line: int
    text: str
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)


@dataclass
class _Node:
    device: str
    line: int
    alone: bool
    host: str | None
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    ports: list[_Port] = field(default_factory=list)


def _build_port(node: _Node, port: _Port, source: str, problems: list[str]) -> IbPort:
    f = port.fields

    def val(key: str) -> str | None:
        return f[key][2] if key in f else None

    def nval(key: str) -> str | None:
        return (node.fields[key][2] or None) if key in node.fields else None

    rate: float | None = None
    speed: str | None = None
    raw_rate = val("Rate")
    if raw_rate is not None:
        m = _RATE_RE.match(raw_rate)
        if m:
            rate = float(m.group("rate"))
            speed = m.group("speed").upper() if m.group("speed") else None
        else:
            problems.append(
                f"line {f['Rate'][0]}: unparseable rate {raw_rate!r} for {node.device} port {port.number}"
            )
    line, text = (f["State"][0], f["State"][1]) if "State" in f else (port.line, port.text)
    return IbPort(
        source=source,
        line=line,
        text=clip(text),
        host=node.host,
        device=node.device,
        port=port.number,
        state=norm_state(val("State")),
        phys_state=norm_phys_state(val("Physical state")),
        rate_gbps=rate,
        width=None,
        speed=speed,
        link_layer=norm_link_layer(val("Link layer")),
        lid=to_int(val("Base lid")),
        sm_lid=to_int(val("SM lid")),
        port_guid=norm_guid(val("Port GUID")),
        node_guid=norm_guid(nval("Node GUID")),
        ca_type=nval("CA type") or nval("Switch type") or nval("Router type"),
        firmware=nval("Firmware version"),
    )


def _flush(
    node: _Node, at_eof: bool, any_ports_before: bool, source: str, records: list[Record], problems: list[str]
) -> None:
    for p in node.ports:
        records.append(_build_port(node, p, source, problems))
    where = f"block for {node.device}"
    last = node.ports[-1] if node.ports else None
    numports = to_int(node.fields["Number of ports"][2]) if "Number of ports" in node.fields else None
    if at_eof:
        if last is not None and "Link layer" not in last.fields:
            problems.append(f"truncated: {where} ends early (port {last.number} incomplete)")
        elif last is None and not node.alone and (any_ports_before or "System image GUID" not in node.fields):
            problems.append(f"truncated: {where} ends early (no port shown)")
        elif numports and last is not None and len(node.ports) < numports:
            problems.append(f"truncated: {where} ends early ({len(node.ports)} of {numports} ports shown)")
        return
    if last is not None and "Link layer" not in last.fields:
        problems.append(f"line {last.line}: incomplete port block for {node.device} port {last.number}")
    if numports and node.ports and len(node.ports) < numports:
        problems.append(f"line {node.line}: {where} shows {len(node.ports)} of {numports} ports")


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        _parse(text, source, host, records, problems)
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    node: _Node | None = None
    port: _Port | None = None
    seen_ports = False

    def close(at_eof: bool) -> None:
        nonlocal node, port, seen_ports
        if node is not None:
            _flush(node, at_eof, seen_ports, source, records, problems)
            seen_ports = seen_ports or bool(node.ports)
        node, port = None, None

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind is not None:
            if kind == "boundary":
                close(False)
            continue
        m = _NODE_RE.match(line)
        if m:
            close(False)
            node = _Node(device=m.group("dev"), line=n, alone=bool(m.group("alone")), host=cur_host)
            continue
        if node is None:
            continue  # `ibstat -l` / `-p` lists and other text outside a CA block
        m = _PORT_RE.match(line)
        if m:
            port = _Port(number=int(m.group("port")), line=n, text=line)
            node.ports.append(port)
            continue
        m = _KV_RE.match(line)
        if not m:
            continue
        key, value = m.group("key").strip(), m.group("val")
        if key in _PORT_KEYS and port is not None:
            port.fields.setdefault(key, (n, line, value))
        elif key in _NODE_KEYS:
            node.fields.setdefault(key, (n, line, value))
    close(True)
