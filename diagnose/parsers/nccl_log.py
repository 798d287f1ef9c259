"""NCCL debug log (``NCCL_DEBUG=INFO`` / ``WARN``) lines.

Line grammar (NVIDIA/nccl ``src/debug.cc``): an optional ``[<timestamp>] `` (WARN lines by default),
``<host>:<pid>:<tid> [<cudaDev>] `` then ``NCCL INFO <msg>`` or ``<file>:<line> [(<func>) ]NCCL WARN <msg>``.
Launchers add their own prefixes (``[1,0]<stdout>:``, ``0: ``, ``[default0]:``), so the prefix is searched,
not anchored. Message shapes follow the sources cited in the format notes of the test data.

A 4,096-host job logs ~650k lines, so ``parse`` returns one ``ColumnBatch`` per record type (its table is the
type's name, its columns the type's fields) rather than an object per line; ``as_records`` turns a result back
into the record objects below.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import chain, compress, islice
from operator import itemgetter, not_
from typing import Any

import numpy as np

from diagnose.gcpause import gc_paused
from diagnose.models.records import TEXT_CLIP, ColumnBatch, ParseResult, Record, clip
from diagnose.parsers._common import EnvSetting, possessive

FORMAT = "nccl_log"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk
MIXABLE = True

_PREFIX = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T][\d:.]+)\] )?"
    r"(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:[\d.]+ )?(?:(?P<src>[\w./\-]+:\d+) (?:\((?P<func>\w+)\) )?)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|ABORT) ?(?P<msg>.*)$"
)
# At most one hit per line (it runs to the line's end), and linear in a line's length: a prefix is any non-blank
# before ``:<pid>:<tid> [<dev>] ``, then within 256 characters (a timestamp, a source file and line) the level (a
# leading ``.*?`` and ``\S+``, and an unbounded gap, tried every split of a long line: seconds per line).
_SNIFF = re.compile(possessive(r"\S:\d++:\d++ \[\d++\] [^\n]{0,256}?NCCL (?:INFO|WARN) [^\n]*+"))
# A line as people paste it: the prefix cut (``[0] NCCL INFO ...``, ``include/shm.h:28 NCCL WARN ...``), redacted
# (``host-01:XXXXXX:XXXXXX [5]``, ``<hostname>:123:456 [0]``) or behind a launcher's own. Tried only on lines the
# usual shapes miss; the host of a redacted or missing prefix is unknown (None), the pid 0.
_LOOSE = re.compile(
    r"(?:^|(?<=[\s\]>:|)]))(?:(?P<host>[A-Za-z0-9<][\w.\-<>]*):(?P<pid>\d+|[Xx*]+|<\w+>):(?P<tid>\d+|[Xx*]+|<\w+>) )?"
    r"(?:\[(?P<dev>\d+)\] )?(?:[\d.]+ )?(?:(?P<src>[\w./\-]+\.\w+:\d+):? (?:\((?P<func>\w+)\) )?)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b ?(?P<msg>.*)$"
)
_SNIFF_LOOSE = re.compile(r"(?:^|\s)(?:\[\d+\] |[\w./\-]+\.\w+:\d+:? )NCCL (?:INFO|WARN) \S|^[ \t]*NCCL (?:INFO|WARN) \S", re.M)

_NET_USING = re.compile(r"^NET/(?P<net>\w+) ?: Using (?P<devs>.*?)(?:; OOB (?P<oif>[\w.\-]+):(?P<oip>[^<\s]+)<\d+>)?\s*$")
_NET_DEV = re.compile(r"\[(?P<i>\d+)\](?P<dev>[\w.\-]+)(?::(?P<port>\d+))?(?:/(?P<ll>IB|RoCE))?")
# _INIT and _CHANNEL capture only what a record keeps, and never backtrack into a run of digits or non-blanks (the
# next character never fits the run): they are applied to tens of thousands of messages at once.
_INIT = re.compile(possessive(
    r"(?:\[Rank \d++\] )?\w++ comm \S++ rank (?P<rank>\d++) nranks (?P<nranks>\d++) cudaDev (?P<cdev>\d++)"
    r"(?: nvmlDev \d++)? busId (?P<bus>\w++)(?: commId (?P<cid>\S++))? - Init (?P<phase>START|COMPLETE)"
))
_CHANNEL = re.compile(possessive(
    r"^Channel (?P<ch>\d++)(?:/(?P<conn>\d++))? : (?P<rank>\d++)\[(?P<dev>\d++)\] -> (?P<peer>\d++)\[(?P<pdev>\d++)\]"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S++)"
))
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
    """A connection line, ``Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d...`` in NCCL's sources: the
    channel, the connection index (``conn``, absent in older releases), each rank and its GPU (``nvml_dev``,
    ``peer_nvml_dev``). ``transport`` is NET, P2P, SHM, NVLS or COLLNET; ``net`` the network (IB, Socket...)."""

    channel: int
    conn: int | None
    rank: int
    nvml_dev: int
    peer: int
    peer_nvml_dev: int
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
    if hits:
        return 60 + 10 * hits
    loose = sum(1 for _ in islice(_SNIFF_LOOSE.finditer(head), 3))
    return 0 if loose == 0 else 45 + 10 * loose  # NCCL's lines with their prefix cut by a paste


_LEAD_DIGITS = re.compile(r"(\d+)")
_NET_NO_DEVICE = re.compile(r"^NET/(\w+) ?: No device found")

# Where an INFO message goes, its leading blanks skipped as ``str.strip`` would: a message that names a rank (4 to 8
# ``Channel`` lines, a ``comm`` line and two ``ncclCommInitRank`` lines per rank, each logged once, tens of thousands
# of them) to the group of its kind, parsed in bulk per kind; any other message, whole, to the last group, classified
# once per distinct message (a large job repeats the same few dozen on every rank).
_ROUTE = possessive(r"(?:[^\S\n]*+(?:(Channel.*)|(comm .*)|(ncclCommInitRank .*))|(.*))")  # blanks, but never the line's end
# The usual line, ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>``: _LINES splits every line of a text in one call,
# one tuple per line, (host, pid, dev, *the groups of _ROUTE), all "" for a line of any other shape (those go through
# _PREFIX, and their message through _MESSAGE). A line matches exactly where _PREFIX would match it from its first
# character with these groups, but for the ASCII classes (\w and \d match any script, and cost more): a host or a
# number in another script takes the general path, to the same record. The possessive quantifiers fail a line of
# another shape without backtracking.
_LINES = re.compile(possessive(
    r"^(?:([A-Za-z0-9][A-Za-z0-9_.\-]*+):([0-9]++):[0-9]++ \[([0-9]++)\] NCCL INFO ") + _ROUTE + r"|.*)$", re.M
)
_MESSAGE = re.compile(_ROUTE)
_HOST, _PID, _DEV, _CHANNEL_MSG, _COMM_MSG, _INIT_MSG, _OTHER_MSG = range(7)  # the groups of _LINES
_NO_LINE = ("",) * 7

# What a message is, before the line it is on: (record type, the record's own fields in declaration order).
_Kind = tuple[type, tuple[Any, ...]]
_BASE_FIELDS = ("source", "line", "text", "host", "pid", "dev", "timestamp")  # NcclRecord's, in order


@lru_cache(maxsize=256)
def _via(via: str) -> tuple[str, str | None, int | None, bool]:
    """``NET/IB/3/GDRDMA`` -> (transport, net, net_dev, gdr): a log has a handful of distinct paths."""
    parts = via.split("/")
    transport = parts[0].upper()
    net = None
    net_dev = None
    if transport == "NET" and len(parts) > 1:
        net = parts[1]
        if len(parts) > 2:
            d = _LEAD_DIGITS.match(parts[2])
            net_dev = int(d.group(1)) if d else None
    return transport, net, net_dev, "GDRDMA" in via


def _init_rank(g: tuple[str | None, ...]) -> tuple[Any, ...]:
    """NcclInitRank's fields from the groups of _INIT (rank, nranks, cdev, bus, cid, phase); a group that took no part
    is None or "" (in bulk)."""
    return int(g[0]), int(g[1]), int(g[2]), g[3], g[4] or None, g[5]  # type: ignore[arg-type]


def _plugin(msg: str) -> _Kind:
    low = msg.lower()
    if "libibverbs" in low or "unable to open device" in low or "no ib" in low:
        cat = "verbs_unavailable"
    elif "loaded" in low and "internal" not in low:
        cat = "plugin_loaded"
    else:
        cat = "plugin_absent"
    return NcclPluginNote, (cat, msg)


def _classify(msg: str) -> _Kind | None:
    """The record a stripped INFO message makes, or None, for any message but those _ROUTE sends to a kind of its own
    (``_channels``, ``_comms`` and ``_init_ranks`` parse those, the last handing back what _INIT does not match)."""
    c = msg[:1]
    if c == "C":
        m = _RINGS.match(msg)
        if m:
            return NcclRingsConnected, (int(m["pxn"]) if m["pxn"] else None, int(m["gdr"]) if m["gdr"] else None)
        return None
    if c == "N":
        if msg.startswith("NET/"):
            m = _NET_USING.match(msg)
            if m:
                devs = [d for d in _NET_DEV.finditer(m["devs"])]
                return NcclNetInit, (
                    m["net"],
                    tuple(d["dev"] for d in devs),
                    tuple(int(d["port"]) if d["port"] else None for d in devs),
                    tuple(d["ll"] for d in devs),
                    m["oif"],
                    m["oip"],
                )
            m = _GDR.match(msg)
            if m:
                return NcclGdrStatus, (m["net"], m["st"] == "Enabled", int(m["i"]), m["dev"])
            nd = _NET_NO_DEVICE.match(msg)
            if nd:
                return NcclNetNoDevice, (nd.group(1),)
            m = _QP.match(msg)
            if m:
                return NcclQpInfo, (int(m["dev"]), int(m["ibdev"]), int(m["port"]), int(m["qpn"]), int(m["mtu"]),
                                    int(m["lid"]) if m["lid"] else None, m["gid"])
            m = _PLUGIN.match(msg)
            if m:
                return _plugin(msg)
            return None
        m = _VERSION.match(msg)
        if m:
            return NcclVersion, (m["v"],)
        m = _ENV.match(msg)
        if m and m["name"].startswith("NCCL_"):
            return EnvSetting, (m["name"], m["val"].strip())
        return None
    if c == "G":
        m = _GDR_GPU.match(msg)
        if m:
            return NcclGdrPath, (m["st"] == "Enabled", m["gpu"], int(m["i"]), int(m["d"]), int(m["lim"]))
        return None
    if c == "P" and msg.startswith("Pattern"):
        m = _GRAPH.match(msg)
        if m:
            return NcclGraph, (int(m["pattern"]), int(m["cross"]), int(m["nch"]), float(m["bw"]), float(m["bw2"]),
                               m["type"])
        return None
    if c in "FU" and _PLUGIN.match(msg):
        return _plugin(msg)
    if c == "U":
        m = _USING_NET.match(msg)
        if m:
            return NcclUsingNetwork, (m["net"],)
        return None
    if c == "B":
        m = _BOOTSTRAP.match(msg)
        if m:
            return NcclBootstrap, (m["if"], m["ip"])
        return None
    if " Init " in msg:
        m = _INIT.search(msg)
        if m:
            return NcclInitRank, _init_rank(m.groups())
    if " -> " in msg:
        m = _ERRTRACE.match(msg)
        if m:
            return NcclErrorTrace, (m["src"], int(m["code"]))
    return None


# The tables parse fills, one ColumnBatch each, by number (EnvSetting lines, number -1, stay records).
_TABLE_TYPES: tuple[type, ...] = (
    NcclVersion, NcclNetInit, NcclNetNoDevice, NcclUsingNetwork, NcclInitRank, NcclChannel, NcclGdrStatus, NcclGdrPath,
    NcclQpInfo, NcclCommInfo, NcclPluginNote, NcclGraph, NcclRingsConnected, NcclWarn, NcclErrorTrace, NcclBootstrap,
)
_TABLE_NO: dict[type, int] = {c: i for i, c in enumerate(_TABLE_TYPES)}
_TYPES: dict[str, type] = {c.__name__: c for c in _TABLE_TYPES}
_ENV_NO = -1
_NOTHING = (-2,)  # a message that makes no record
_DAMAGED = -3  # (_DAMAGED, problem): a message the classifier choked on


@lru_cache(maxsize=1 << 16)
def _what(msg: str) -> tuple[Any, ...]:
    """(table number, *the record's own fields) of an INFO message ``_classify`` handles, as logged. One tuple of
    plain values, with no reference to a type or a list: the garbage collector untracks it at once. Cached across
    calls: a large log is parsed in chunks, and a host's messages (its address, its devices) are in all of them."""
    try:
        kind = _classify(msg.strip())
    except (ValueError, IndexError) as exc:  # defensive: a damaged line is reported, never fatal
        return _DAMAGED, f"unparseable NCCL INFO line ({exc})"
    if kind is None:
        return _NOTHING
    cls, fields = kind
    return (_ENV_NO if cls is EnvSetting else _TABLE_NO[cls], *fields)


@lru_cache(maxsize=8)
def _bulk_pattern(pattern: re.Pattern[str], search: bool) -> re.Pattern[str]:
    # ``pattern`` (at the start, or after the fewest characters: search) or nothing, then the rest of the line:
    # exactly one match per line
    return re.compile("^(?:" + (".*?" if search else "") + pattern.pattern.removeprefix("^") + ")?.*$", re.M)


def _bulk_groups(pattern: re.Pattern[str], msgs: list[str], search: bool = False) -> list[tuple[str, ...]]:
    """``pattern.match(m).groups()`` (``search``: ``pattern.search(m)``) for each message, from one regex call over
    all of them: a group that took no part, or a message that did not match, gives "" (the patterns used here never
    match an empty group). Trailing blanks left on a message change no group: no pattern here ends in a blank."""
    found = _bulk_pattern(pattern, search).findall("\n".join(msgs))
    if len(found) != len(msgs):  # cannot happen: a message is one line
        raise ValueError("bulk match out of step")
    return found


# A bulk parser: messages of one kind -> (the positions of those that make a record, their fields as columns).
_Columns = dict[str, Any]  # field name -> list of values, or an int64 array (_ints)


def _channels(msgs: list[str]) -> tuple[list[int], _Columns]:
    """``Channel 02/0 : 8[0] -> 9[1] [send] via NET/IB/0/GDRDMA`` -> NcclChannel's fields; a message _CHANNEL does
    not match makes no record."""
    found = _bulk_groups(_CHANNEL, msgs)
    hit = list(compress(range(len(found)), map(itemgetter(0), found)))
    ch, conn, rank, dev, peer, pdev, direction, via = _transpose(_take(found, hit), 8)
    paths = _transpose(_each_distinct(_via, via), 4)  # transport, net, net_dev, gdr
    return hit, {"channel": _ints(ch), "conn": _each_distinct(_int_or_none, conn), "rank": _ints(rank),
                 "nvml_dev": _ints(dev), "peer": _ints(peer), "peer_nvml_dev": _ints(pdev),
                 "direction": _each_distinct(_or_none, direction), "transport": paths[0], "net": paths[1],
                 "net_dev": paths[2], "gdr": paths[3], "via": _shared(via)}


def _or_none(value: str) -> str | None:
    return value or None


def _int_or_none(digits: str) -> int | None:
    return int(digits) if digits else None


def _comms(msgs: list[str]) -> tuple[list[int], _Columns]:
    """``comm 0x.. rank R nRanks N nNodes M localRanks L ...`` -> NcclCommInfo's fields; a message _COMM does not
    match makes no record."""
    found = _bulk_groups(_COMM, msgs)
    hit = list(compress(range(len(found)), map(itemgetter(0), found)))
    names = ("rank", "nranks", "nnodes", "local_ranks")
    return hit, {name: _ints(col) for name, col in zip(names, _transpose(_take(found, hit), 4), strict=True)}


def _init_ranks(msgs: list[str]) -> tuple[list[int], _Columns]:
    """``ncclCommInitRank comm 0x.. rank R nranks N cudaDev D ... busId B commId C - Init START`` -> NcclInitRank's
    fields; a message _INIT does not match is left out (``parse`` classifies it as any other message)."""
    found = _bulk_groups(_INIT, msgs, search=True)
    hit = list(compress(range(len(found)), map(itemgetter(0), found)))
    names = ("rank", "nranks", "cuda_dev", "bus_id", "comm_id", "phase")
    return hit, dict(zip(names, _transpose(list(map(_init_rank, _take(found, hit))), 6), strict=True))


_BULK = ((_CHANNEL_MSG, NcclChannel, _channels), (_COMM_MSG, NcclCommInfo, _comms), (_INIT_MSG, NcclInitRank, _init_ranks))


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    """One row per NCCL line that says something, gathered per record type into a ``ColumnBatch`` (table = the
    type's name, columns = its fields): a 4,096-host job logs ~650k lines, and one object per line cost more than
    the rest of the parse. ``EnvSetting`` lines stay records (other parsers fill that table too).

    No Python statement runs per line of the usual shape: one regex call splits all lines (prefix fields, and the
    message by kind), each kind that names a rank is parsed in bulk, each distinct other message classified once,
    and the columns are picked with C-level maps. Only lines of other shapes (timestamps, launcher prefixes, WARN)
    go through the general regex one by one."""
    with gc_paused():  # nothing built here forms a cycle, and the per-line tuples die in _parse, before it resumes
        return _parse(text, source, host)


def _parse(text: str, source: str, host: str | None) -> ParseResult:
    raws = text.split("\n")
    found = _LINES.findall(text)
    if len(found) != len(raws):  # cannot happen (one match per line); if it did, every line takes the general path
        found = [_NO_LINE] * len(raws)
    warns, stamps = _other_shapes(found, raws)
    problems: list[str] = []
    env: list[tuple[int, tuple[Any, ...], tuple[Any, ...]]] = []
    parts: dict[int, list[tuple[list[int], _Columns]]] = defaultdict(list)
    if warns:
        lines, *warn_columns = _transpose(warns, 8)
        parts[_TABLE_NO[NcclWarn]].append(
            (lines, dict(zip(("host", "pid", "dev", "timestamp", "src", "func", "message"), warn_columns,
                             strict=True))))
    for group, cls, bulk in _BULK:
        at = list(compress(range(len(found)), map(itemgetter(group), found)))
        if not at:
            continue
        rows = _take(found, at)
        hit, columns = bulk(list(map(itemgetter(group), rows)))
        if len(hit) < len(at):
            if bulk is _init_ranks:  # the messages _INIT does not match are classified as any other
                for i in set(at).difference(_take(at, hit)):
                    found[i] = (*found[i][:_CHANNEL_MSG], "", "", "", found[i][_INIT_MSG])
            at, rows = _take(at, hit), _take(rows, hit)
        if at:
            parts[_TABLE_NO[cls]].append((at, {**_who(at, rows, stamps), **columns}))
    at = list(compress(range(len(found)), map(itemgetter(_OTHER_MSG), found)))
    if at:
        rows = _take(found, at)
        whats = _each_distinct(_what, list(map(itemgetter(_OTHER_MSG), rows)))
        table = np.fromiter(map(itemgetter(0), whats), dtype=np.int64, count=len(whats))
        order = np.argsort(table, kind="stable")  # by table, each in line order
        present, starts = np.unique(table[order], return_index=True)
        for no, lo, hi in zip(present.tolist(), starts.tolist(), [*starts[1:].tolist(), len(order)], strict=True):
            pos = order[lo:hi].tolist()
            lines, row_whats = _take(at, pos), _take(whats, pos)
            if no == _DAMAGED:
                problems.extend(f"line {i + 1}: {what[1]}" for i, what in zip(lines, row_whats, strict=True))
            elif no == _ENV_NO:
                env.extend(zip(lines, _take(rows, pos), row_whats, strict=True))
            elif no >= 0:
                names = [f.name for f in dataclasses.fields(_TABLE_TYPES[no])][len(_BASE_FIELDS):]
                columns = dict(zip(names, _transpose(row_whats, len(names) + 1)[1:], strict=True))
                parts[no].append((lines, {**_who(lines, _take(rows, pos), stamps), **columns}))
    records = _env_records(env, raws, source, "\r" in text)
    records += _batches(parts, raws, source, host, "\r" in text)
    made = [lines[-1] for tparts in parts.values() for lines, _ in tparts] + [e[0] for e in env[-1:]]
    if text and not text.endswith("\n") and made and max(made) == len(raws) - 1:
        last = raws[-1]
        if "NCCL" in last and not last.rstrip().endswith((")", ".", "COMPLETE", "START")) and len(last) < 30:
            problems.append("truncated: the last line ends mid-message")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _other_shapes(found: list[tuple[str, ...]], raws: list[str]) -> tuple[list[tuple[Any, ...]], dict[int, str]]:
    """The lines _LINES left whole (lines of any other shape) through the general regex: a WARN or ABORT line gives an
    NcclWarn row (line index, host, pid, dev, timestamp, src, func, message); an INFO line is put into ``found`` as
    _LINES would have split it, its timestamp, if any, kept by line index."""
    warns: list[tuple[Any, ...]] = []
    stamps: dict[int, str] = {}
    for i in compress(range(len(found)), map(not_, map(itemgetter(_HOST), found))):
        raw = raws[i]
        if "NCCL " not in raw:
            continue
        m = _PREFIX.search(raw)
        if not m:
            _loose(i, raw, found, warns)
            continue
        level = m["level"]
        if level == "WARN" or level == "ABORT":
            warns.append((i, m["host"], int(m["pid"]), int(m["dev"]), m["ts"], m["src"], m["func"], m["msg"].strip()))
        elif level == "INFO":
            found[i] = (m["host"], m["pid"], m["dev"], *_MESSAGE.fullmatch(m["msg"]).groups())  # type: ignore[union-attr]
            if m["ts"]:
                stamps[i] = m["ts"]
    return warns, stamps


_RECORD_START = re.compile(r"(?<=\S) (?=(?:\[\d+\] |[A-Za-z0-9][\w.\-]*:\d+:\d+ \[\d+\] )(?:[\w./\-]+\.\w+:\d+ )?NCCL (?:INFO|WARN) )")


def _loose(i: int, raw: str, found: list[tuple[str, ...]], warns: list[tuple[Any, ...]]) -> None:
    """A line of a pasted fragment (see _LOOSE): every WARN of a line glued from several records, and its first INFO
    record as the usual shapes would have split it."""
    info_done = False
    for part in _RECORD_START.split(raw) if raw.count("NCCL ") > 1 else [raw]:
        m = _LOOSE.search(part)
        if not m:
            continue
        host = m["host"]
        if host is not None and (host.startswith("<") or not host[0].isalnum()):
            host = None  # redacted
        pid = int(m["pid"]) if m["pid"] and m["pid"].isdigit() else 0
        dev = m["dev"] or "0"
        if m["level"] in ("WARN", "ABORT"):
            warns.append((i, host, pid, int(dev), None, m["src"], m["func"], m["msg"].strip()))
        elif m["level"] == "INFO" and not info_done:
            g = _MESSAGE.fullmatch(m["msg"])
            if g is not None:
                found[i] = (host, str(pid), dev, *g.groups())  # type: ignore[call-overload]
                info_done = True


def _who(lines: list[int], rows: list[tuple[str, ...]], stamps: dict[int, str]) -> _Columns:
    """NcclRecord's host, pid, dev and timestamp columns of the lines ``lines``, split into ``rows`` by _LINES."""
    return {"host": _shared(list(map(itemgetter(_HOST), rows))), "pid": _ints(list(map(itemgetter(_PID), rows))),
            "dev": _ints(list(map(itemgetter(_DEV), rows))),
            "timestamp": list(map(stamps.get, lines)) if stamps else [None] * len(lines)}


def _texts(raws: list[str], lines: list[int], has_cr: bool) -> list[str]:
    texts = _take(raws, lines)
    return list(map(clip, texts)) if texts and (has_cr or max(map(len, texts)) > TEXT_CLIP) else texts


def _env_records(env: list[tuple[int, tuple[str, ...], tuple[Any, ...]]], raws: list[str], source: str,
                 has_cr: bool) -> list[Record]:
    """The EnvSetting records of ``env`` rows (line index, split line, classification), in line order."""
    lines, rows, whats = _transpose(env, 3)
    return [EnvSetting(name=w[1], value=w[2], origin="nccl_log", source=source, line=i + 1, text=t, host=r[_HOST])
            for i, t, r, w in zip(lines, _texts(raws, lines, has_cr), rows, whats, strict=True)]


def _batches(parts: dict[int, list[tuple[list[int], _Columns]]], raws: list[str], source: str, host: str | None,
             has_cr: bool) -> list[Record]:
    """A ColumnBatch per table from its parts (line indexes, ascending, and the columns of those lines, but source,
    line and text), in table order. A table filled from more than one route (an NcclInitRank line of another shape
    than ``ncclCommInitRank ...``) is put back in line order. Column values stay Python objects (lists) so that
    ``build_frames`` infers each column's dtype once over the whole table, as it does for records; only ``line`` and
    the fields that are never None are arrays (``line`` for the offset of a chunk to be added in place)."""
    out: list[Record] = []
    for no in sorted(parts):
        cls = _TABLE_TYPES[no]
        names = [f.name for f in dataclasses.fields(cls)][len(_BASE_FIELDS) - 4:]  # host onwards
        lines, columns = parts[no][0]
        if len(parts[no]) > 1:
            lines = list(chain.from_iterable(lines for lines, _ in parts[no]))
            columns = {name: list(chain.from_iterable(_values(c[name]) for _, c in parts[no])) for name in names}
            order = np.argsort(lines, kind="stable").tolist()
            lines = _take(lines, order)
            columns = {name: _take(values, order) for name, values in columns.items()}
        row_lines = np.array(lines, dtype=np.int64) + 1
        batch: dict[str, object] = {"source": [source] * len(lines), "line": row_lines,
                                    "text": _texts(raws, lines, has_cr)}
        batch.update((name, columns[name]) for name in names)  # in the order of the fields
        for name, dtype in _typed_columns(cls):
            try:
                batch[name] = np.asarray(batch[name], dtype=dtype)
            except OverflowError:  # an integer beyond int64: left to pandas, as for records
                pass
        out.append(ColumnBatch(source=source, line=int(row_lines[0]), text="", host=host, table=cls.__name__,
                               columns=batch, line_columns=("line",)))
    return out


@cache
def _typed_columns(cls: type) -> tuple[tuple[str, type], ...]:
    """The fields of ``cls`` that always hold a value of one type (``int``, ``float``, ``bool``, never None): built
    as arrays of the dtype pandas would infer for them from Python values, which costs ~5x less than the inference
    (``line`` is an array already)."""
    dtypes = {"int": np.int64, "float": np.float64, "bool": np.bool_}
    return tuple((f.name, dtypes[f.type]) for f in dataclasses.fields(cls) if f.type in dtypes and f.name != "line")


def _ints(digits: list[str]) -> np.ndarray | list[int]:
    """``int()`` of each of ``digits`` (runs of digits) as the int64 array ``_typed_columns`` makes of an int field
    (numpy reads them as ``int`` does, without a Python int per value), or Python ints where one is beyond int64."""
    try:
        return np.array(digits, dtype=np.int64)
    except OverflowError:
        return list(map(int, digits))


def _values(column: np.ndarray | list[Any]) -> list[Any]:
    """A column as Python values (an array of ``_ints`` joined to a list must not leave numpy ints in it)."""
    return column.tolist() if isinstance(column, np.ndarray) else column


def _take(seq: list[Any], positions: list[int]) -> list[Any]:
    """``[seq[i] for i in positions]`` in one C call."""
    return list(itemgetter(*positions)(seq)) if len(positions) > 1 else [seq[i] for i in positions]


def _each_distinct(fn: Callable[[Any], Any], values: list[Any]) -> list[Any]:
    """``list(map(fn, values))``, calling ``fn`` once per distinct value: a column repeats a few values, and a dict
    lookup costs a fraction of a call (even of an ``lru_cache`` hit)."""
    table = {v: fn(v) for v in dict.fromkeys(values)}
    return list(map(table.__getitem__, values))


def _shared(values: list[Any]) -> list[Any]:
    """``values`` with each distinct value one object: a regex group is a new string per line, and a column of a
    few hosts or paths over a million lines otherwise holds a million copies of them (~60 bytes each)."""
    table = {v: v for v in dict.fromkeys(values)}
    return list(map(table.__getitem__, values))


def _transpose(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """The first ``width`` columns of ``rows``, one C-level map each (``zip(*rows)`` makes an object per row)."""
    return [list(map(itemgetter(k), rows)) for k in range(width)]


def as_records(result: ParseResult) -> list[Record]:
    """The records of ``result`` one object per line, in line order: its batches turned back into the record types
    above. For tests and interactive use; the pipeline takes the batches as they are."""
    out: list[Record] = []
    for r in result.records:
        if isinstance(r, ColumnBatch) and r.table in _TYPES:
            cls = _TYPES[r.table]
            names = list(r.columns)
            columns = [c.tolist() if isinstance(c, np.ndarray) else c for c in r.columns.values()]
            out.extend(cls(**dict(zip(names, values, strict=True))) for values in zip(*columns, strict=True))
        else:
            out.append(r)
    out.sort(key=lambda rec: rec.line)
    return out
