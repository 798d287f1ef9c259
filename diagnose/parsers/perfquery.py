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
from diagnose.models.records import ColumnBatch, LineIndex, ParseResult, Record, clip, int64_column
from diagnose.parsers._ib import ToolError, norm_guid, tool_error
from diagnose.parsers._lines import command_line, iter_lines, prompt

FORMAT = "perfquery"
PARSE_NS_PER_BYTE = 7.0  # the bulk reader, measured on simulated 4,096-host dumps (the line parser is slower)


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
_FAST_COUNTER_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*):\.+(\d{1,20})\s*$")  # longer: out of range (_Machine)
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
            _parse(str(data, "utf-8", errors="replace"), source, host, records, problems)  # bytes or a map
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


# ------------------------------------------------------------------------------------------- bulk (columnar)
#
# A fabric-wide dump holds millions of `Name:.....value` lines (26 per port, two snapshots of every port of
# the fabric). Building one Python object per line costs more than everything else the triage does, so the
# file is decoded with numpy over the raw bytes, mostly eight bytes at a time (little-endian 64-bit words read
# at any offset, tested byte-wise with SWAR bit tricks):
#
# * where each line starts and ends;
# * the counter name: the first 32 bytes of a line (its window) hold the name and its `:.` in a dump, whose
#   names are padded with dots to one column, so its windows take a few dozen distinct values: the name and
#   colon are worked out once per distinct window;
# * the value: the digits that end the line, eight per word;
# * the two lines every block repeats, the `$ perfquery ...` command and the `# Port ... counters: Lid L port P`
#   header: their fixed parts are compared as words and their numbers decoded as digits; header tails and
#   command lines (less their trailing port number) are checked once per distinct text, and the state machine
#   takes them a run at a time. Only the few other lines (dates, prompts, errors) go through it line by line.
#
# The result is one row per counter block (one port, one snapshot) with a value and a line-number column per
# counter: the ``PortCounterWide`` frame.

BULK_MIN_CHARS = 1 << 20  # smaller captures give one PortCounter record per value (the line parser)
_MAX_NAME = 32  # the longest PMA counter name is 28 characters
_MAX_WINDOWS = 1 << 12  # more distinct windows than this: not a padded dump, each line is worked out alone
_TOO_LONG = 99  # a run of more than 24 digits
_MIN_RUN = 16  # shorter runs of header/command lines go through the state machine line by line
_CHUNK = 1 << 18  # lines decoded at a time
_MAX_KEY = 64  # header tails and command lines longer than this take the state machine
_ATTRS = np.array(["Port", "Port extended"], dtype=object)
_HDR_PREFIXES = (b"# Port counters: Lid ", b"# Port extended counters: Lid ")  # then `L port P` and a tail:
_HDR_TAIL = re.compile(rb"(?: \([^)\n]*\))?[ \t]*")
_CMD_PREFIX = b"$ perfquery "
_CMD_CANON = b"$ perfquery -x -G 0x"  # the usual command up to its GUID's 16 hex digits (at most 32 bytes)
# the -G argument of `$ perfquery` lines, one match per line (as _GUID_ARG_RE finds it, `[^\S\n]` for `\s` so
# that no match runs into the next line; canonical GUIDs apart, they need no normalising)
_CMD_GUID = re.compile(
    r"^(?:\$ perfquery(?= .*\S)(?:.*?[^\S\n](?:-G|--Guid)(?:[^\S\n]+|=)"
    r"(?:(0x[0-9a-f]{16})|(0x[0-9A-Fa-f]{1,16}|[0-9A-Fa-f]{16}))\b)?(.?)).*$",
    re.MULTILINE,
)

