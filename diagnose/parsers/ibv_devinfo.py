"""``ibv_devinfo`` / ``ibv_devinfo -v`` (rdma-core libibverbs/examples/devinfo.c).

Shape::

    hca_id:<tab>mlx5_0
    <tab>transport:<tab><tab><tab>InfiniBand (0)
    <tab>fw_ver:<tab><tab><tab><tab>20.35.1012
    <tab>node_guid:<tab><tab><tab>b859:9f03:0022:626e
    <tab>vendor_part_id:<tab><tab><tab>4123
    ...
    <tab><tab>port:<tab>1
    <tab><tab><tab>state:<tab><tab><tab>PORT_ACTIVE (4)
    <tab><tab><tab>max_mtu:<tab><tab>4096 (5)
    <tab><tab><tab>active_mtu:<tab><tab>4096 (5)
    <tab><tab><tab>sm_lid:<tab><tab><tab>8
    <tab><tab><tab>port_lid:<tab><tab>762
    <tab><tab><tab>port_lmc:<tab><tab>0x00
    <tab><tab><tab>link_layer:<tab><tab>InfiniBand

``-v`` adds device capabilities (ignored) and per port ``active_width: 4X (2)``, ``active_speed: 2.5 Gbps (1)``,
``effective_speed: 100.0 Gbps`` (newer rdma-core), ``phys_state: POLLING (2)`` and ``GID[  0]: <gid>[, RoCE v2]``.

Mapping: ``ca_type`` = ``MT`` + ``vendor_part_id`` (ibstat prints ``CA type: MT4123`` for vendor_part_id 4123);
``speed`` = IB name of the ``active_speed`` enum in parentheses (1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR,
64 HDR, 128 NDR, 256 XDR), else the printed text; ``rate_gbps`` = ``effective_speed`` when printed, else lanes
x lane rate; ``port_guid`` = interface id of GID[0] for InfiniBand ports (not printed otherwise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import (
    LANE_GBPS,
    VERBS_SPEED,
    GidEntry,
    IbPort,
    guid_from_gid,
    norm_guid,
    norm_link_layer,
    norm_phys_state,
    norm_state,
    shell_line,
    to_float,
    to_int,
    width_lanes,
)
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibv_devinfo"

_HCA_RE = re.compile(r"^\s*hca_id:\s*(?P<dev>\S+)\s*$")
_PORT_RE = re.compile(r"^\s*port:\s*(?P<port>\d+)\s*$")
_GID_RE = re.compile(r"^\s*GID\[\s*(?P<idx>\d+)\]:\s*(?P<gid>[0-9A-Fa-f:.]+)\s*(?:,\s*(?P<type>.+?))?\s*$")
_KV_RE = re.compile(r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*):\s*(?P<val>.*?)\s*$")
_ENUM_NUM = re.compile(r"\((?P<num>\d+)\)\s*$")

_DEV_KEYS = frozenset(
    {
        "transport",
        "fw_ver",
        "node_guid",
        "sys_image_guid",
        "vendor_id",
        "vendor_part_id",
        "hw_ver",
        "board_id",
        "phys_port_cnt",
    }
)
_PORT_KEYS = frozenset(
    {
        "state",
        "max_mtu",
        "active_mtu",
        "sm_lid",
        "port_lid",
        "port_lmc",
        "link_layer",
        "active_width",
        "active_speed",
        "effective_speed",
        "phys_state",
    }
)
_TOOLS = ("ibv_devinfo",)

_SNIFF_HCA = re.compile(r"^[ \t]*hca_id:[ \t]*\S+[ \t]*$", re.MULTILINE)
_SNIFF_KEY = re.compile(
    r"^[ \t]*(?:transport|fw_ver|node_guid|sys_image_guid|vendor_part_id|phys_port_cnt|port_lid|active_mtu"
    r"|link_layer):[ \t]",
    re.MULTILINE,
)
_SNIFF_STATE = re.compile(r"^[ \t]*state:[ \t]+PORT_[A-Z_]+ \(\d\)", re.MULTILINE)


def sniff(head: str) -> int:
    hcas = len(_SNIFF_HCA.findall(head))
    keys = len(_SNIFF_KEY.findall(head))
    states = len(_SNIFF_STATE.findall(head))
    if hcas and (keys >= 2 or states):
        return 95
    if not hcas and states and keys >= 3:
        return 45  # a port section whose hca_id line was cut off
    return 0


@dataclass
class _Port:
    number: int
    line: int
    text: str
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    gids: list[tuple[int, str, int, str, str | None]] = field(default_factory=list)


@dataclass
class _Dev:
    device: str
    line: int
    host: str | None
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    ports: list[_Port] = field(default_factory=list)


def _speed(raw: str | None) -> str | None:
    if raw is None:
        return None
    m = _ENUM_NUM.search(raw)
    if m and int(m.group("num")) in VERBS_SPEED:
        return VERBS_SPEED[int(m.group("num"))]
    text = _ENUM_NUM.sub("", raw).strip()
    return text or None


def _width(raw: str | None) -> str | None:
    if raw is None:
        return None
    m = re.match(r"\s*(\d+X)\b", raw, re.IGNORECASE)
    return m.group(1).upper() if m else None


def _build(dev: _Dev, p: _Port, source: str, records: list[Record]) -> None:
    f = p.fields

    def val(key: str) -> str | None:
        return (f[key][2] or None) if key in f else None

    def dval(key: str) -> str | None:
        return (dev.fields[key][2] or None) if key in dev.fields else None

    link_layer = norm_link_layer(val("link_layer"))
    width = _width(val("active_width"))
    speed = _speed(val("active_speed"))
    rate = to_float(val("effective_speed"))
    if rate is None and speed in LANE_GBPS and width_lanes(width):
        rate = LANE_GBPS[speed] * (width_lanes(width) or 0)
    gid0 = next((g[3] for g in p.gids if g[2] == 0), None)
    part = to_int(dval("vendor_part_id"))
    line, text = (f["state"][0], f["state"][1]) if "state" in f else (p.line, p.text)
    records.append(
        IbPort(
            source=source,
            line=line,
            text=clip(text),
            host=dev.host,
            device=dev.device,
            port=p.number,
            state=norm_state(val("state")),
            phys_state=norm_phys_state(val("phys_state")),
            rate_gbps=rate,
            width=width,
            speed=speed,
            link_layer=link_layer,
            lid=to_int(val("port_lid")),
            sm_lid=to_int(val("sm_lid")),
            port_guid=guid_from_gid(gid0) if link_layer == "InfiniBand" else None,
            node_guid=norm_guid(dval("node_guid")),
            ca_type=f"MT{part}" if part is not None else None,
            firmware=dval("fw_ver"),
            active_mtu=to_int((val("active_mtu") or "").split(" ")[0] or None),
            max_mtu=to_int((val("max_mtu") or "").split(" ")[0] or None),
        )
    )
    for gline, graw, idx, gid, gtype in p.gids:
        if gtype is None and link_layer == "InfiniBand":
            gtype = "IB"
        records.append(
            GidEntry(
                source=source,
                line=gline,
                text=clip(graw),
                host=dev.host,
                device=dev.device,
                port=p.number,
                index=idx,
                gid=gid.lower(),
                gid_type=gtype,
            )
        )


def _flush(dev: _Dev, at_eof: bool, source: str, records: list[Record], problems: list[str]) -> None:
    for p in dev.ports:
        _build(dev, p, source, records)
    last = dev.ports[-1] if dev.ports else None
    if last is not None and "link_layer" not in last.fields:
        if at_eof:
            problems.append(f"truncated: block for {dev.device} ends early (port {last.number} incomplete)")
        else:
            problems.append(f"line {last.line}: incomplete port block for {dev.device} port {last.number}")
    elif last is None and at_eof:
        problems.append(f"truncated: block for {dev.device} ends early (no port shown)")


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _gid_type(raw: str | None) -> str | None:
    if not raw:
        return None
    m = re.fullmatch(r"RoCE\s*v\s*([12])", raw.strip(), re.IGNORECASE)
    if m:
        return f"RoCE v{m.group(1)}"
    if raw.strip().upper() == "IB":
        return "IB"
    return None  # "Invalid gid type" and anything else


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    dev: _Dev | None = None
    port: _Port | None = None

    def close(at_eof: bool) -> None:
        nonlocal dev, port
        if dev is not None:
            _flush(dev, at_eof, source, records, problems)
        dev, port = None, None

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind is not None:
            if kind == "boundary":
                close(False)
            continue
        m = _HCA_RE.match(line)
        if m:
            close(False)
            dev = _Dev(device=m.group("dev"), line=n, host=cur_host)
            continue
        if dev is None:
            continue
        m = _PORT_RE.match(line)
        if m:
            port = _Port(number=int(m.group("port")), line=n, text=line)
            dev.ports.append(port)
            continue
        m = _GID_RE.match(line)
        if m and port is not None:
            port.gids.append((n, line, int(m.group("idx")), m.group("gid"), _gid_type(m.group("type"))))
            continue
        m = _KV_RE.match(line)
        if not m:
            continue
        key = m.group("key")
        if port is not None and key in _PORT_KEYS:
            port.fields.setdefault(key, (n, line, m.group("val")))
        elif port is None and key in _DEV_KEYS:
            dev.fields.setdefault(key, (n, line, m.group("val")))
    close(True)
