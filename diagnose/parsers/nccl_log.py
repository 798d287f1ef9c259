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
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import compress, repeat
from operator import itemgetter, methodcaller, not_
from typing import Any

import numpy as np

from diagnose.models.records import TEXT_CLIP, ColumnBatch, ParseResult, Record, clip
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
# The usual line, ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>``: where the text before the first ``] NCCL INFO ``
# is _PLAIN_PREFIX whole, _PREFIX would match the line from its first character with exactly these groups. _LINES
# splits every line of a text in one call: (text before ``] NCCL INFO ``, message), or ("", "") for a line without
# it, one pair per line. Lines whose prefix is not plain go through _PREFIX.
_PLAIN_PREFIX = re.compile(r"(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)")
_LINES = re.compile(r"^(?:([^\]\n]*)\] NCCL INFO (.*)|.*)$", re.M)

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
    """NcclInitRank's fields from the groups of _INIT (comm, rank, nranks, cdev, ndev, bus, cid, phase); a group that
    took no part is None or "" (in bulk)."""
    return int(g[1]), int(g[2]), int(g[3]), g[5], g[6] or None, g[7]  # type: ignore[arg-type]


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
    """The record an INFO message makes, or None, for any message but ``Channel...`` and ``comm ...`` (``_whats``
    parses those in bulk). It depends on the message alone, so ``parse`` asks once per distinct message: a large
    job repeats the same few dozen messages on every rank."""
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
_WARN_NO = _TABLE_NO[NcclWarn]


def _what(msg: str) -> tuple[Any, ...]:
    """(table number, *the record's own fields) of a stripped INFO message that ``_classify`` handles. One tuple of
    plain values, with no reference to a type or a list: the garbage collector then untracks it at once instead of
    scanning it at every collection."""
    try:
        kind = _classify(msg)
    except (ValueError, IndexError) as exc:  # defensive: a damaged line is reported, never fatal
        return _DAMAGED, f"unparseable NCCL INFO line ({exc})"
    if kind is None:
        return _NOTHING
    cls, fields = kind
    return (_ENV_NO if cls is EnvSetting else _TABLE_NO[cls], *fields)


def _whats(msgs: list[str]) -> list[tuple[Any, ...]]:
    """``_what`` of each of ``msgs`` (distinct INFO messages, as logged). The messages that name a rank are each
    logged once, tens of thousands of them (4 to 8 ``Channel`` lines, a ``comm`` line and two ``Init`` lines per
    rank): they are parsed in bulk, one regex call for all; the others one by one. A bulk route takes exactly the
    messages whose branch of ``_classify`` it replaces (by their first word), so the result is the same."""
    stripped = list(map(str.strip, msgs))
    out: list[tuple[Any, ...] | None] = [None] * len(msgs)
    for prefix, bulk in (("Channel", _channels), ("comm ", _comms), ("ncclCommInitRank ", _init_ranks)):
        at = list(compress(range(len(stripped)), map(methodcaller("startswith", prefix), stripped)))
        if at:
            for i, what in zip(at, bulk(_take(stripped, at)), strict=True):
                out[i] = what
    return [_what(m) if what is None else what for m, what in zip(stripped, out, strict=True)]


@lru_cache(maxsize=8)
def _bulk_pattern(pattern: re.Pattern[str], search: bool) -> re.Pattern[str]:
    # ``pattern`` (at the start, or after the fewest characters: search) or nothing, then the rest of the line:
    # exactly one match per line
    return re.compile("^(?:" + (".*?" if search else "") + pattern.pattern.removeprefix("^") + ")?.*$", re.M)


def _bulk_groups(pattern: re.Pattern[str], msgs: list[str], search: bool = False) -> list[tuple[str, ...]]:
    """``pattern.match(m).groups()`` (``search``: ``pattern.search(m)``) for each message, from one regex call over
    all of them: a group that took no part, or a message that did not match, gives "" (the patterns used here never
    match an empty group)."""
    found = _bulk_pattern(pattern, search).findall("\n".join(msgs))
    if len(found) != len(msgs):  # cannot happen: a message is one line
        raise ValueError("bulk match out of step")
    return found


