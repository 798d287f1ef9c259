"""NCCL debug log (``NCCL_DEBUG=INFO`` / ``WARN``) lines.

Line grammar (NVIDIA/nccl ``src/debug.cc``): an optional ``[<timestamp>] `` (WARN lines by default),
``<host>:<pid>:<tid> [<cudaDev>] `` then ``NCCL INFO <msg>`` or ``<file>:<line> [(<func>) ]NCCL WARN <msg>``.
Launchers add their own prefixes (``[1,0]<stdout>:``, ``0: ``, ``[default0]:``), so the prefix is searched,
not anchored. Message shapes follow the sources cited in the format notes of the test data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._common import EnvSetting

FORMAT = "nccl_log"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk
MIXABLE = True

_PREFIX = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T][\d:.]+)\] )?"
    r"(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:[\d.]+ )?(?:(?P<src>[\w./\-]+:\d+) (?:\((?P<func>\w+)\) )?)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|ABORT) ?(?P<msg>.*)$"
)
_SNIFF = re.compile(r"^.*?\S+:\d+:\d+ \[\d+\] .*?NCCL (?:INFO|WARN) ", re.M)

_NET_USING = re.compile(r"^NET/(?P<net>\w+) ?: Using (?P<devs>.*?)(?:; OOB (?P<oif>[\w.\-]+):(?P<oip>[^<\s]+)<\d+>)?\s*$")
_NET_DEV = re.compile(r"\[(?P<i>\d+)\](?P<dev>[\w.\-]+)(?::(?P<port>\d+))?(?:/(?P<ll>IB|RoCE))?")
_INIT = re.compile(
    r"(?:\[Rank \d+\] )?\w+ comm (?P<comm>\S+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cdev>\d+)"
    r"(?: nvmlDev (?P<ndev>\d+))? busId (?P<bus>\w+)(?: commId (?P<cid>\S+))? - Init (?P<phase>START|COMPLETE)"
)
_CHANNEL = re.compile(
    r"^Channel (?P<ch>\d+)(?:/\d+)? : (?P<rank>\d+)\[(?P<rdev>\d+)\] -> (?P<peer>\d+)\[(?P<pdev>\d+)\]"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S+)"
)
_GDR = re.compile(r"^NET/(?P<net>\w+) ?: GPU Direct RDMA (?P<st>Enabled|Disabled) for HCA (?P<i>\d+) '(?P<dev>[^']+)'")
_GDR_GPU = re.compile(
    r"^GPU Direct RDMA (?P<st>Enabled|Disabled) for GPU (?P<gpu>\w+) / HCA (?P<i>\d+) \(distance (?P<d>\d+) (?P<op>[<>=]+) (?P<lim>\d+)\)"
)
_QP = re.compile(
    r"^NET/IB: NCCL Dev (?P<dev>\d+) IbDev (?P<ibdev>\d+) Port (?P<port>\d+) qpn (?P<qpn>\d+) mtu (?P<mtu>\d+)"
    r"(?: LID (?P<lid>\d+))?(?:.*?GID (?P<gid>\S+))?"
)
_COMM = re.compile(r"^comm \S+ rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) localRanks (?P<lr>\d+)")
_PLUGIN = re.compile(
    r"^(?P<msg>NET/Plugin ?: (?:No plugin found|Could not find|Plugin load returned|Using internal|Loaded)"
    r"|Failed to open libibverbs|NET/IB : Unable to open device|NET/IB : No IB|Unable to load libibverbs"
    r"|ibvwrap.* libibverbs).*"
)
_GRAPH = re.compile(
    r"^Pattern (?P<pattern>\d+), crossNic (?P<cross>\d+), nChannels (?P<nch>\d+), bw (?P<bw>[\d.]+)/(?P<bw2>[\d.]+),"
    r" type (?P<type>[\w/]+)"
)
_RINGS = re.compile(r"^Connected all rings(?:, use ring PXN (?P<pxn>\d) GDR (?P<gdr>\d))?")
_ENV = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]+) set (?:by environment )?to (?P<val>.*?)\.?\s*$")
_VERSION = re.compile(r"^NCCL version (?P<v>[\w.+\-]+)")
_USING_NET = re.compile(r"^Using network (?P<net>\S+)")
_ERRTRACE = re.compile(r"^(?P<src>[\w./\-]+:\d+) -> (?P<code>\d+)")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using (?P<if>[\w.\-]+):(?P<ip>[^<\s]+)<\d+>")


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclRecord(Record):
    pid: int
    dev: int
    timestamp: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclVersion(NcclRecord):
    version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclNetInit(NcclRecord):
    """``NET/IB : Using [0]mlx5_0:1/IB ...`` or ``NET/Socket : Using [0]eth0:10.0.0.1<0>``."""

    net: str
    devices: tuple[str, ...]
    ports: tuple[int | None, ...]
    link_layers: tuple[str | None, ...]
    oob_if: str | None
    oob_ip: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclNetNoDevice(NcclRecord):
    net: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclUsingNetwork(NcclRecord):
    net: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclInitRank(NcclRecord):
    rank: int
    nranks: int
    cuda_dev: int
    bus_id: str
    comm_id: str | None
    phase: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclChannel(NcclRecord):
    """A connection line. ``transport`` is NET, P2P, SHM, NVLS or COLLNET; ``net`` the network (IB, Socket...)."""

    channel: int
    rank: int
    peer: int
    direction: str | None
    transport: str
    net: str | None
    net_dev: int | None
    gdr: bool
    via: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclGdrStatus(NcclRecord):
    net: str
    enabled: bool
    hca_index: int
    device: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclGdrPath(NcclRecord):
    """``GPU Direct RDMA Enabled|Disabled for GPU <bus> / HCA <n> (distance d <= limit)`` (NCCL 2.19+)."""

    enabled: bool
    gpu: str
    hca_index: int
    distance: int
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclQpInfo(NcclRecord):
    """``NET/IB: NCCL Dev <n> IbDev <n> Port <p> qpn <q> mtu <m> LID <l>`` (queue pair setup, NET subsystem)."""

    net_dev: int
    ib_dev: int
    port: int
    qpn: int
    mtu: int  # the IB MTU enum as NCCL prints it: 1=256, 2=512, 3=1024, 4=2048, 5=4096 bytes
    lid: int | None
    gid: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclCommInfo(NcclRecord):
    """``comm 0x.. rank R nRanks N nNodes M localRanks L localRank l``: the shape of the communicator."""

    rank: int
    nranks: int
    nnodes: int
    local_ranks: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclPluginNote(NcclRecord):
    """Net plugin and verbs library loading: what NCCL could and could not load."""

    category: str  # 'plugin_absent' (no external net plugin: normal), 'plugin_loaded', 'verbs_unavailable'
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclGraph(NcclRecord):
    """``Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1`` (GRAPH)."""

    pattern: int
    cross_nic: int
    nchannels: int
    bw_intra: float
    bw_inter: float
    path_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclRingsConnected(NcclRecord):
    pxn: int | None
    gdr: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclWarn(NcclRecord):
    src: str | None
    func: str | None
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclErrorTrace(NcclRecord):
    src: str
    code: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclBootstrap(NcclRecord):
    interface: str
    ip: str


def sniff(head: str) -> int:
    hits = 0
    for _ in _SNIFF.finditer(head):
        hits += 1
        if hits >= 3:
            return 95
    return 0 if hits == 0 else 60 + 10 * hits


_LEAD_DIGITS = re.compile(r"(\d+)")
_NET_NO_DEVICE = re.compile(r"^NET/(\w+) ?: No device found")


def _channel(msg: str, common: dict[str, Any]) -> NcclChannel | None:
    m = _CHANNEL.match(msg)
    if not m:
        return None
    via = m["via"]
    parts = via.split("/")
    transport = parts[0].upper()
    net = None
    net_dev = None
    if transport == "NET" and len(parts) > 1:
        net = parts[1]
        if len(parts) > 2:
            d = _LEAD_DIGITS.match(parts[2])
            net_dev = int(d.group(1)) if d else None
    return NcclChannel(
        channel=int(m["ch"]),
        rank=int(m["rank"]),
        peer=int(m["peer"]),
        direction=m["dir"],
        transport=transport,
        net=net,
        net_dev=net_dev,
        gdr="GDRDMA" in via,
        via=via,
        **common,  # type: ignore[arg-type]
    )


def _plugin(msg: str, common: dict[str, Any]) -> NcclPluginNote:
    low = msg.lower()
    if "libibverbs" in low or "unable to open device" in low or "no ib" in low:
        cat = "verbs_unavailable"
    elif "loaded" in low and "internal" not in low:
        cat = "plugin_loaded"
    else:
        cat = "plugin_absent"
    return NcclPluginNote(category=cat, message=msg, **common)


def _info(msg: str, common: dict[str, Any]) -> Record | None:
    c = msg[:1]
    if c == "C":
        if msg.startswith("Channel"):
            return _channel(msg, common)
        m = _RINGS.match(msg)
        if m:
            return NcclRingsConnected(
                pxn=int(m["pxn"]) if m["pxn"] else None, gdr=int(m["gdr"]) if m["gdr"] else None, **common
            )
        return None
    if c == "N":
        if msg.startswith("NET/"):
            m = _NET_USING.match(msg)
            if m:
                devs = [d for d in _NET_DEV.finditer(m["devs"])]
                return NcclNetInit(
                    net=m["net"],
                    devices=tuple(d["dev"] for d in devs),
                    ports=tuple(int(d["port"]) if d["port"] else None for d in devs),
                    link_layers=tuple(d["ll"] for d in devs),
                    oob_if=m["oif"],
                    oob_ip=m["oip"],
                    **common,
                )
            m = _GDR.match(msg)
            if m:
                return NcclGdrStatus(
                    net=m["net"], enabled=m["st"] == "Enabled", hca_index=int(m["i"]), device=m["dev"], **common
                )
            nd = _NET_NO_DEVICE.match(msg)
            if nd:
                return NcclNetNoDevice(net=nd.group(1), **common)
            m = _QP.match(msg)
            if m:
                return NcclQpInfo(net_dev=int(m["dev"]), ib_dev=int(m["ibdev"]), port=int(m["port"]), qpn=int(m["qpn"]),
                                  mtu=int(m["mtu"]), lid=int(m["lid"]) if m["lid"] else None, gid=m["gid"], **common)
            m = _PLUGIN.match(msg)
            if m:
                return _plugin(msg, common)
            return None
        m = _VERSION.match(msg)
        if m:
            return NcclVersion(version=m["v"], **common)
        m = _ENV.match(msg)
        if m and m["name"].startswith("NCCL_"):
            return EnvSetting(
                name=m["name"], value=m["val"].strip(), origin="nccl_log",
                source=common["source"], line=common["line"], text=common["text"], host=common["host"],  # type: ignore[arg-type]
            )
        return None
    if c == "G":
        m = _GDR_GPU.match(msg)
        if m:
            return NcclGdrPath(enabled=m["st"] == "Enabled", gpu=m["gpu"], hca_index=int(m["i"]),
                               distance=int(m["d"]), limit=int(m["lim"]), **common)
        return None
    if c == "c" and msg.startswith("comm "):
        m = _COMM.match(msg)
        if m:
            return NcclCommInfo(rank=int(m["rank"]), nranks=int(m["nranks"]), nnodes=int(m["nnodes"]),
                                local_ranks=int(m["lr"]), **common)
        return None
    if c == "P" and msg.startswith("Pattern"):
        m = _GRAPH.match(msg)
        if m:
            return NcclGraph(pattern=int(m["pattern"]), cross_nic=int(m["cross"]), nchannels=int(m["nch"]),
                             bw_intra=float(m["bw"]), bw_inter=float(m["bw2"]), path_type=m["type"], **common)
        return None
    if c in "FU" and _PLUGIN.match(msg):
        return _plugin(msg, common)
    if c == "U":
        m = _USING_NET.match(msg)
        if m:
            return NcclUsingNetwork(net=m["net"], **common)
        return None
    if c == "B":
        m = _BOOTSTRAP.match(msg)
        if m:
            return NcclBootstrap(interface=m["if"], ip=m["ip"], **common)
        return None
    if " Init " in msg:
        m = _INIT.search(msg)
        if m:
            return NcclInitRank(
                rank=int(m["rank"]), nranks=int(m["nranks"]), cuda_dev=int(m["cdev"]), bus_id=m["bus"],
                comm_id=m["cid"], phase=m["phase"], **common,
            )
    if " -> " in msg:
        m = _ERRTRACE.match(msg)
        if m:
            return NcclErrorTrace(src=m["src"], code=int(m["code"]), **common)
    return None


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        if "NCCL " not in raw:
            continue
        m = _PREFIX.search(raw)
        if not m:
            continue
        common: dict[str, Any] = {
            "source": source,
            "line": lineno,
            "text": clip(raw),
            "host": m["host"],
            "pid": int(m["pid"]),
            "dev": int(m["dev"]),
            "timestamp": m["ts"],
        }
        msg = m["msg"].strip()
        level = m["level"]
        rec: Record | None
        if level == "WARN" or level == "ABORT":
            rec = NcclWarn(src=m["src"], func=m["func"], message=msg, **common)  # type: ignore[arg-type]
        elif level == "INFO":
            try:
                rec = _info(msg, common)
            except (ValueError, IndexError) as exc:  # defensive: a damaged line is reported, never fatal
                problems.append(f"line {lineno}: unparseable NCCL INFO line ({exc})")
                rec = None
        else:
            rec = None
        if rec is not None:
            records.append(rec)
    if text and not text.endswith("\n") and records and records[-1].line == text.count("\n") + 1:
        last = text.rsplit("\n", 1)[-1]
        if "NCCL" in last and not last.rstrip().endswith((")", ".", "COMPLETE", "START")) and len(last) < 30:
            problems.append("truncated: the last line ends mid-message")
    return ParseResult(format=FORMAT, records=records, problems=problems)