_U64 = np.uint64
_HIGH = _U64(0x8080808080808080)
_LOW7 = _U64(0x7F7F7F7F7F7F7F7F)
_ONES = _U64(0x0101010101010101)
_KEEP_LOW = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)  # the k lowest bytes of a word
_DIGIT_BITS = ~_KEEP_LOW[::-1] & _U64(0x0F0F0F0F0F0F0F0F)  # the low nibbles of the k highest bytes
# frexp exponent of a word's highest flagged byte (8 * byte + 8, 0 when none) -> ASCII digits above that byte
_TOP_DIGITS = np.array([7 - (e - 8) // 8 if e else 8 for e in range(65)], dtype=np.int64)
_LOW_BYTE = np.array([(e - 8) // 8 if e else 8 for e in range(65)], dtype=np.int64)  # -> that byte
_POW10 = np.array([10 ** i for i in range(20)], dtype=np.uint64)
_MIX = np.array([1, 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5,
                 0x85EBCA77C2B2AE63, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x9FB21C651E98DF25,
                 0xD6E8FEB86659FD93, 0xA0761D6478BD642F], dtype=np.uint64)


def _find_byte(a: np.ndarray, value: int, chunk: int = 1 << 24) -> np.ndarray:
    """Offsets of one byte value, scanned in chunks (no full-size boolean mask of a 200 MB buffer)."""
    pos_t = np.int32 if len(a) < 1 << 31 else np.int64
    parts = [(np.flatnonzero(a[i:i + chunk] == value) + i).astype(pos_t) for i in range(0, len(a), chunk)]
    return np.concatenate(parts) if parts else np.array([], dtype=pos_t)


class _Words:
    """Little-endian 64-bit words of a byte buffer at any offsets (an unaligned, byte-strided view of it);
    bytes outside the buffer read as zero."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def at(self, pos: np.ndarray, count: int | None = None) -> np.ndarray:
        """The word at each offset, or the ``count`` consecutive words there (shape ``(len(pos), count)``)."""
        n, size = len(self.data), 8 * (count or 1)
        view = np.ndarray(shape=(max(n - size + 1, 0), count or 1), dtype="<u8", buffer=self.data, strides=(1, 8))
        if len(pos) and n >= size and pos.min() >= 0 and pos.max() <= n - size:
            w = view[pos]
        else:
            w = view[np.clip(pos, 0, n - size)] if n >= size else np.zeros((len(pos), count or 1), dtype=np.uint64)
            for i in np.flatnonzero((pos < 0) | (pos > n - size)).tolist():  # the first and last few bytes
                p = int(pos[i])
                raw = b"\0" * min(max(-p, 0), size) + self.data[max(p, 0):max(p + size, 0)]
                w[i] = np.frombuffer(raw[:size].ljust(size, b"\0"), dtype="<u8")
        return w if count else w[:, 0]


def _flag(w: np.ndarray, value: int) -> np.ndarray:
    """The high bit of each byte of the words equal to ``value``, exact from the lowest byte up to the first
    such byte (the has-zero-byte test on ``word ^ value``; bytes above a match may be flagged falsely)."""
    x = w ^ _U64(value * 0x0101010101010101)
    return (x - _ONES) & ~x & _HIGH


def _non_digits(w: np.ndarray) -> np.ndarray:
    """The high bit of every byte of the words that is not an ASCII digit."""
    x = w ^ _U64(0x3030303030303030)  # digits -> 0..9
    return (((x & _LOW7) + _U64(0x7676767676767676)) | x) & _HIGH  # >= 10, or a byte >= 0x80


def _exponent(flags: np.ndarray) -> np.ndarray:
    """The frexp exponent of each word: 8 * byte + 8 for the highest flagged byte, 0 for none."""
    return np.frexp(flags.astype(np.float64))[1]


def _first_byte(words: np.ndarray, value: int) -> np.ndarray:
    """Offset of the first byte equal to ``value`` in each row of words (``8 * words.shape[1]`` when none)."""
    out = np.full(len(words), 8 * words.shape[1], dtype=np.int64)
    todo = np.arange(len(words))
    for k in range(words.shape[1]):
        hit = _flag(words[todo, k], value)
        found = hit != 0
        out[todo[found]] = 8 * k + _LOW_BYTE[_exponent(hit[found] & (~hit[found] + _U64(1)))]
        todo = todo[~found]
    return out


def _top_digits(w: np.ndarray) -> np.ndarray:
    """How many of each word's highest bytes (the end of a line, read little-endian) are ASCII digits, 0-8."""
    return _TOP_DIGITS[_exponent(_non_digits(w))]


def _low_digits(w: np.ndarray) -> np.ndarray:
    """How many of each word's lowest bytes (the text at its offset) are ASCII digits, 0-8."""
    other = _non_digits(w)
    return _LOW_BYTE[_exponent(other & (~other + _U64(1)))]


def _top_value(w: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The number written by each word's ``k`` highest bytes (digits), by the SWAR eight-digit conversion
    (the bytes below count as leading zeros)."""
    v = w & _DIGIT_BITS[k]
    v = (v * _U64(2561)) >> _U64(8)
    v = ((v & _U64(0x00FF00FF00FF00FF)) * _U64(6553601)) >> _U64(16)
    return ((v & _U64(0x0000FFFF0000FFFF)) * _U64(42949672960001)) >> _U64(32)


def _low_value(w: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The number written by each word's ``k`` (1-8) lowest bytes."""
    return _top_value(w << ((8 - k) * 8).astype(np.uint64), k)


def _groups(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows of ``cols`` (uint64, rows x columns) with equal values: (group of each row, first row of each group),
    by a 64-bit mix of the columns checked exactly afterwards; None if two different rows share a mix."""
    key = cols[:, 0].copy()
    for k in range(1, cols.shape[1]):
        key ^= cols[:, k] * _MIX[k]
    inv, _ = pd.factorize(key)
    top = np.maximum.accumulate(inv)  # codes are numbered in order of first appearance
    first = np.flatnonzero(np.r_[True, top[1:] != top[:-1]]) if len(inv) else np.zeros(0, dtype=np.int64)
    if not (np.take(cols[first], inv, axis=0) == cols).all():
        return None
    return inv, first


def _line_values(words: _Words, en: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The decimal digits ending each line (ending at ``en``): (value, number of digits), up to three words of
    them; a longer run counts ``_TOO_LONG`` digits. Values of 19 digits or more may have wrapped around."""
    w = words.at(en - 8)
    ndig = _top_digits(w)
    val = _top_value(w, ndig)
    rows = np.flatnonzero(ndig == 8)
    for j in (1, 2):  # eight more digits per word
        w = words.at(en[rows] - 8 * j - 8)
        k = _top_digits(w)
        val[rows] += _top_value(w, k) * _POW10[8 * j]
        ndig[rows] += k
        rows = rows[k == 8]
    ndig[rows] = _TOO_LONG
    return val, ndig


def _counter_names(words: _Words, a: np.ndarray, st: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[bytes]] | None:
    """Counter lines among candidate lines (starting at ``st``): (length of the name before its ``:.``, 0 when
    the line is none; name id; the name of each id). None: ambiguous names.

    A line's window (its first 32 bytes) decides: the first colon before the first newline, then a dot. In a
    padded dump the windows take a few dozen values, each worked out once."""
    win = words.at(st, _MAX_NAME // 8)
    grouped = _groups(win)
    if grouped is None:
        return None
    inv: np.ndarray | None
    inv, rep = grouped
    if len(rep) > _MAX_WINDOWS:
        inv, rep = None, np.arange(len(st))
    rwin = win[rep] if inv is not None else win
    newline, colon = _first_byte(rwin, 10), _first_byte(rwin, 58)
    rlen = np.where(colon < newline, colon, np.where(newline == _MAX_NAME, _MAX_NAME, 0))
    nxt = np.minimum(rlen + 1, _MAX_NAME - 1)  # the byte after the colon, when in the window
    after = (rwin[np.arange(len(rwin)), nxt // 8] >> (8 * (nxt % 8)).astype(np.uint64)) & _U64(0xFF)
    name_len = np.where((rlen > 0) & (rlen < _MAX_NAME - 1) & (after == 46), rlen, 0)
    # past the window: a colon at byte 32, or the dot after a colon at byte 31, is checked line by line
    edge = rlen >= _MAX_NAME - 1
    name_len[edge] = rlen[edge]
    nlen = name_len[inv] if inv is not None else name_len
    if edge.any():
        rows = np.flatnonzero(edge[inv] if inv is not None else edge)
        at = st[rows] + nlen[rows]
        ok = (a[np.minimum(at, len(a) - 1)] == 58) & (a[np.minimum(at + 1, len(a) - 1)] == 46) & (at + 1 < len(a))
        nlen[rows[~ok]] = 0
    # names: the window masked to the name (and its length)
    masked = rwin & _KEEP_LOW[np.clip(rlen[:, None] - 8 * np.arange(_MAX_NAME // 8), 0, 8)]
    names = _groups(np.column_stack([masked, rlen.astype(np.uint64)]))
    if names is None:
        return None
    name_of_rep, first = names
    texts = [words.data[p:p + k] for p, k in zip(st[rep[first]].tolist(), rlen[first].tolist(), strict=True)]
    return nlen, name_of_rep[inv] if inv is not None else name_of_rep, texts


def _counter_lines(words: _Words, a: np.ndarray, starts: np.ndarray, ends: np.ndarray, length: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[bytes]] | None:
    """The lines of the form ``Name:.`` (an upper-case letter first), decoded ``_CHUNK`` lines at a time (small
    temporaries: cache and allocator friendly): (line index, name id, value, number of digits: 0 when the line
    does not end in a ``.``-preceded number), and the name of each id. None: ambiguous names."""
    names: dict[bytes, int] = {}
    parts = []
    for lo in range(0, len(starts), _CHUNK):
        st, en = starts[lo:lo + _CHUNK], ends[lo:lo + _CHUNK]
        cand = np.flatnonzero(length[lo:lo + _CHUNK] >= 3)  # `A:.` at least
        cand = cand[a[st[cand]] - np.uint8(65) < 26]
        found = _counter_names(words, a, st[cand])
        if found is None:
            return None
        nlen, name_id, texts = found
        named = nlen > 0
        rows = cand[named]
        end = en[rows]
        val, ndig = _line_values(words, end)
        ndig[(ndig < _TOO_LONG) & (a[np.maximum(end - ndig - 1, 0)] != 46)] = 0  # `.....123`
        ids = np.array([names.setdefault(t, len(names)) for t in texts], dtype=np.int32)
        parts.append(((rows + lo).astype(starts.dtype), ids[name_id[named]], val, ndig.astype(np.int8)))
    idx, name_id, val, ndig = (np.concatenate(p) for p in zip(*parts, strict=True))
    return idx, name_id, val, ndig, list(names)


def _parse_bulk(data: bytes, source: str, host: str | None, records: list[Record], problems: list[str]) -> bool:
    """Columnar parse; False when the input is not a plain perfquery dump (the line parser then runs)."""
    if data.find(b"\x1b") >= 0 or len(data) < 2:  # (find: the same on bytes and on a map of the file)
        return False
    a = np.frombuffer(data, dtype=np.uint8)
    n = len(a)
    pos_t = np.int32 if n < (1 << 31) - 64 else np.int64  # byte offsets: half the memory below 2 GiB
    nl = _find_byte(a, 10).astype(pos_t, copy=False)
    starts = np.empty(len(nl) + 1, dtype=pos_t)
    starts[0] = 0
    starts[1:] = nl + 1
    ends = np.empty_like(starts)
    ends[:-1] = nl
    ends[-1] = n
    del nl
    if data.find(b"\r") >= 0:
        ends -= (ends > starts) & (a[np.clip(ends - 1, 0, n - 1)] == 13)
    length = ends - starts
    words = _Words(data)
    found = _counter_lines(words, a, starts, ends, length)
    if found is None:
        return False  # two names share a key: do not guess
    nm_idx, name_id, val, ndig, names = found
    used = np.flatnonzero(np.bincount(name_id, minlength=len(names)))
    if len(used) > 512:
        return False  # not a counter dump's small vocabulary
    canon: dict[int, str | None] = {}
    for g in used.tolist():
        nm = names[g].decode("ascii", errors="replace")
        if not nm.isalnum():
            return False
        canon[g] = canonical_counter(nm)
    vocab = sorted({cn for cn in canon.values() if cn is not None})
    code = np.full(len(names), -1, dtype=np.int16)
    for g, cn in canon.items():
        code[g] = -1 if cn is None else vocab.index(cn)
    ccode_named = code[name_id]
    num_named = ndig > 0
    big = np.flatnonzero(ndig >= 19)
    if any(d == _TOO_LONG or int(data[e - d:e]) >= 1 << 63 for e, d in zip(
            ends[nm_idx[big]].tolist(), ndig[big].tolist(), strict=True)):
        return False  # beyond int64: let the line parser keep them exact
    del name_id, ndig, code
    # plain lines: numeric counter lines, and non-numeric lines of names outside the vocabulary
    # (CounterSelect:....0x0000): both only count towards their block's length
    plain_named = num_named | (ccode_named < 0)
    special = length > 0
    special[nm_idx[plain_named]] = False
    sp_idx = np.flatnonzero(special)
    del special
    if len(sp_idx) > max(64, len(starts) // 4):
        return False  # a mixed capture rather than a dump: the line parser is the right tool
    state = _Machine(source, host, problems, records)
    _special_lines(state, data, words, sp_idx, starts[sp_idx], ends[sp_idx])
    if not state.b_line:
        return False
    nb = len(state.b_line)
    # the block open at each counter line: that of the last closing line at or before it (a running count)
    mark = np.zeros(len(starts) + 1, dtype=np.int32)
    mark[np.array(state.closer_lines, dtype=np.int64)] = 1  # closers are distinct line numbers
    block_named = np.array([-1, *state.closer_block], dtype=np.int32)[np.cumsum(mark, dtype=np.int32)[nm_idx + 1]]
    del mark
    plain_blk = block_named[plain_named]
    counts = np.bincount(plain_blk[plain_blk >= 0], minlength=nb)
    for b, k in state.b_extra.items():
        counts[b] += k
    del plain_blk, plain_named
    known = num_named & (ccode_named >= 0)
    orphan = np.flatnonzero(known & (block_named < 0))
    if len(orphan):
        problems.append(f"line {int(nm_idx[orphan[0]]) + 1}: counter line before any perfquery header "
                        "(header missing or cut off)")
    last_num = int(nm_idx[num_named][-1]) + 1 if num_named.any() else 0
    keep = known & (block_named >= 0)
    cell = ccode_named[keep].astype(np.int64) * nb + block_named[keep]  # a row of values (and of lines) per counter
    vals = np.full((len(vocab), nb), -1, dtype=np.int64)
    lns = np.zeros((len(vocab), nb), dtype=np.int32 if len(starts) < (1 << 31) - 1 else np.int64)
    vals.reshape(-1)[cell] = val[keep].view(np.int64)
    lns.reshape(-1)[cell] = nm_idx[keep] + 1
    del block_named, ccode_named, nm_idx, num_named, known, keep, cell, val
    state.finish(counts, last_num)
    columns: dict[str, object] = {
        "source": np.full(nb, source, dtype=object),
        "line": np.array(state.b_line, dtype=np.int64),
        "host": np.array(state.b_host, dtype=object),
        "lid": np.array(state.b_lid, dtype=object),
        "guid": np.array(state.b_guid, dtype=object),
        "port": np.array(state.b_port, dtype=object),
        "extended": np.array(state.b_attr, dtype=object) == "Port extended",
        "snapshot": _snapshots([state.b_attr, state.b_lid, state.b_port, state.b_guid]),
        "timestamp": np.array(state.b_ts, dtype=object),
    }
    for k, cn in enumerate(vocab):
        columns[f"v:{cn}"] = vals[k]
        columns[f"l:{cn}"] = lns[k]
    records.append(ColumnBatch(
        source=source, line=int(state.b_line[0]), text="", host=host, table="PortCounterWide", columns=columns,
        line_columns=("line", *(f"l:{cn}" for cn in vocab)), lines=LineIndex(data, starts, ends),
    ))
    return True


def _has_prefix(head: np.ndarray, prefix: bytes) -> np.ndarray:
    """Rows whose first words (a line's first bytes, rows x 4) start with ``prefix`` (at most 32 bytes)."""
    hit = np.ones(len(head), dtype=bool)
    for k in range(0, len(prefix), 8):
        part = prefix[k:k + 8]
        hit &= (head[:, k // 8] & _KEEP_LOW[len(part)]) == _U64(int.from_bytes(part, "little"))
    return hit


def _strings(words: _Words, pos: np.ndarray, size: np.ndarray, *extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with the same bytes ``[pos, pos + size)`` (size <= _MAX_KEY) and the same ``extra`` columns:
    (group of each row, first row of each group)."""
    count = max(1, -(-int(size.max(initial=0)) // 8))
    cols = words.at(pos, count) & _KEEP_LOW[np.clip(size[:, None] - 8 * np.arange(count), 0, 8)]
    got = _groups(np.column_stack([cols, *(c.astype(np.uint64) for c in (size, *extra))]))
    if got is None:  # two different strings share a key: every row its own group
        return np.arange(len(pos)), np.arange(len(pos))
    return got


def _run_lines(state: _Machine, data: bytes, words: _Words, starts: np.ndarray, ends: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which lines are a block header ``# Port [extended] counters: Lid L port P [(CapMask ...)]`` (kind 1) or a
    ``$ perfquery`` command (kind 2), decoded with numpy; the others (kind 0, and any unusual header or
    command) go to the state machine. Also: extended, lid, port (headers), the normalised -G GUID (commands).

    Header tails and commands are checked once per distinct text: a command without its trailing port number,
    which can take no part in the -G argument ``_GUID_ARG_RE`` finds."""
    m = len(starts)
    kind = np.zeros(m, dtype=np.int8)
    ext = np.zeros(m, dtype=bool)
    lid = np.zeros(m, dtype=np.int64)
    port = np.zeros(m, dtype=np.int64)
    guid = np.full(m, None, dtype=object)
    head = words.at(starts, 4)
    for extended, prefix in enumerate(_HDR_PREFIXES):
        rows = np.flatnonzero(_has_prefix(head, prefix))
        at = starts[rows] + len(prefix)
        w_lid = words.at(at)
        k_lid = _low_digits(w_lid)
        at += k_lid
        ok = (k_lid >= 1) & (k_lid <= 7) & ((words.at(at) & _KEEP_LOW[6]) == _U64(int.from_bytes(b" port ", "little")))
        at += 6
        w_port = words.at(at)
        k_port = _low_digits(w_port)
        at += k_port
        ok &= (k_port >= 1) & (k_port <= 7) & (ends[rows] - at <= _MAX_KEY)
        rows, at, w_lid, k_lid, w_port, k_port = rows[ok], at[ok], w_lid[ok], k_lid[ok], w_port[ok], k_port[ok]
        inv, first = _strings(words, at, ends[rows] - at)
        tail_ok = np.array([_HDR_TAIL.fullmatch(data[int(at[i]):int(ends[rows[i]])]) is not None
                            for i in first.tolist()], dtype=bool)[inv]
        rows = rows[tail_ok]
        kind[rows] = 1
        ext[rows] = bool(extended)
        lid[rows] = _low_value(w_lid[tail_ok], k_lid[tail_ok])
        port[rows] = _low_value(w_port[tail_ok], k_port[tail_ok])
    rows = np.flatnonzero(_has_prefix(head, _CMD_PREFIX))
    end = ends[rows]
    k = _top_digits(words.at(end - 8))
    cut = (k >= 1) & (k <= 3) & ((words.at(end - k - 8) >> _U64(56)) == 32)  # ` <port>` at the end
    end = np.where(cut, end - k - 1, end)
    short = end - starts[rows] <= _MAX_KEY
    rows, end, cut = rows[short], end[short], cut[short]
    inv, first = _strings(words, starts[rows], end - starts[rows], cut)
    kinds = np.zeros(len(first), dtype=np.int8)
    guids = np.full(len(first), None, dtype=object)
    # the usual command, `$ perfquery -x -G 0x<16 lower-case hex digits> <port>`, read as is (its -G argument is
    # canonical: what _CMD_GUID's first group takes); the others, one regex call over their texts
    f_start, f_end, f_cut = starts[rows[first]], end[first], cut[first]
    canon = _canonical_cmds(words, f_start, f_end - f_start)
    at = (f_start[canon] + len(_CMD_CANON) - 2).tolist()
    kinds[canon] = 2
    guids[canon] = [data[i:i + 18].decode("ascii") for i in at] if at else []
    other = np.flatnonzero(~canon)
    text = b"\n".join([data[s:e] + (b" 1" if c else b"") for s, e, c in zip(
        f_start[other].tolist(), f_end[other].tolist(), f_cut[other].tolist(), strict=True)])
    found = _CMD_GUID.findall(text.decode("utf-8", errors="replace")) if len(other) else []
    if len(found) == len(other):
        kinds[other] = [2 if c or o or t else 0 for c, o, t in found]
        guids[other] = [c or (state.norm(o) if o else None) for c, o, _ in found]
        kind[rows] = kinds[inv]
        guid[rows] = guids[inv]
    return kind, ext, lid, port, guid


def _canonical_cmds(words: _Words, pos: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Which commands (``size`` bytes at ``pos``, less a trailing port) are exactly ``$ perfquery -x -G 0x`` and 16
    lower-case hex digits."""
    ok = (size == len(_CMD_CANON) + 16) & _has_prefix(words.at(pos, 4), _CMD_CANON)
    digits = words.at(pos + len(_CMD_CANON), 2).astype("<u8", copy=False).view(np.uint8).reshape(-1, 16)
    return ok & (((digits >= 48) & (digits <= 57)) | ((digits >= 97) & (digits <= 102))).all(axis=1)


def _special_lines(state: _Machine, data: bytes, words: _Words, idx: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> None:
    """Feed the lines that are not plain counter lines to the state machine, in order: long runs of block
    headers and ``$ perfquery`` commands (all but a few lines of a dump) at once, the others one by one."""
    kind, ext, lid, port, guid = _run_lines(state, data, words, starts, ends)
    lines = idx + 1
    other = np.flatnonzero(kind == 0).tolist()
    lo = 0
    for hi in [*other, len(idx)]:
        if hi - lo >= _MIN_RUN:
            state.run(lines[lo:hi], kind[lo:hi] == 1, ext[lo:hi], lid[lo:hi], port[lo:hi], guid[lo:hi])
            lo = hi
        for i in range(lo, min(hi + 1, len(idx))):
            state.line(int(lines[i]), data[int(starts[i]):int(ends[i])].decode("utf-8", errors="replace"))
        lo = hi + 1


def _snapshots(cols: list[list]) -> np.ndarray:
    """For each block, how many earlier blocks have the same (attribute, lid, port, guid): ``snapshot``."""
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for col in cols:
        ints = int64_column(col)  # LIDs and ports
        codes, uniq = pd.factorize(ints if ints is not None else np.array(col, dtype=object),
                                   use_na_sentinel=False)
        key, _ = pd.factorize(key * len(uniq) + codes)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    at = np.arange(len(sk))
    begin = np.maximum.accumulate(np.where(np.r_[True, sk[1:] != sk[:-1]], at, 0))
    snap = np.empty(len(sk), dtype=np.int64)
    snap[order] = at - begin
    return snap


class _Machine:
    """The perfquery state machine: block headers, ``date`` stamps, prompts and perfquery commands, tool errors,
    counter lines. The bulk parser feeds it only the lines that are not plain numeric counter lines (those are
    decoded with numpy), long runs of headers and commands at once (``run``); the line parser feeds it every
    line and has it emit the counter records (``emit``)."""

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
        self.b_attr: list[str] = []
        self.b_lid: list[int | None] = []
        self.b_port: list[int | None] = []
        self.b_guid: list[str | None] = []
        self.b_line: list[int] = []
        self.b_portid: list[str] = []
        self.b_snap: list[int] = []  # the line parser's; the bulk parser numbers snapshots at the end
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

    def header(self, n: int, attr: str, lid: int | None, port_num: int, portid: str = "") -> None:
        """A block header: opens block ``len(b_line)`` (snapshot counted here only for the line parser, which
        emits records at once; ``_snapshots`` numbers all of the bulk parser's blocks at the end)."""
        port = None if port_num == ALL_PORTS else port_num
        snap = 0
        if self.emit:
            key = (attr, lid, port, self.guid)
            snap = self.seen.get(key, 0)
            self.seen[key] = snap + 1
        b = len(self.b_line)
        self.b_attr.append(attr)
        self.b_lid.append(lid)
        self.b_port.append(port)
        self.b_guid.append(self.guid)
        self.b_line.append(n)
        self.b_portid.append(portid)
        self.b_snap.append(snap)
        self.b_ts.append(self.timestamp)
        self.b_host.append(self.host)
        self.closer_lines.append(n)
        self.closer_block.append(b)
        self.cur = b

    def run(self, n: np.ndarray, hdr: np.ndarray, ext: np.ndarray, lid: np.ndarray, port: np.ndarray,
            guid: np.ndarray) -> None:
        """Consecutive lines that are each a ``# Port [extended] counters: Lid L port P`` header (``hdr``) or a
        ``$ perfquery`` command (``guid``: its normalised -G argument), with the effect ``line`` would have on
        each in turn (bulk parser only: it numbers the snapshots afterwards)."""
        h = np.flatnonzero(hdr)
        at = np.arange(len(hdr))
        last_cmd = np.maximum.accumulate(np.where(hdr, -1, at))[h]  # the command before each header
        b0 = len(self.b_line)
        blocks = np.where(hdr, b0 + np.cumsum(hdr) - 1, -1)
        ports = port[h].astype(object)
        ports[port[h] == ALL_PORTS] = None
        k = len(h)
        self.b_attr += _ATTRS[ext[h].astype(np.int64)].tolist()
        self.b_lid += lid[h].tolist()
        self.b_port += ports.tolist()
        cur_guid = np.array(self.guid, dtype=object)  # what np.where makes of a str or None (numpy's stubs take no None)
        self.b_guid += np.where(last_cmd >= 0, guid[np.maximum(last_cmd, 0)], cur_guid).tolist()
        self.b_line += n[h].tolist()
        self.b_portid += [""] * k
        self.b_snap += [0] * k
        self.b_ts += [self.timestamp] * k
        self.b_host += [self.host] * k
        self.closer_lines += n.tolist()
        self.closer_block += blocks.tolist()
        self.cur = int(blocks[-1]) if hdr[-1] else None
        if not hdr.all():
            self.guid = guid[at[~hdr][-1]]
        self.last_bad = None

    def label(self, b: int) -> str:
        lid, port = self.b_lid[b], self.b_port[b]
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
                self.problems.append(f"line {n}: unparseable value {raw[:40]!r} for {name}")
            return
        if len(raw) > 20:  # no counter is wider than 64 bits (20 digits): a damaged line, not a number to convert
            self.b_extra[self.cur] = self.b_extra.get(self.cur, 0) + 1
            if canonical_counter(name) is not None:
                self.problems.append(f"line {n}: value of {len(raw)} digits for {name}: beyond any 64-bit counter, "
                                     "not read")
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
        self.records.append(PortCounter(
            source=self.source, line=n, text=clip(line), host=self.host, lid=self.b_lid[b], guid=self.b_guid[b],
            port=self.b_port[b], counter=canon, value=value, extended=self.b_attr[b] == "Port extended",
            snapshot=self.b_snap[b], timestamp=self.b_ts[b],
        ))

    def finish(self, counts: np.ndarray, last_numeric_line: int) -> None:
        """The line parser's truncation check on the last block."""
        nb = len(self.b_line)
        if not nb or self.cur is None or self.cur != nb - 1:
            return
        same = np.array(self.b_attr[:-1], dtype=object) == self.b_attr[-1]
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