def _channels(msgs: list[str]) -> list[tuple[Any, ...]]:
    """``Channel 02/0 : 8[0] -> 9[1] [send] via NET/IB/0/GDRDMA`` -> (NcclChannel's number, channel, rank, peer,
    direction, transport, net, net_dev, gdr, via)."""
    found = _bulk_groups(_CHANNEL, msgs)
    hit = list(compress(range(len(found)), map(itemgetter(0), found)))
    out: list[tuple[Any, ...]] = [_NOTHING] * len(msgs)
    if hit:
        groups = _take(found, hit)  # ch, rank, rdev, peer, pdev, dir, via
        col = [list(map(itemgetter(k), groups)) for k in range(7)]
        paths = list(map(_via, col[6]))  # transport, net, net_dev, gdr
        rows = zip(repeat(_TABLE_NO[NcclChannel]), map(int, col[0]), map(int, col[1]), map(int, col[3]),
                   [d or None for d in col[5]], *(map(itemgetter(k), paths) for k in range(4)), col[6])
        if len(hit) == len(msgs):  # the usual case: every one is a channel line
            return list(rows)
        for i, row in zip(hit, rows, strict=True):
            out[i] = row
    return out


def _init_ranks(msgs: list[str]) -> list[tuple[Any, ...] | None]:
    """``ncclCommInitRank comm 0x.. rank R nranks N cudaDev D ... busId B commId C - Init START`` -> (NcclInitRank's
    number, *fields); None where _INIT does not match (``_classify`` then decides, as for any message)."""
    no = _TABLE_NO[NcclInitRank]
    return [(no, *_init_rank(g)) if g[1] else None for g in _bulk_groups(_INIT, msgs, search=True)]


def _comms(msgs: list[str]) -> list[tuple[Any, ...]]:
    """``comm 0x.. rank R nRanks N nNodes M localRanks L ...`` -> (NcclCommInfo's number, rank, nranks, nnodes,
    local_ranks)."""
    found = _bulk_groups(_COMM, msgs)
    out: list[tuple[Any, ...]] = [_NOTHING] * len(msgs)
    no = _TABLE_NO[NcclCommInfo]
    for i, g in enumerate(found):
        if g[0]:
            out[i] = (no, *map(int, g))
    return out


