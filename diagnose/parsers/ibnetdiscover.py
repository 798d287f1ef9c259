"""``ibnetdiscover`` (infiniband-diags): the fabric topology, in its two text shapes.

Format reference: rdma-core ``infiniband-diags/ibnetdiscover.c`` and the man page's "TOPOLOGY FILE FORMAT"
section, https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/man/ibnetdiscover.8.in.rst and
https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/man/common/sec_topology-file.rst .

Ports report (``ibnetdiscover -p``, rdma-core ``infiniband-diags/ibnetdiscover.c`` ``dump_ports_report``): one line
per port, ``%2s %5d %2d 0x%016x %s %s`` then either `` - <peer type> <peer lid> <peer port> <peer GUID> ( '<desc>' -
'<peer desc>' )`` or, for a port without peer, padding and ``'<desc>'``::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

Topology file (default output, ``out_switch``/``out_ca``/``out_switch_port``/``out_ca_port``)::

    vendid=0x8f1
    devid=0x5a06
    sysimgguid=0x5442ba00003000
    switchguid=0x5442ba00003080(5442ba00003080)
    Switch  24 "S-005442ba00003080"         # "ISR9024 Voltaire" base port 0 lid 6 lmc 0
    [22]    "H-0008f10403961354"[1](8f10403961355)         # "MT23108 InfiniHost Mellanox Technologies" lid 4 4xSDR
    ...
    caguid=0x8f10403960984
    Ca      2 "H-0008f10403960984"          # "MT23108 InfiniHost Mellanox Technologies"
    [1](8f10403960985)     "S-0008f10400410015"[6]         # lid 16 lmc 1 "SW-6IB4 Voltaire" lid 3 4xSDR

Records: :class:`~diagnose.parsers._fabric.FabricNode` per ``Switch``/``Ca``/``Rt`` line (node GUID from the
``S-``/``H-``/``R-`` name) and a :class:`~diagnose.parsers._fabric.FabricLink` per port line (each node lists its
own ports, so a cable appears once from each end). The ports report gives one FabricLink per connected port line
and a :class:`~diagnose.parsers._fabric.FabricPortState` per port without peer; its GUIDs are *port* GUIDs (equal
to the node GUID for switches and mlx5 HCAs). Its descriptions are stripped of the padding spaces some switches
put inside the quotes (``' 5FB0406-spine-IB02 '``); old builds print the description of an unconnected port
without quotes. Speeds: ``???`` (down port / unknown) -> None. The topology file does not show port state; its
links are connected ports, state None.

Speed: a 2,048-host rail-optimised fat tree gives a 10 MB topology file with ~100k port lines. The line-by-line
reader (:func:`_parse_lines`: prompt/tool-error checks, then up to four regexes and the normalisers per line,
one frozen record at a time) takes ~1.2 s on it; :func:`_parse` takes ~0.5 s and gives the same records and
problems. It splits the text once, sorts the lines by their first character, and reads the port lines (``[``)
and the node/ports-report lines (``S``/``C``/``R``) with one ``findall`` per kind over the joined lines. The
shapes ``ibnetdiscover.c`` prints are read column-wise, with the normalised GUIDs, numbers and ``4xNDR`` cached
(they recur on every port line) and the records built field by field (:func:`_build`); id lines and blank lines
are skipped. Every other line (prompts, tool errors, comments, ports without peer, port lines with an odd comment,
a line cut by truncation) goes through the line-by-line logic with the state it would have there. The cyclic
garbage collector is paused meanwhile (:func:`diagnose.gcpause.gc_paused`). ``tests/parsers/test_ibnetdiscover_fast.py`` checks
the equivalence on every sample, on variants of them and on generated mixtures of real and malformed lines.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import fields
from functools import cache, lru_cache
from itertools import accumulate, chain, compress, islice, repeat
from operator import add, attrgetter, eq, itemgetter, not_, sub
from types import MemberDescriptorType
from typing import Any, NamedTuple

import structlog

from diagnose.gcpause import gc_paused
from diagnose.models.records import TEXT_CLIP, ParseResult, Record, clip
from diagnose.parsers._fabric import FabricLink, FabricNode, FabricPortState, norm_width, speed_name
from diagnose.parsers._ib import iter_lines, norm_guid, shell_line

FORMAT = "ibnetdiscover"

log = structlog.get_logger("diagnose.parsers.ibnetdiscover")

_T = r"(?:CA|SW|RT)"
_PORTS_RE = re.compile(
    rf"^\s*(?P<type>{_T})\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]{{1,16}})\s+"
    r"(?P<width>\d+[xX])\s+(?P<speed>\S+)"
    rf"(?:\s+-\s+(?P<ptype>{_T})\s+(?P<plid>\d+)\s+(?P<pport>\d+)\s+(?P<pguid>0x[0-9a-fA-F]{{1,16}})"
    r"\s+\(\s*'(?P<desc>.*)'\s+-\s+'(?P<pdesc>.*)'\s*\)"
    r"|\s+(?P<alone>.*))?\s*$"
)
_NODE_RE = re.compile(
    r"^\s*(?P<kind>Switch|Ca|Rt)\s+(?P<nports>\d+)\s+\"(?P<pfx>[SHR])-(?P<guid>[0-9a-fA-F]{1,16})\"\s*"
    r"(?:#\s*\"(?P<desc>.*?)\"(?P<rest>.*))?$"
)
_BASE_LID_RE = re.compile(r"\bport\s+0\s+lid\s+(?P<lid>\d+)")
_LINK_RE = re.compile(
    r"^\s*\[(?P<port>\d+)\](?:\[[^\]]*\])?\s*(?:\((?P<pguid>[0-9a-fA-F]{1,16})\))?\s*"
    r"\"(?P<rpfx>[SHR])-(?P<rguid>[0-9a-fA-F]{1,16})\"\[(?P<rport>\d+)\](?:\[[^\]]*\])?"
    r"\s*(?:\((?P<rpguid>[0-9a-fA-F]{1,16})\))?\s*(?:#\s*(?P<comment>.*))?$"
)
# switch port: # "desc" lid 4 4xSDR      CA port: # lid 16 lmc 1 "desc" lid 3 4xSDR
_SW_COMMENT_RE = re.compile(r"^\"(?P<rdesc>.*)\"\s+lid\s+(?P<rlid>\d+)\s+(?P<ws>\d+x\S+)")
_CA_COMMENT_RE = re.compile(
    r"^lid\s+(?P<lid>\d+)\s+lmc\s+\d+\s+\"(?P<rdesc>.*)\"\s+lid\s+(?P<rlid>\d+)\s+(?P<ws>\d+x\S+)"
)
_WS_RE = re.compile(r"^(?P<w>\d+x)(?P<s>.+)$")
_TYPES = {"Switch": "SW", "Ca": "CA", "Rt": "RT", "S": "SW", "H": "CA", "R": "RT"}
_TOOLS = ("ibnetdiscover",)

_SNIFF_PORTS = re.compile(rf"^[ \t]*{_T}[ \t]+\d+[ \t]+\d+[ \t]+0x[0-9a-fA-F]{{16}}[ \t]+\d+x[ \t]+\S+", re.MULTILINE)
_SNIFF_NODE = re.compile(r"^(?:Switch|Ca|Rt)[ \t]+\d+[ \t]+\"[SHR]-[0-9a-fA-F]+\"", re.MULTILINE)
_SNIFF_IDS = re.compile(r"^(?:switchguid|caguid|rtguid|sysimgguid|vendid|devid)=0x[0-9a-fA-F]+", re.MULTILINE)
_SNIFF_LINK = re.compile(r"^\[\d+\](?:\([0-9a-fA-F]+\))?[ \t]+\"[SHR]-[0-9a-fA-F]+\"\[\d+\]", re.MULTILINE)


def sniff(head: str) -> int:
    ports = len(_SNIFF_PORTS.findall(head))
    nodes = len(_SNIFF_NODE.findall(head))
    ids = len(_SNIFF_IDS.findall(head))
    links = len(_SNIFF_LINK.findall(head))
    if nodes and (ids or links):
        return 95
    if links >= 2 or (ids >= 2 and links):
        return 60  # topology file cut before/after node lines
    if ports >= 2:
        return 95
    if ports == 1:
        return 70
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        with gc_paused():
            _parse(text, source, host, records, problems)
    except Exception as exc:  # pragma: no cover - defensive
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)




@lru_cache(maxsize=256)
def _ws(text: str | None) -> tuple[str | None, str | None]:
    """``4xNDR`` -> ``('4X', 'NDR')``; cached, a fabric prints a handful of width/speed pairs on every port line."""
    if not text:
        return None, None
    m = _WS_RE.match(text)
    if not m:
        return None, None
    return norm_width(m.group("w")), speed_name(m.group("s"))


# --------------------------------------------------------------------------------------------- line by line


class _Lines:
    """The line-by-line reader: its state (the current node block, the shell host, the node waiting for a LID)
    and :meth:`feed`, the logic for one line.

    Nodes are kept as rows ``[line, text, host, guid, node_type, description, ports, lid]``: ``lid`` is filled in
    by the first port line of a CA (the only place a CA's LID is printed), and :meth:`finish` turns the rows into
    records. Every other record is appended to ``records`` as it is read.
    """

    __slots__ = (
        "source", "host", "records", "problems", "node_guid", "node_type", "node_desc", "node_lid", "node_line",
        "node_links", "pending", "nodes", "bad_comments", "last_content",
    )

    def __init__(self, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
        self.source = source
        self.host = host
        self.records = records
        self.problems = problems
        self.node_guid: str | None = None
        self.node_type: str | None = None
        self.node_desc: str | None = None
        self.node_lid: int | None = None
        self.node_line = 0
        self.node_links = 0
        self.pending: list[Any] | None = None  # the last node row: its LID may still come from a port line
        self.nodes: list[list[Any]] = []
        self.bad_comments: list[tuple[int, str]] = []
        self.last_content: tuple[int, str] | None = None

    def feed(self, n: int, line: str) -> None:
        stripped = line.strip()
        if not stripped:
            return
        self.last_content = (n, line)
        kind, self.host = shell_line(line, n, self.source, FORMAT, _TOOLS, self.host, self.records)
        if kind is not None:
            if kind == "boundary":
                self.node_guid = None
            return
        m = _PORTS_RE.match(line)
        if m:
            _ports_line(m, n, line, self.host, self.source, self.records, self.problems)
            return
        m = _NODE_RE.match(line)
        if m:
            self.start_node(n, line, norm_guid(m.group("guid")), m.group("kind"), m.group("nports"), m.group("desc"),
                            m.group("rest") or "")
            return
        m = _LINK_RE.match(line)
        if m:
            self._link(n, line, m)

    def start_node(self, n: int, line: str, guid: str | None, kind: str, nports: str, desc: str | None,
                   rest: str) -> None:
        """A ``Switch``/``Ca``/``Rt`` line: a new block; ``guid`` is normalised, ``rest`` follows the description."""
        self.node_guid = guid
        self.node_type = _TYPES[kind]
        self.node_desc = desc
        lm = _BASE_LID_RE.search(rest)
        self.node_lid = int(lm.group("lid")) if lm else None
        self.node_line = n
        self.node_links = 0
        self.pending = None
        if guid is not None:
            self.pending = [n, line, self.host, guid, self.node_type, desc, int(nports), self.node_lid]
            self.nodes.append(self.pending)

    def _link(self, n: int, line: str, m: re.Match[str]) -> None:
        if self.node_guid is None:
            self.problems.append(f"line {n}: port line outside a node block (node line missing or cut off)")
            return
        self.node_links += 1
        comment = (m.group("comment") or "").strip()
        lid: int | None = self.node_lid
        if self.node_type == "SW":
            cm = _SW_COMMENT_RE.match(comment)
        else:
            cm = _CA_COMMENT_RE.match(comment)
            if cm:
                lid = int(cm.group("lid"))
        if cm is None:
            self.bad_comments.append((n, comment[:60]))
        elif lid is not None and self.pending is not None and self.pending[7] is None:
            self.pending[7] = lid  # a CA's LID is only on its port lines
        width, speed = _ws(cm.group("ws") if cm else None)
        peer_guid = norm_guid(m.group("rguid"))
        if peer_guid is None:
            return
        self.records.append(
            FabricLink(
                source=self.source,
                line=n,
                text=clip(line),
                host=self.host,
                guid=self.node_guid,
                port=int(m.group("port")),
                peer_guid=peer_guid,
                peer_port=int(m.group("rport")),
                width=width,
                speed=speed,
                state=None,
                phys_state=None,
                lid=lid,
                peer_lid=int(cm.group("rlid")) if cm else None,
                description=self.node_desc,
                peer_description=cm.group("rdesc") if cm else None,
            )
        )

    def finish(self) -> None:
        """Node records, line order, then the problems only the end of the file shows (cut comments, truncation)."""
        if self.nodes:
            cols = [list(map(itemgetter(i), self.nodes)) for i in range(8)]
            self.records.extend(_build(
                FabricNode, len(self.nodes), source=repeat(self.source), line=cols[0], text=list(map(clip, cols[1])),
                host=cols[2], guid=cols[3], node_type=cols[4], description=cols[5], ports=cols[6], lid=cols[7],
            ))
        _sort_by_line(self.records)
        last_content = self.last_content
        for n, snippet in self.bad_comments:
            cut = last_content is not None and n == last_content[0]
            self.problems.append(f"{'truncated: last ' if cut else ''}line {n}: unparseable port comment {snippet!r}")
        if last_content is not None:
            n, line = last_content
            s = line.strip()
            if (self.node_guid is not None and self.node_links == 0 and n == self.node_line
                    and self.node_type == "SW"):
                self.problems.append(f"truncated: switch block at line {n} ends early (no port shown)")
            elif s.startswith("[") and not _LINK_RE.match(line):
                self.problems.append(f"truncated: last line {n} is cut ({s[:60]!r})")
            elif (s.startswith(("CA ", "SW ", "RT ")) and not _PORTS_RE.match(line)) or s.endswith(" -"):
                self.problems.append(f"truncated: last line {n} is cut ({s[:60]!r})")


def _parse_lines(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    """The reference reader: every line through :meth:`_Lines.feed`. :func:`_parse` gives the same result."""
    st = _Lines(source, host, records, problems)
    for n, line in iter_lines(text):
        st.feed(n, line)
    st.finish()


# --------------------------------------------------------------------------------------------- whole file

# Port and node lines are recognised by their first character, then read by one regex per kind over the joined
# lines of that kind (one ``findall`` tuple per line: a line the strict alternative does not match gives a tuple
# of empty strings). The strict alternatives are the shapes ``ibnetdiscover.c`` prints, written with ``[ \t]``
# where the line-by-line regexes say ``\s`` and with quote-free descriptions, so that a line they match is read
# the same way by _LINK_RE/_NODE_RE and the comment regexes. Such a line is no shell prompt, tool error or
# command echo either (a prompt needs ``user@host`` or ``[user@host``, an error line a word and a colon, an echo
# a leading ``$``/``#``/``>``), nor is a line that starts with ``vendid=``/``devid=``/``...guid=``.
_LINK_ROW_RE = re.compile(
    r"""^(?:
    \[(\d+)\][ \t]*(?:\([0-9a-fA-F]{1,16}\))?[ \t]*"[SHR]-([0-9a-fA-F]{1,16})"\[(\d+)\]
    [ \t]*(?:\([0-9a-fA-F]{1,16}\))?[ \t]*\#[ \t]*
    (?:lid[ \t]+(\d+)[ \t]+lmc[ \t]+\d+[ \t]+)?    # a CA port's comment starts with its own LID and LMC
    "([^"\n]*)"[ \t]+lid[ \t]+(\d+)[ \t]+(\d+x\S+)[ \t]*
    |.*)$""",
    re.MULTILINE | re.VERBOSE,
)
_NODE_ROW_RE = re.compile(
    r"""^(?:
    (Switch|Ca|Rt)[ \t]+(\d+)[ \t]+"[SHR]-([0-9a-fA-F]{1,16})"[ \t]*(?:(\#)[ \t]*"([^"\n]*)"(.*))?
    |(?:CA|SW|RT)[ \t]+(\d+)[ \t]+(\d+)[ \t]+0x([0-9a-fA-F]{1,16})[ \t]+(\d+[xX])[ \t]+(\S+)     # ports report,
        [ \t]+-[ \t]+(?:CA|SW|RT)[ \t]+(\d+)[ \t]+(\d+)[ \t]+0x([0-9a-fA-F]{1,16})                # a connected port
        [ \t]+\([ \t]*'([^'\n]*)'[ \t]+-[ \t]+'([^'\n]*)'[ \t]*\)[ \t]*
    |((?:CA|SW|RT))[ \t]+\d+[ \t]+\d+[ \t]+0x[0-9a-fA-F]{1,16}[ \t]+\d+[xX][ \t]+\S.*   # any other port
    |.*)$""",
    re.MULTILINE | re.VERBOSE,
)
_KIND, _NPORTS, _NGUID, _HASH, _NDESC, _REST = range(6)
_PTYPE = 16
_LINK_HEAD, _NODE_HEAD, _BLANK_HEAD, _OTHER_HEAD = range(4)
_HEADS = {"[": _LINK_HEAD, "S": _NODE_HEAD, "C": _NODE_HEAD, "R": _NODE_HEAD, "": _BLANK_HEAD}
_IDS = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")
_CHUNK = 1 << 15  # lines per chunk: bounds the regex tuples alive at once (~5 MiB)
_first_char = itemgetter(slice(None, 1))
_get_port, _get_rguid, _get_rport, _get_ca_lid, _get_rdesc, _get_rlid, _get_ws = map(itemgetter, range(7))
_get_kind, _get_nguid, _get_ptype = itemgetter(_KIND), itemgetter(_NGUID), itemgetter(_PTYPE)
(_get_p_lid, _get_p_port, _get_p_guid, _get_p_width, _get_p_speed, _get_p_plid, _get_p_pport, _get_p_pguid,
 _get_p_desc, _get_p_pdesc) = map(itemgetter, range(6, 16))
_GET_BLOCK = tuple(map(itemgetter, range(6)))  # _Block.guid ... _Block.pending


class _LinkColumns:
    """The FabricLink fields of the port lines read column-wise (one list per field and run of port lines), and
    the caches of the normalised values, which repeat on many lines (one int/GUID object each, shared)."""

    def __init__(self) -> None:
        self.n = 0
        self.parts: list[dict[str, list[Any]]] = []
        self.ints: dict[str, int] = {}
        self.guids: dict[str, str] = {}
        self.widths: dict[str, str | None] = {}  # by the topology file's '4xNDR'
        self.speeds: dict[str, str | None] = {}
        self.norm: dict[Any, dict[str, str | None]] = {}  # normaliser -> printed -> normalised (ports report)

    def add(self, n: int, **columns: Iterable[Any]) -> None:
        """Columns of ``n`` more records; materialised now, so that the regex tuples they come from can go."""
        self.n += n
        self.parts.append({name: col if isinstance(col, list) else list(col) for name, col in columns.items()})

    def int_of(self, values: Iterable[str]) -> dict[str, int]:
        """The cache of ``int()``, updated for ``values`` (digit strings; "" is left out)."""
        missing = set(values).difference(self.ints)
        missing.discard("")
        self.ints.update(zip(missing, map(int, missing), strict=True))
        return self.ints

    def guid_of(self, values: Iterable[str]) -> dict[str, str]:
        """The cache of :func:`norm_guid` for 1-16 hex digits without ``0x``, updated for ``values``."""
        missing = set(values).difference(self.guids)
        self.guids.update((g, "0x" + g.lower().rjust(16, "0")) for g in missing)
        return self.guids

    def normalised(self, func: Any, values: list[str]) -> Iterator[str | None]:
        """``map(func, values)`` through a cache (widths, speeds and descriptions repeat on many lines)."""
        cache = self.norm.setdefault(func, {})
        for v in set(values).difference(cache):
            cache[v] = func(v)
        return map(cache.__getitem__, values)

    def records(self, source: str) -> list[FabricLink]:
        if not self.n:
            return []
        joined = {name: chain.from_iterable([p[name] for p in self.parts]) for name in self.parts[0]}
        return _build(FabricLink, self.n, source=repeat(source), state=repeat(None), phys_state=repeat(None),
                      **joined)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    """The fast reader: same records and problems as :func:`_parse_lines`, chunk by chunk of lines.

    In a chunk, the node lines and the unusual lines (read by :meth:`_Lines.feed`) are visited in order; the port
    lines between two of them are read column-wise, each with the state of the node block it belongs to. A port
    line changes the state only for what :meth:`_Lines.feed` reads next (a CA's LID, the block's port count), so
    the port lines before each unusual line are read before it.
    """
    if "\r" in text or "\x1b" in text:
        lines = [line for _, line in iter_lines(text)]
    else:
        lines = text.split("\n")  # iter_lines without the per-line CR/ANSI checks
    st = _Lines(source, host, records, problems)
    out = _LinkColumns()
    for c0 in range(0, len(lines), _CHUNK):
        if not _chunk(st, out, lines[c0:c0 + _CHUNK], c0):  # pragma: no cover - never guess
            log.warning("ibnetdiscover_fast_path_row_mismatch", source=source, chunk_line=c0 + 1)
            del records[:], problems[:]
            _parse_lines(text, source, host, records, problems)
            return
    st.last_content = next(((i + 1, lines[i]) for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    records.extend(out.records(st.source))
    st.finish()


def _chunk(st: _Lines, out: _LinkColumns, chunk: list[str], c0: int) -> bool:
    """Read ``chunk`` (lines ``c0 + 1``...); False if a regex did not give one tuple per line."""
    k = len(chunk)
    heads = list(map(_HEADS.get, map(_first_char, chunk), repeat(_OTHER_HEAD)))
    link_at = list(compress(range(k), map(eq, heads, repeat(_LINK_HEAD))))
    node_at = list(compress(range(k), map(eq, heads, repeat(_NODE_HEAD))))
    other_at = list(compress(range(k), map(eq, heads, repeat(_OTHER_HEAD))))
    links = _LINK_ROW_RE.findall("\n".join(map(chunk.__getitem__, link_at))) if link_at else []
    nodes = _NODE_ROW_RE.findall("\n".join(map(chunk.__getitem__, node_at))) if node_at else []
    if len(links) != len(link_at) or len(nodes) != len(node_at):
        return False
    ok = list(map(bool, map(_get_port, links)))  # the strict port-line shape
    link_rows = list(compress(links, ok))
    link_at, odd_links = list(compress(link_at, ok)), list(compress(link_at, map(not_, ok)))
    node_rows = dict(zip(compress(node_at, map(_get_kind, nodes)), compress(nodes, map(_get_kind, nodes)),
                         strict=True))
    ports_at = set(compress(node_at, map(_get_ptype, nodes)))
    connected = list(map(bool, map(_get_p_lid, nodes)))  # the strict shape of a connected port's report line
    conn_at, conn_rows = list(compress(node_at, connected)), list(compress(nodes, connected))
    # lines to visit in order: node lines, other ports-report lines, and whatever is not a port line (of either
    # kind), blank or an id line
    visit = sorted(chain(
        compress(node_at, map(not_, connected)) if conn_at else node_at,
        odd_links,
        compress(other_at, map(not_, map(str.startswith, map(chunk.__getitem__, other_at), repeat(_IDS)))),
    ))
    guids = out.guid_of(map(_get_nguid, node_rows.values()))
    marks = bytearray(k)  # 1 on node lines: the node block of a port line is the count of node lines before it
    ctx = [_state(st)]  # the state for the port lines since `start`, then after each node line
    start = 0
    for i in visit:
        n = c0 + i + 1
        row = node_rows.get(i)
        if row is not None:
            desc = row[_NDESC] if row[_HASH] else None  # no '# "..."' part: no description (not "")
            st.start_node(n, chunk[i], guids[row[_NGUID]], row[_KIND], row[_NPORTS], desc, row[_REST])
            marks[i] = 1
            ctx.append(_state(st))
            continue
        _links(st, out, chunk, link_at, link_rows, marks, start, i, ctx, c0)
        _ports(out, chunk, conn_at, conn_rows, start, i, ctx[0].host, c0)
        start = i
        line = chunk[i]
        m = _PORTS_RE.match(line) if i in ports_at else None
        if m:
            _ports_line(m, n, line, st.host, st.source, st.records, st.problems)
        else:
            st.feed(n, line)
        ctx = [_state(st)]
    _links(st, out, chunk, link_at, link_rows, marks, start, k, ctx, c0)
    _ports(out, chunk, conn_at, conn_rows, start, k, ctx[0].host, c0)
    return True


class _Block(NamedTuple):
    """The reader's state that the port lines of a node block read (``ctx`` entries of :func:`_links`)."""

    guid: str | None
    is_switch: bool
    desc: str | None
    lid: int | None
    host: str | None
    pending: list[Any] | None
    node_type: str | None
    links: int


def _state(st: _Lines) -> _Block:
    return _Block(st.node_guid, st.node_type == "SW", st.node_desc, st.node_lid, st.host, st.pending, st.node_type,
                  st.node_links)


def _restore(st: _Lines, state: _Block) -> None:
    st.node_guid, _, st.node_desc, st.node_lid, st.host, st.pending, st.node_type, st.node_links = state


def _links(st: _Lines, out: _LinkColumns, chunk: list[str], link_at: list[int], link_rows: list[tuple[str, ...]],
           marks: bytearray, start: int, stop: int, ctx: list[_Block], c0: int) -> None:
    """The port lines among ``chunk[start:stop]``; ``ctx[i]`` is the state after the i-th node line there."""
    lo, hi = bisect_left(link_at, start), bisect_left(link_at, stop)
    if lo == hi:
        return
    at = link_at[lo:hi]
    rows = link_rows[lo:hi]
    ca_lid = list(map(_get_ca_lid, rows))  # "" on a switch port's line
    blocks = list(accumulate(marks[start:stop]))
    cid = list(map(blocks.__getitem__, map(sub, at, repeat(start))))
    c_guid, c_sw, c_desc, c_lid, c_host, c_pending = (list(map(get, ctx)) for get in _GET_BLOCK)
    # a switch-port comment in a switch block, a CA-port comment in a CA/router block, all inside a node block
    usual = all(map(eq, map(c_sw.__getitem__, cid), map(not_, ca_lid))) and not (c_guid[0] is None and cid[0] == 0)
    if not usual:  # the line-by-line logic, each line with the state of its block
        last = -1
        for j, i in enumerate(at):
            if cid[j] != last:
                last = cid[j]
                _restore(st, ctx[last])
            st.feed(c0 + i + 1, chunk[i])
        links = st.node_links
        _restore(st, ctx[-1])
        if last == len(ctx) - 1:
            st.node_links = links
        return
    ints = out.int_of(ca_lid)
    for c, j in dict(zip(reversed(cid), range(len(cid) - 1, -1, -1), strict=True)).items():  # a block's 1st port
        pending = c_pending[c]
        if not c_sw[c] and pending is not None and pending[7] is None:
            pending[7] = ints[ca_lid[j]]  # a CA's LID is only on its port lines
    st.node_links += len(cid) - bisect_left(cid, len(ctx) - 1)
    ports, rports, rlids = (list(map(get, rows)) for get in (_get_port, _get_rport, _get_rlid))
    ints = out.int_of(chain(ports, rports, rlids))
    rguids = list(map(_get_rguid, rows))
    guids = out.guid_of(rguids)
    ws = list(map(_get_ws, rows))
    for w in set(ws).difference(out.widths):
        out.widths[w], out.speeds[w] = _ws(w)
    text: Iterable[str] = map(chunk.__getitem__, at)
    if max(map(len, map(chunk.__getitem__, at))) > TEXT_CLIP:
        text = map(clip, text)
    out.add(
        len(at),
        line=map(add, at, repeat(c0 + 1)),
        text=text,
        host=map(c_host.__getitem__, cid),
        guid=map(c_guid.__getitem__, cid),
        port=map(ints.__getitem__, ports),
        peer_guid=map(guids.__getitem__, rguids),
        peer_port=map(ints.__getitem__, rports),
        width=map(out.widths.__getitem__, ws),
        speed=map(out.speeds.__getitem__, ws),
        lid=map(ints.get, ca_lid, map(c_lid.__getitem__, cid)),  # "" (a switch port) -> the switch's LID
        peer_lid=map(ints.__getitem__, rlids),
        description=map(c_desc.__getitem__, cid),
        peer_description=map(_get_rdesc, rows),
    )


def _ports(out: _LinkColumns, chunk: list[str], conn_at: list[int], conn_rows: list[tuple[str, ...]], start: int,
           stop: int, host: str | None, c0: int) -> None:
    """The connected ports-report lines among ``chunk[start:stop]`` (what :func:`_ports_line` makes of each); no
    line between them changes the host."""
    lo, hi = bisect_left(conn_at, start), bisect_left(conn_at, stop)
    if lo == hi:
        return
    at, rows = conn_at[lo:hi], conn_rows[lo:hi]
    guid, pguid = list(map(_get_p_guid, rows)), list(map(_get_p_pguid, rows))
    lid, port, plid, pport = (list(map(get, rows)) for get in (_get_p_lid, _get_p_port, _get_p_plid, _get_p_pport))
    guids, ints = out.guid_of(chain(guid, pguid)), out.int_of(chain(lid, port, plid, pport))
    text: Iterable[str] = map(chunk.__getitem__, at)
    if max(map(len, map(chunk.__getitem__, at))) > TEXT_CLIP:
        text = map(clip, text)
    out.add(
        len(at),
        line=map(add, at, repeat(c0 + 1)),
        text=text,
        host=repeat(host, len(at)),
        guid=map(guids.__getitem__, guid),
        port=map(ints.__getitem__, port),
        peer_guid=map(guids.__getitem__, pguid),
        peer_port=map(ints.__getitem__, pport),
        width=out.normalised(norm_width, list(map(_get_p_width, rows))),
        speed=out.normalised(speed_name, list(map(_get_p_speed, rows))),
        lid=map(ints.__getitem__, lid),
        peer_lid=map(ints.__getitem__, plid),
        description=out.normalised(_clean_desc, list(map(_get_p_desc, rows))),
        peer_description=out.normalised(_clean_desc, list(map(_get_p_pdesc, rows))),
    )


# --------------------------------------------------------------------------------------------- records


@cache
def _slots(cls: type) -> tuple[tuple[str, Any], ...] | None:
    """(field name, slot descriptor) of each field of a frozen, slotted dataclass record; None when the class has
    a ``__post_init__`` or a field without a slot, which only its ``__init__`` can be trusted to handle."""
    if hasattr(cls, "__post_init__"):
        return None
    out = []
    for f in fields(cls):
        desc = getattr(cls, f.name, None)
        if not isinstance(desc, MemberDescriptorType):
            return None
        out.append((f.name, desc))
    return tuple(out)


def _build(cls: type, n: int, **columns: Iterable[Any]) -> list[Any]:
    """``n`` records of ``cls`` from columns: one iterable of exactly ``n`` values per field (or ``repeat(v)``).

    The same objects as ``cls(**row)`` row by row (equal, same field values), but each field is set for all
    records at once through its slot descriptor: a frozen dataclass's ``__init__`` pays one
    ``object.__setattr__`` call per field and record, ~3 us per FabricLink, a third of the parse at scale.
    """
    if set(columns) != {f.name for f in fields(cls)}:
        raise ValueError(f"{cls.__name__}: columns {sorted(columns)} are not its fields")
    slots = _slots(cls)
    if slots is None:
        rows = zip(*columns.values(), strict=False)
        return [cls(**dict(zip(columns, row, strict=True))) for row in islice(rows, n)]
    objs = list(map(object.__new__, repeat(cls, n)))
    for name, desc in slots:
        col = iter(columns[name])
        deque(map(desc.__set__, objs, col), maxlen=0)  # map stops at the shorter of the two
        if n and not hasattr(objs[-1], name) or type(col) is not repeat and next(col, _END) is not _END:
            raise ValueError(f"{cls.__name__}.{name}: not {n} values")
    return objs


_END = object()


def _sort_by_line(records: list[Record]) -> None:
    """Sort in place by line, stable: ``records.sort(key=lambda r: r.line)`` without a Python call per record."""
    if len(records) < 2:
        return
    lines = list(map(attrgetter("line"), records))
    order = sorted(range(len(records)), key=lines.__getitem__)
    records[:] = list(map(records.__getitem__, order))


def _clean_desc(value: str | None) -> str | None:
    if value is None:
        return None
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] == "'":
        v = v[1:-1].strip()
    return v or None


def _ports_line(
    m: re.Match[str], n: int, line: str, host: str | None, source: str, records: list[Record], problems: list[str]
) -> None:
    guid = norm_guid(m.group("guid"))
    if guid is None:
        return
    width = norm_width(m.group("width"))
    speed = speed_name(m.group("speed"))
    lid = int(m.group("lid"))
    port = int(m.group("port"))
    if m.group("pguid"):
        peer_guid = norm_guid(m.group("pguid"))
        if peer_guid is None:
            return
        records.append(
            FabricLink(
                source=source,
                line=n,
                text=clip(line),
                host=host,
                guid=guid,
                port=port,
                peer_guid=peer_guid,
                peer_port=int(m.group("pport")),
                width=width,
                speed=speed,
                state=None,
                phys_state=None,
                lid=lid,
                peer_lid=int(m.group("plid")),
                description=_clean_desc(m.group("desc")),
                peer_description=_clean_desc(m.group("pdesc")),
            )
        )
        return
    alone = m.group("alone")
    if alone is not None and alone.strip().startswith("- "):
        problems.append(f"line {n}: unparseable peer part {alone.strip()[:60]!r}")
    records.append(
        FabricPortState(
            source=source,
            line=n,
            text=clip(line),
            host=host,
            guid=guid,
            port=port,
            state=None,
            phys_state=None,
            width=width,
            speed=speed,
            lid=lid,
            description=_clean_desc(alone),
            could_be=None,
        )
    )
