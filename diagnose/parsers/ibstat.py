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
from functools import lru_cache

from diagnose.models.records import ParseResult, Record, clip, positional_maker
from diagnose.parsers._ib import IbPort, norm_guid, norm_link_layer, norm_phys_state, norm_state, shell_line, to_int
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import count_matches, guarded_parse

FORMAT = "ibstat"

# The three shapes of an ibstat line (a CA/switch header, a port header, a ``key: value`` field) in one pattern,
# told apart by the last group that matched: one match per line instead of three.
_LINE_RE = re.compile(
    r"^\s*(?:(?:CA|Switch|Router|iWARP RNIC)(?P<alone>:)?\s+'(?P<dev>[^']+)'\s*$"
    r"|Port\s+(?P<port>\d+):\s*$"
    r"|(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<val>.*?)\s*$)"
)
# Every line :func:`~diagnose.parsers._ib.shell_line` acts on holds one of these: a prompt's ``@``, a command
# echo's ``$``/``#``/``>``, or an infiniband-diags/libibverbs error phrase. A plain ibstat capture holds none, so
# its lines skip the prompt, command and error patterns (the test suite checks this against the real samples).
_SHELL_HINTS = ("@", "$", "#", ">", "ibpanic", "ibwarn", "iberror", "Failed to", "No IB devices", "Fatal error",
                "Invalid port")
_SHELL_HINT = re.compile("|".join(map(re.escape, _SHELL_HINTS)))
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
    """Scores by a CA header and the count of ibstat fields; counting stops once the score is settled."""
    if _SNIFF_NODE.search(head):
        keys = count_matches(_SNIFF_KEY, head, limit=5)
        return (95 if keys >= 5 else 80) if keys >= 2 else 0
    if "Physical state: " in head and _SNIFF_PORT.search(head) and count_matches(_SNIFF_KEY, head, limit=4) >= 4:
        return 45  # a port block whose CA header was cut off
    return 0


@dataclass(slots=True)
class _Port:
    number: int
    line: int
    text: str
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)


@dataclass(slots=True)
class _Node:
    device: str
    line: int
    alone: bool
    host: str | None
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    ports: list[_Port] = field(default_factory=list)


_Link = tuple[str | None, str | None, str | None, float | None, str | None, bool]


@lru_cache(maxsize=1024)
def _link(state: str | None, phys: str | None, link_layer: str | None, raw_rate: str | None) -> _Link:
    """(state, phys_state, link_layer, rate, speed, rate readable) of a port's printed values. A fabric's
    thousands of ports print a handful of distinct values, so each combination is normalised once."""
    rate: float | None = None
    speed: str | None = None
    readable = True
    if raw_rate is not None:
        m = _RATE_RE.match(raw_rate)
        if m:
            rate = float(m.group("rate"))
            speed = m.group("speed").upper() if m.group("speed") else None
        else:
            readable = False
    return norm_state(state), norm_phys_state(phys), norm_link_layer(link_layer), rate, speed, readable


_NO_FIELD = (0, "", None)  # (line, text, value) of a field the block does not print
_make_port = positional_maker(IbPort)


def _node_values(node: _Node) -> tuple[str | None, str | None, str | None]:
    """(node GUID, CA type, firmware) of a CA block, shared by its ports."""
    nv = node.fields.get
    return (
        norm_guid(nv("Node GUID", _NO_FIELD)[2] or None),
        nv("CA type", _NO_FIELD)[2] or nv("Switch type", _NO_FIELD)[2] or nv("Router type", _NO_FIELD)[2] or None,
        nv("Firmware version", _NO_FIELD)[2] or None,
    )


def _build_port(
    node: _Node, shared: tuple[str | None, str | None, str | None], port: _Port, source: str, problems: list[str]
) -> IbPort:
    get = port.fields.get
    raw_rate = get("Rate", _NO_FIELD)[2]
    state, phys, link_layer, rate, speed, readable = _link(
        get("State", _NO_FIELD)[2], get("Physical state", _NO_FIELD)[2], get("Link layer", _NO_FIELD)[2], raw_rate
    )
    if not readable:
        problems.append(f"line {get('Rate', _NO_FIELD)[0]}: unparseable rate {raw_rate!r} for {node.device} port {port.number}")
    st = get("State")
    line, text = (st[0], st[1]) if st is not None else (port.line, port.text)
    node_guid, ca_type, firmware = shared
    return _make_port(  # the IbPort fields in order: source, line, text, host, device, port,
        source, line, clip(text), node.host, node.device, port.number,
        # state, phys_state, rate_gbps, width, speed, link_layer,
        state, phys, rate, None, speed, link_layer,
        # lid, sm_lid, port_guid, node_guid, ca_type, firmware, active_mtu, max_mtu
        to_int(get("Base lid", _NO_FIELD)[2]), to_int(get("SM lid", _NO_FIELD)[2]),
        norm_guid(get("Port GUID", _NO_FIELD)[2]), node_guid, ca_type, firmware, None, None,
    )