@lru_cache(maxsize=1 << 16)
def _plain_prefix(prefix: str) -> tuple[str, int, int, None] | bool:
    """(host, pid, dev, no timestamp) of the usual prefix, or False (the line then goes through _PREFIX). Cached
    across calls: a large log is parsed in chunks, and a rank's lines are spread over all of them."""
    m = _PLAIN_PREFIX.fullmatch(prefix)
    return (m["host"], int(m["pid"]), int(m["dev"]), None) if m else False


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    """One row per NCCL line that says something, gathered per record type into a ``ColumnBatch`` (table = the
    type's name, columns = its fields): a 4,096-host job logs ~650k lines, and one object per line cost more than
    the rest of the parse. ``EnvSetting`` lines stay records (other parsers fill that table too).

    No Python statement runs per line of the usual shape: one regex call splits all lines into prefix and message,
    each distinct message is classified once and each distinct prefix (a rank's) parsed once, and the rows are
    picked per table with C-level maps. Only lines of other shapes (timestamps, launcher prefixes, WARN) go
    through the general regex one by one."""
    raws = text.split("\n")
    pairs = _LINES.findall(text)
    if len(pairs) != len(raws):  # cannot happen (one match per line); if it did, every line takes the general path
        pairs = [("", "")] * len(raws)
    msgs = list(map(itemgetter(1), pairs))
    prefixes = list(map(itemgetter(0), pairs))
    del pairs
    distinct = list(dict.fromkeys(msgs))
    whats = dict(zip(distinct, _whats(distinct), strict=True))
    rows_what: list[tuple[Any, ...]] = list(map(whats.__getitem__, msgs))
    del msgs
    distinct = list(dict.fromkeys(prefixes))
    whos = dict(zip(distinct, map(_plain_prefix, distinct), strict=True))
    rows_who: list[Any] = list(map(whos.__getitem__, prefixes))
    del prefixes
    for i in compress(range(len(rows_who)), map(not_, rows_who)):  # lines of any other shape
        rows_what[i] = _NOTHING
        raw = raws[i]
        if "NCCL " not in raw:
            continue
        m = _PREFIX.search(raw)
        if not m:
            continue
        rows_who[i] = (m["host"], int(m["pid"]), int(m["dev"]), m["ts"])
        level = m["level"]
        if level == "WARN" or level == "ABORT":
            rows_what[i] = (_WARN_NO, m["src"], m["func"], m["msg"].strip())
        elif level == "INFO":
            rows_what[i] = whats.get(m["msg"]) or _whats([m["msg"]])[0]
    table = np.fromiter(map(itemgetter(0), rows_what), dtype=np.int64, count=len(rows_what))
    problems = [f"line {i + 1}: {rows_what[i][1]}" for i in np.flatnonzero(table == _DAMAGED).tolist()]
    rows = np.flatnonzero(table >= _ENV_NO)  # the lines that make a record, in order
    records = _records(rows, table[rows], raws, rows_who, rows_what, source, host, "\r" in text)
    if text and not text.endswith("\n") and len(rows) and rows[-1] == len(raws) - 1:
        last = raws[-1]
        if "NCCL" in last and not last.rstrip().endswith((")", ".", "COMPLETE", "START")) and len(last) < 30:
            problems.append("truncated: the last line ends mid-message")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _records(rows: np.ndarray, table: np.ndarray, raws: list[str], whos: list[tuple[str, int, int, str | None]],
             whats: list[tuple[Any, ...]], source: str, host: str | None, has_cr: bool) -> list[Record]:
    """The rows (0-based line indexes, ascending, and their table numbers), split by table: a ColumnBatch per record
    type (columns named after its fields, in line order) and the EnvSetting records. Column values stay Python
    objects (lists) so that ``build_frames`` infers each column's dtype once over the whole table, as it does for
    records; only ``line`` and the fields that are never None are arrays (``line`` for the offset of a chunk to be
    added in place). Every step is one C call per column (itemgetter, map): only EnvSetting records are built one
    by one."""
    records: list[Record] = []
    if not len(rows):
        return records
    order = np.argsort(table, kind="stable")  # by table, each in line order
    present, starts = np.unique(table[order], return_index=True)
    ends = [*starts[1:].tolist(), len(order)]
    for no, lo, hi in zip(present.tolist(), starts.tolist(), ends, strict=True):
        idx = rows[order[lo:hi]]
        at = idx.tolist()
        row_whos, row_whats, row_texts = _take(whos, at), _take(whats, at), _take(raws, at)
        if has_cr or max(map(len, row_texts)) > TEXT_CLIP:
            row_texts = list(map(clip, row_texts))
        row_lines = idx + 1
        if no == _ENV_NO:
            records.extend(
                EnvSetting(name=f[1], value=f[2], origin="nccl_log", source=source, line=n, text=t, host=w[0])
                for n, t, w, f in zip(row_lines.tolist(), row_texts, row_whos, row_whats, strict=True)
            )
            continue
        cls = _TABLE_TYPES[no]
        columns: dict[str, object] = {"source": [source] * len(at), "line": row_lines, "text": row_texts}
        # itemgetter per column, not zip(*rows): zip would make an iterator object per row
        columns.update((name, list(map(itemgetter(k), row_whos))) for k, name in enumerate(_BASE_FIELDS[3:]))
        names = [f.name for f in dataclasses.fields(cls)][len(_BASE_FIELDS):]
        columns.update((name, list(map(itemgetter(k), row_whats))) for k, name in enumerate(names, 1))
        for name, dtype in _typed_columns(cls):
            try:
                columns[name] = np.array(columns[name], dtype=dtype)
            except OverflowError:  # an integer beyond int64: left to pandas, as for records
                pass
        records.append(ColumnBatch(source=source, line=int(row_lines[0]), text="", host=host, table=cls.__name__,
                                   columns=columns, line_columns=("line",)))
    return records


@cache
def _typed_columns(cls: type) -> tuple[tuple[str, type], ...]:
    """The fields of ``cls`` that always hold a value of one type (``int``, ``float``, ``bool``, never None): built
    as arrays of the dtype pandas would infer for them from Python values, which costs ~5x less than the inference
    (``line`` is an array already)."""
    dtypes = {"int": np.int64, "float": np.float64, "bool": np.bool_}
    return tuple((f.name, dtypes[f.type]) for f in dataclasses.fields(cls) if f.type in dtypes and f.name != "line")


def _take(seq: list[Any], positions: list[int]) -> list[Any]:
    """``[seq[i] for i in positions]`` in one C call."""
    return [seq[positions[0]]] if len(positions) == 1 else list(itemgetter(*positions)(seq))


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
