"""``perfquery`` (infiniband-diags): PMA port counters, one record per counter line.

Shape (rdma-core ``infiniband-diags/perfquery.c`` + libibmad ``dump.c``)::

    # Port extended counters: Lid 1719 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
    PortSelect:......................1
    CounterSelect:...................0x0000
    PortXmitData:....................36298026860928
    ...
    SymbolErrorCounter:..............0

Headers: ``# Port counters: <portid> port <p> (CapMask: 0x..)`` (basic, 16/32-bit saturating counters),
``# Port extended counters: ...`` (``-x``, 64-bit) and ``# <Attribute> counters: <portid> port <p>`` for the
other attributes (``-E`` PortRcvErrorDetails, ``-D`` PortXmitDiscardDetails ...). ``<portid>`` is ``Lid N``
(optionally ``Lid N Gid ...``), ``local`` or ``DR path ...``; port 255 (0xFF) is the ``-a`` aggregate of all
ports and is reported as ``port=None``.

Counter names go through :func:`diagnose.models.counters.canonical_counter`; names outside that vocabulary
(PortSelect, CounterSelect, most detail counters) are skipped. ``snapshot`` counts how many times the same
header (attribute, lid, port, guid) appeared before; ``timestamp`` is the last ``date`` / ``date -Is`` output
line or ``# <iso time>`` comment seen before the header. ``guid`` comes from a ``perfquery ... -G <guid>``
command line in the capture (the tool's own headers never show it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ColumnBatch, LineIndex, ParseResult, Record, clip
from diagnose.parsers._ib import ToolError, command_line, iter_lines, norm_guid, prompt, tool_error

FORMAT = "perfquery"


@dataclass(frozen=True, slots=True, kw_only=True)
class PortCounter(Record):
    """One port counter value (cumulative since the last reset), whatever the source.

    Every counter source (perfquery, sysfs ``counters/``, node_exporter, ibdiagnet2 PM, ibqueryerrors)
    emits this record with the canonical counter name, so the extractors see one vocabulary.
    ``device`` is the HCA name when the source knows it (sysfs, node_exporter), else None.
    """

    lid: int | None
    guid: str | None
    port: int | None
    counter: str
    value: int
    extended: bool
    snapshot: int
    timestamp: str | None
    device: str | None = None


ALL_PORTS = 255

_HDR_RE = re.compile(
    r"^\s*#\s*(?P<attr>Port extended|Port|[A-Z][A-Za-z0-9]*)\s+counters:\s*(?P<portid>.*?)\s+port\s+(?P<port>\d+)"
    r"\s*(?:\((?P<caps>[^)]*)\))?\s*$"
)
_LID_RE = re.compile(r"\bLid\s+(?P<lid>\d+)\b")
_FAST_COUNTER_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*):\.+(\d+)\s*$")
_COUNTER_RE = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9]*):\.*(?P<val>\S*)\s*$")
_GUID_ARG_RE = re.compile(r"(?:^|\s)(?:-G|--Guid)(?:\s+|=)(?P<guid>0x[0-9A-Fa-f]{1,16}|[0-9A-Fa-f]{16})\b")

_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TS_RES = (
    # date -Is / -Iseconds / -Ins, and "2024-03-26 13:57:26[.fff][ +0000]"
    re.compile(
        r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}| ?[A-Z]{2,5})?)?$"
    ),
    # date (C locale): "Tue Mar 26 13:57:26 UTC 2024"
    re.compile(
        rf"^{_DOW}\s+{_MON}\s+\d{{1,2}}\s+\d{{2}}:\d{{2}}:\d{{2}}(?:\s+[A-Z]{{2,5}}|\s+[+-]\d{{4}})?\s+\d{{4}}$"
    ),
    # date (en_US locale): "Tue 26 Mar 2024 01:57:26 PM UTC"
    re.compile(
        rf"^{_DOW},?\s+\d{{1,2}}\s+{_MON}\s+\d{{4}}\s+\d{{1,2}}:\d{{2}}:\d{{2}}(?:\s+[AP]M)?(?:\s+[A-Z]{{2,5}})?$"
    ),
)

_SNIFF_HDR = re.compile(
    r"^[ \t]*#[ \t]*(?:Port extended|Port|Port[A-Z][A-Za-z0-9]*)[ \t]+counters:[ \t]+(?:Lid \d+|local|DR path)"
    r".*?[ \t]port[ \t]+\d+",
    re.MULTILINE,
)
_SNIFF_CTR = re.compile(
    r"^[ \t]*(?:PortSelect|CounterSelect|SymbolErrorCounter|LinkErrorRecoveryCounter|LinkDownedCounter"
    r"|PortRcvErrors|PortXmitDiscards|PortXmitData|PortRcvData|PortXmitPkts|PortRcvPkts|PortXmitWait"
    r"|VL15Dropped|PortLocalPhysicalErrors|PortMalformedPktErrors):\.{2,}\S",
    re.MULTILINE,
)
_SNIFF_OTHER = re.compile(
    r"^[ \t]*#[ \t]*(?:Node info|Port info|Switch info|MLNX ext Port info):", re.MULTILINE
)


def sniff(head: str) -> int:
    hdrs = len(_SNIFF_HDR.findall(head))
    ctrs = len(_SNIFF_CTR.findall(head))
    if hdrs and ctrs:
        return 95
    if hdrs:
        return 60
    if ctrs >= 3 and not _SNIFF_OTHER.search(head):
        return 45  # counter lines whose header was cut off
    return 0


def _timestamp(line: str) -> str | None:
    s = line.strip()
    if s.startswith("#"):
        s = s[1:].strip()
    if not s or len(s) > 64:
        return None
    for rx in _TS_RES:
        if rx.match(s):
            return s
    return None


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        if len(text) < BULK_MIN_CHARS or not _parse_bulk(text.encode("utf-8", errors="surrogatepass"), source, host,
                                                         records, problems):
            _parse(text, source, host, records, problems)
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def parse_bytes_bulk(data: bytes, source: str, host: str | None = None) -> ParseResult:
    """The whole file as bytes (large dumps: never cut into chunks, a block must stay with its header)."""
    records: list[Record] = []
    problems: list[str] = []
    try:
        if not _parse_bulk(data, source, host, records, problems):
            _parse(data.decode("utf-8", errors="replace"), source, host, records, problems)
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


# ------------------------------------------------------------------------------------------- bulk (columnar)
#
# A fabric-wide dump holds millions of `Name:.....value` lines (26 per port, two snapshots of every port of
# the fabric). Building one Python object per line costs more than everything else the triage does, so the
# counter lines are decoded with numpy over the raw bytes: where each line starts and ends, the first colon,
# the counter name (identified by a few of its bytes, checked twice), the trailing digits as the value. Only
# the few other lines (headers, prompts, dates, errors: about two per port) go through the Python state
# machine below, which is the same as the line-by-line parser's. The result is one row per counter block
# (one port, one snapshot) with a value and a line-number column per counter: the ``PortCounterWide`` frame.

BULK_MIN_CHARS = 1 << 20  # smaller captures give one PortCounter record per value (the line parser)
_MAX_NAME = 32  # the longest PMA counter name is 28 characters
_FAST_HDR = re.compile(rb"# Port (extended )?counters: Lid (\d+) port (\d+)(?: \([^)\n]*\))?[ \t]*$")
_FAST_CMD = re.compile(rb"\$ perfquery (?:.*?(?:^|\s)(?:-G|--Guid)(?:\s+|=)(0x[0-9A-Fa-f]{1,16}\b|[0-9A-Fa-f]{16}\b))?")
_MAX_DIGITS = 20
_POW10 = np.array([10 ** i for i in range(_MAX_DIGITS)], dtype=np.uint64)


def _find_byte(a: np.ndarray, value: int, chunk: int = 1 << 24) -> np.ndarray:
    """Offsets of one byte value, scanned in chunks (no full-size boolean mask of a 200 MB buffer)."""
    parts = [np.flatnonzero(a[i:i + chunk] == value) + i for i in range(0, len(a), chunk)]
    return np.concatenate(parts) if parts else np.array([], dtype=np.int64)


def _name_words(data: bytes, starts: np.ndarray, nlen: np.ndarray) -> list[np.ndarray]:
    """Every byte of names up to 32 long as four 64-bit words (bytes past the name zeroed): an exact identity.

    Read through one unaligned, byte-strided uint64 view of the buffer: word ``k`` of a name is the 8 bytes at
    ``start + 8k`` (little-endian), masked to the name's length."""
    padded = data + b"\0" * 8
    view = np.ndarray(shape=(len(data) + 1,), dtype="<u8", buffer=padded, offset=0, strides=(1,))
    out = []
    for k in range(_MAX_NAME // 8):
        left = np.clip(nlen - 8 * k, 0, 8)
        w = view[np.minimum(starts + 8 * k, len(data))]
        mask = np.where(left >= 8, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << (left.astype(np.uint64) * np.uint64(8))) - np.uint64(1))
        out.append(w & mask)
    return out