def _flush(
    node: _Node, at_eof: bool, any_ports_before: bool, source: str, records: list[Record], problems: list[str]
) -> None:
    if node.ports:
        shared = _node_values(node)
        for p in node.ports:
            records.append(_build_port(node, shared, p, source, problems))
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


_NODE, _PORT, _PORT_FIELD, _NODE_FIELD = range(4)
_MEMO_CHARS = 200  # longer lines are not memoised (bounded memory)


def _shape_of(line: str) -> tuple[int, str | int, str | bool] | None:
    """What one line is: (_NODE, device, alone), (_PORT, number, ""), (_PORT_FIELD or _NODE_FIELD, key, value);
    None for anything else (a blank line, a field ibstat does not print)."""
    m = _LINE_RE.match(line)
    if m is None:
        return None
    shape = m.lastgroup
    if shape == "dev":
        return _NODE, m.group("dev"), m.group("alone") is not None
    if shape == "port":
        return _PORT, int(m.group("port")), ""
    key = m.group("key").strip()
    if key in _PORT_KEYS:
        return _PORT_FIELD, key, m.group("val")
    if key in _NODE_KEYS:
        return _NODE_FIELD, key, m.group("val")
    return None


# A cluster's ibstat captures repeat most lines verbatim ("State: Active", "Rate: 400"): each distinct line is
# matched once per run, not once per file.
_shape = lru_cache(maxsize=4096)(_shape_of)

_KEY_HEAD_RE = re.compile(r"\s*[A-Za-z][A-Za-z ]*")


def _field_head(head: str) -> tuple[int, str] | None:
    """(_PORT_FIELD or _NODE_FIELD, key) when every line whose text before its first colon is ``head`` is that
    field (then its value is the rest of the line, stripped: what :func:`_shape_of` gives); None when the line
    must be matched whole."""
    if not _KEY_HEAD_RE.fullmatch(head):
        return None  # not a field key (a CA or port header, a prompt, a list entry)
    key = head.strip()
    if key in _PORT_KEYS:
        return _PORT_FIELD, key
    if key in _NODE_KEYS:
        return _NODE_FIELD, key
    return None


class _FieldHeads(dict[str, tuple[int, str] | None]):
    """:func:`_field_head` of each distinct head, memoised. The lines that stay unique across a cluster (GUIDs,
    LIDs) are classified by their key alone, which a fabric prints in a handful of indentations; a plain dict
    lookup (the memo is filled through ``__missing__``) is the cheapest per-line step there is."""

    def __missing__(self, head: str) -> tuple[int, str] | None:
        field = _field_head(head)
        if len(head) <= _MEMO_CHARS and len(self) < 4096:  # bounded memory
            self[head] = field
        return field


_field_heads = _FieldHeads()


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    node: _Node | None = None
    port: _Port | None = None
    # the field dicts a node or port field goes to (None outside a block): kept at hand for the field lines
    fields_of: dict[int, dict[str, tuple[int, str, str]] | None] = {_NODE_FIELD: None, _PORT_FIELD: None}
    seen_ports = False

    def close(at_eof: bool) -> None:
        nonlocal node, port, seen_ports
        if node is not None:
            _flush(node, at_eof, seen_ports, source, records, problems)
            seen_ports = seen_ports or bool(node.ports)
        node, port = None, None
        fields_of[_NODE_FIELD] = fields_of[_PORT_FIELD] = None

    if "\r" in text or "\x1b" in text:
        lines = iter_lines(text)
        shellish = True  # removing escape codes can join a shell hint: look at each cleaned line
    else:  # what iter_lines would yield, without its per-line work
        lines = enumerate(text.split("\n"), 1)
        shellish = any(h in text for h in _SHELL_HINTS)
    for n, line in lines:
        if shellish and _SHELL_HINT.search(line) is not None:
            kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
            if kind is not None:
                if kind == "boundary":
                    close(False)
                continue
        head, colon, rest = line.partition(":")
        field = _field_heads[head] if colon else None
        if field is not None:
            fields = fields_of[field[0]]
            if fields is not None:
                fields.setdefault(field[1], (n, line, rest.strip()))
            continue
        shape = _shape(line) if len(line) <= _MEMO_CHARS else _shape_of(line)
        if shape is None:
            continue
        what, a, b = shape
        if what == _NODE:
            close(False)
            node = _Node(device=a, line=n, alone=b, host=cur_host)  # type: ignore[arg-type]
            fields_of[_NODE_FIELD] = node.fields
            continue
        if node is None:
            continue  # `ibstat -l` / `-p` lists and other text outside a CA block
        if what == _PORT:  # (the field lines were all taken by their head above)
            port = _Port(number=a, line=n, text=line)  # type: ignore[arg-type]
            node.ports.append(port)
            fields_of[_PORT_FIELD] = port.fields
    close(True)