def _parse_bulk(data: bytes, source: str, host: str | None, records: list[Record], problems: list[str]) -> bool:
    """Columnar parse; False when the input is not a plain perfquery dump (the line parser then runs)."""
    if b"\x1b" in data or len(data) < 2:
        return False
    a = np.frombuffer(data, dtype=np.uint8)
    n = len(a)
    pos_t = np.int32 if n < (1 << 31) - 64 else np.int64  # byte offsets: half the memory below 2 GiB
    nl = _find_byte(a, 10).astype(pos_t)
    starts = np.empty(len(nl) + 1, dtype=pos_t)
    starts[0] = 0
    starts[1:] = nl + 1
    ends = np.empty_like(starts)
    ends[:-1] = nl
    ends[-1] = n
    ends -= (ends > starts) & (a[np.clip(ends - 1, 0, n - 1)] == 13)
    length = ends - starts
    first = np.where(length > 0, a[np.clip(starts, 0, n - 1)], np.uint8(0))
    # the first colon of every line
    cp = _find_byte(a, 58)
    colon = np.full(len(starts), -1, dtype=pos_t)
    if len(cp):
        li = np.searchsorted(starts, cp, side="right") - 1
        first_of_line = np.ones(len(li), dtype=bool)
        first_of_line[1:] = li[1:] != li[:-1]
        colon[li[first_of_line]] = cp[first_of_line]
        del li, first_of_line
    del cp, nl
    kv = (first >= 65) & (first <= 90) & (colon > 0)
    kv &= (colon + 1 < ends) & (a[np.clip(colon + 1, 0, n - 1)] == 46)  # `Name:.` : the dotted padding
    kv_idx = np.flatnonzero(kv).astype(pos_t)
    del kv
    c = colon[kv_idx]
    st = starts[kv_idx]
    en = ends[kv_idx]
    nlen = c - st
    # trailing digits: the value
    val = np.zeros(len(kv_idx), dtype=np.uint64)
    ndig = np.zeros(len(kv_idx), dtype=np.int8)
    cur = np.arange(len(kv_idx), dtype=pos_t)  # rows whose digit run is still going: most values are one digit long
    for j in range(1, _MAX_DIGITS + 1):
        pos = en[cur] - j
        b = a[np.clip(pos, 0, n - 1)]
        ok = (pos > c[cur]) & (b >= 48) & (b <= 57)
        cur, b = cur[ok], b[ok]
        if not len(cur):
            break
        ndig[cur] += 1
        val[cur] += (b.astype(np.uint64) - np.uint64(48)) * _POW10[j - 1]
    before = a[np.clip(en - ndig - 1, 0, n - 1)]
    del en, cur
    named = (nlen >= 1) & (nlen <= _MAX_NAME)
    numeric = (ndig > 0) & (before == 46) & named
    if (numeric & (ndig >= 19) & (val >= np.uint64(1 << 63))).any():
        return False  # beyond int64: let the line parser keep them exact
    # counter names, identified by a 64-bit key of a few bytes and checked against a second key
    nm_idx = kv_idx[named]
    words = _name_words(data, st[named], nlen[named])
    key = words[0] ^ (words[1] * np.uint64(0x9E3779B97F4A7C15)) ^ (words[2] * np.uint64(0xC2B2AE3D27D4EB4F)) \
        ^ (words[3] * np.uint64(0x165667B19E3779F9)) ^ (nlen[named].astype(np.uint64) << np.uint64(57))
    inv, uniq = pd.factorize(key)
    if len(uniq) > 512:
        return False  # not a counter dump's small vocabulary
    first_pos = np.empty(len(uniq), dtype=np.int64)
    first_pos[inv[::-1]] = np.arange(len(inv) - 1, -1, -1)
    rep = first_pos[inv]
    exact = all(np.array_equal(w, w[rep]) for w in words)
    del words, key, rep
    if not exact:
        return False  # two names share a key: do not guess
    names = [data[int(starts[i]):int(colon[i])].decode("ascii", errors="replace") for i in nm_idx[first_pos]]
    if not all(nm.isalnum() for nm in names):
        return False
    canon = [canonical_counter(nm) for nm in names]
    vocab = sorted({cn for cn in canon if cn is not None})
    code = np.array([-1 if cn is None else vocab.index(cn) for cn in canon], dtype=np.int64)
    ccode_named = code[inv]
    num_named = numeric[named]
    # plain lines: numeric counter lines, and non-numeric lines of names outside the vocabulary
    # (CounterSelect:....0x0000): both only count towards their block's length
    plain_named = num_named | (ccode_named < 0)
    plain_idx = nm_idx[plain_named]
    num_idx = nm_idx[num_named]
    ccode = ccode_named[num_named]
    val = val[named][num_named]
    del c, st, nlen, ndig, before, numeric, named, ccode_named, plain_named, num_named, inv
    special = np.ones(len(starts), dtype=bool)
    special[plain_idx] = False
    special &= length > 0
    sp_idx = np.flatnonzero(special)
    if len(sp_idx) > max(64, len(starts) // 4):
        return False  # a mixed capture rather than a dump: the line parser is the right tool
    state = _Machine(source, host, problems, records)
    fast_hdr, fast_cmd, header, close = _FAST_HDR.match, _FAST_CMD.match, state.header, state._close
    for i, s0, e0 in zip(sp_idx.tolist(), starts[sp_idx].tolist(), ends[sp_idx].tolist(), strict=True):
        raw_b = data[s0:e0]
        lead = raw_b[:1]
        # the two lines every block repeats take a short path; anything else goes through the full machine
        if lead == b"#":
            m = fast_hdr(raw_b)
            if m is not None:
                state.last_bad = None
                header(i + 1, m.group(1) is not None, int(m.group(2)), int(m.group(3)))
                continue
        elif lead == b"$":
            m = fast_cmd(raw_b)
            if m is not None:
                state.last_bad = None
                close(i + 1)
                g = m.group(1)
                state.guid = None if g is None else state.norm(g.decode("ascii"))
                continue
        state.line(i + 1, raw_b.decode("utf-8", errors="replace"))
    if not state.b_line:
        return False
    # counter lines -> the block open at that line
    closers = np.array(state.closer_lines, dtype=np.int64)
    closer_block = np.array(state.closer_block, dtype=np.int64)

    # the block open at each line: the last closing line at or before it (a running count of closers)
    mark = np.zeros(len(starts) + 1, dtype=np.int32)
    mark[closers] = 1  # closers are distinct line numbers
    last_closer = np.cumsum(mark) - 1
    block_at = np.append(closer_block, -1)[np.where(last_closer >= 0, last_closer, len(closer_block))]

    def block_of(line_numbers: np.ndarray) -> np.ndarray:
        return block_at[line_numbers]

    lines1 = num_idx + 1
    blk = block_of(lines1)
    plain_blk = block_of(plain_idx + 1)
    orphan = (blk < 0) & (ccode >= 0)
    if orphan.any():
        problems.append(f"line {int(lines1[orphan][0])}: counter line before any perfquery header "
                        "(header missing or cut off)")
    nb = len(state.b_line)
    counts = np.bincount(plain_blk[plain_blk >= 0], minlength=nb)
    for b, k in state.b_extra.items():
        counts[b] += k
    keep = (blk >= 0) & (ccode >= 0)
    vals = np.full((nb, len(vocab)), -1, dtype=np.int64)
    lns = np.zeros((nb, len(vocab)), dtype=np.int32 if len(starts) < (1 << 31) - 1 else np.int64)
    vals[blk[keep], ccode[keep]] = val[keep].astype(np.int64)
    lns[blk[keep], ccode[keep]] = lines1[keep]
    last_num = int(lines1[-1]) if len(lines1) else 0
    state.finish(counts, last_num)
    keys = state.b_key
    columns: dict[str, object] = {
        "source": np.full(nb, source, dtype=object),
        "line": np.array(state.b_line, dtype=np.int64),
        "host": np.array(state.b_host, dtype=object),
        "lid": np.array([k[1] for k in keys], dtype=object),
        "guid": np.array([k[3] for k in keys], dtype=object),
        "port": np.array([k[2] for k in keys], dtype=object),
        "extended": np.array([k[0] == "Port extended" for k in keys], dtype=bool),
        "snapshot": np.array(state.b_snap, dtype=np.int64),
        "timestamp": np.array(state.b_ts, dtype=object),
    }
    for k, cn in enumerate(vocab):
        columns[f"v:{cn}"] = vals[:, k]
        columns[f"l:{cn}"] = lns[:, k]
    records.append(ColumnBatch(
        source=source, line=int(state.b_line[0]), text="", host=host, table="PortCounterWide", columns=columns,
        line_columns=("line", *(f"l:{cn}" for cn in vocab)), lines=LineIndex(data, starts, ends),
    ))
    return True


class _Machine:
    """The perfquery state machine: block headers, ``date`` stamps, prompts and perfquery commands, tool errors,
    counter lines. The bulk parser feeds it only the lines that are not plain numeric counter lines (those are
    decoded with numpy); the line parser feeds it every line and has it emit the counter records (``emit``)."""

    def __init__(self, source: str, host: str | None, problems: list[str], records: list[Record],
                 emit: bool = False) -> None:
        self.source, self.host, self.problems, self.records = source, host, problems, records
        self.emit = emit
        self.orphan_reported = False
        self._canon: dict[str, str | None] = {}
        self.guid: str | None = None
        self.timestamp: str | None = None
        self.seen: dict[tuple[str, int | None, int | None, str | None], int] = {}
        # blocks, column-wise (one entry per block header)
        self.b_key: list[tuple[str, int | None, int | None, str | None]] = []
        self.b_line: list[int] = []
        self.b_portid: list[str] = []
        self.b_snap: list[int] = []
        self.b_ts: list[str | None] = []
        self.b_host: list[str | None] = []
        self.b_extra: dict[int, int] = {}  # counter lines the state machine saw (non-numeric values), per block
        self.cur: int | None = None
        self.closer_lines: list[int] = []
        self.closer_block: list[int] = []
        self.last_bad: tuple[int, str] | None = None
        self._guids: dict[str, str | None] = {}  # a switch's GUID repeats for each of its ports

    def norm(self, g: str) -> str | None:
        got = self._guids.get(g)
        if got is None:
            got = self._guids[g] = norm_guid(g)
        return got

    def header(self, n: int, attr: str | bool, lid: int | None, port_num: int, portid: str = "") -> None:
        """A block header; ``attr`` True/False is the fast path's "Port extended"/"Port"."""
        if attr is True or attr is False:
            attr = "Port extended" if attr else "Port"
        key = (attr, lid, None if port_num == ALL_PORTS else port_num, self.guid)
        snap = self.seen.get(key, 0)
        self.seen[key] = snap + 1
        b = len(self.b_line)
        self.b_key.append(key)
        self.b_line.append(n)
        self.b_portid.append(portid)
        self.b_snap.append(snap)
        self.b_ts.append(self.timestamp)
        self.b_host.append(self.host)
        self.closer_lines.append(n)
        self.closer_block.append(b)
        self.cur = b

    def label(self, b: int) -> str:
        lid, port = self.b_key[b][1], self.b_key[b][2]
        return f"Lid {lid if lid is not None else self.b_portid[b]} port {ALL_PORTS if port is None else port}"

    def _close(self, n: int, block: int = -1) -> None:
        self.closer_lines.append(n)
        self.closer_block.append(block)
        self.cur = block if block >= 0 else None

    def line(self, n: int, line: str) -> None:
        stripped = line.strip()
        if not stripped:
            return
        self.last_bad = None
        lead = stripped[0]
        if lead == "$" and stripped.startswith("$ perfquery "):  # the usual `$ perfquery -x -G <guid> <port>` echo
            self._close(n)
            gm = _GUID_ARG_RE.search(stripped)
            self.guid = None if gm is None else self.norm(gm.group("guid"))
            return
        err = tool_error(line) if lead not in "#$" else None
        if err is not None:
            self.records.append(ToolError(source=self.source, line=n, text=clip(line), host=self.host, tool=FORMAT,
                                          message=err))
            return
        m = _HDR_RE.match(line) if lead == "#" else None
        if m:
            lm = _LID_RE.search(m.group("portid"))
            self.header(n, m.group("attr"), int(lm.group("lid")) if lm else None, int(m.group("port")),
                        m.group("portid"))
            return
        ts = _timestamp(line)
        if ts is not None:
            self._close(n)
            self.timestamp = ts
            return
        p = prompt(line)
        cmd = p[1] if p is not None else command_line(line, ("perfquery",))
        if p is not None or cmd is not None:
            self._close(n)
            if p is not None and p[0]:
                self.host = p[0]
            if cmd and "perfquery" in cmd:
                gm = _GUID_ARG_RE.search(cmd)
                self.guid = norm_guid(gm.group("guid")) if gm else None
            return
        if stripped.startswith("#"):
            self._close(n)
            return
        m = _COUNTER_RE.match(line)
        if not m:
            if self.cur is not None and stripped.startswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")) and ":" not in stripped:
                self.last_bad = (n, stripped)
            return
        name, raw = m.group("name"), m.group("val")
        if self.cur is None:
            # an orphan counter line; the bulk parser reports the numeric ones itself, after its pass
            if self.emit and not self.orphan_reported and canonical_counter(name):
                self.problems.append(f"line {n}: counter line before any perfquery header (header missing or cut off)")
                self.orphan_reported = True
            return
        if not raw or not raw.isdigit():
            self.b_extra[self.cur] = self.b_extra.get(self.cur, 0) + 1
            if canonical_counter(name) is None:
                return
            if not raw:
                self.last_bad = (n, stripped)
            else:
                self.problems.append(f"line {n}: unparseable value {raw!r} for {name}")
            return
        self.counter(n, line, name, int(raw))

    def counter(self, n: int, line: str, name: str, value: int) -> None:
        """A numeric counter line inside the open block (``emit``: as a PortCounter record)."""
        b = self.cur
        assert b is not None
        self.b_extra[b] = self.b_extra.get(b, 0) + 1
        self.last_bad = None
        if not self.emit:
            return
        canon = self._canon.get(name, "")
        if canon == "":
            canon = self._canon[name] = canonical_counter(name)
        if canon is None:
            return
        key = self.b_key[b]
        self.records.append(PortCounter(
            source=self.source, line=n, text=clip(line), host=self.host, lid=key[1], guid=key[3], port=key[2],
            counter=canon, value=value, extended=key[0] == "Port extended", snapshot=self.b_snap[b],
            timestamp=self.b_ts[b],
        ))

    def finish(self, counts: np.ndarray, last_numeric_line: int) -> None:
        """The line parser's truncation check on the last block."""
        nb = len(self.b_line)
        if not nb or self.cur is None or self.cur != nb - 1:
            return
        attr = self.b_key[-1][0]
        same = np.array([k[0] == attr for k in self.b_key[:-1]], dtype=bool)
        expected = int(counts[:-1][same].max()) if same.any() else 0
        mine = int(counts[-1])
        label = self.label(nb - 1)
        if self.last_bad is not None and self.last_bad[0] > last_numeric_line:
            self.problems.append(f"truncated: block for {label} ends early (line {self.last_bad[0]}: "
                                 f"{self.last_bad[1]!r})")
        elif mine == 0:
            self.problems.append(f"truncated: block for {label} ends early (no counters)")
        elif mine < expected:
            self.problems.append(f"truncated: block for {label} ends early ({mine} of {expected} lines)")


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    """Line by line, for captures that are not plain dumps (prompts, several tools, errors, cut files)."""
    state = _Machine(source, host, problems, records, emit=True)
    fast, counter = _FAST_COUNTER_RE.match, state.counter
    for n, line in iter_lines(text):
        if state.cur is not None:
            fm = fast(line)  # inside a block almost every line is `Name:.....value`
            if fm is not None:
                counter(n, line, fm.group(1), int(fm.group(2)))
                continue
        state.line(n, line)
    nb = len(state.b_line)
    state.finish(np.array([state.b_extra.get(i, 0) for i in range(nb)], dtype=np.int64), 0)
