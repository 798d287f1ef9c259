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

Speed: a 4,096-host rail-optimised fat tree gives a 21 MB topology file with ~35k node blocks and ~200k port
lines. The line-by-line reader (:func:`_parse_lines`: prompt/tool-error checks, then up to four regexes and the
normalisers per line, one frozen record at a time) takes ~2 s on it; :func:`_parse` takes ~0.8 s and gives the
same records and problems. It splits the text once, finds each line's kind by its first character with numpy, and
reads the port lines (``[``) and the node/ports-report lines (``S``/``C``/``R``) with one ``findall`` per kind over
the joined lines. The shapes ``ibnetdiscover.c`` prints are read column-wise, node lines included (a port line
finds its node block by ``searchsorted``), with the normalised GUIDs and ``4xNDR`` cached (they recur on many port
lines) and the records built field by field (:func:`_build`); id lines and blank lines are skipped. Every other
line (prompts, tool errors, comments, ports without peer, port lines with an odd comment, a line cut by
truncation) goes through the line-by-line logic with the state it would have there. What is left is mostly the
regex (~0.17 s) and the records themselves (~0.25 s to set 16 slots on each of ~230k objects, and a pass of the
cyclic garbage collector over them when it resumes); the collector is paused meanwhile
(:func:`diagnose.gcpause.gc_paused`). ``tests/parsers/test_ibnetdiscover_fast.py`` checks the equivalence on
every sample, on variants of them and on generated mixtures of real and malformed lines.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import fields
from functools import cache, lru_cache
from itertools import chain, compress, islice, repeat
from operator import add, attrgetter, eq, itemgetter, not_, or_
from types import MemberDescriptorType
from typing import Any, NamedTuple

import numpy as np
import structlog

from diagnose.gcpause import gc_paused
from diagnose.models.records import TEXT_CLIP, ColumnBatch, ParseResult, Record, clip
from diagnose.parsers._common import possessive
from diagnose.parsers._fabric import FabricLink, FabricNode, FabricPortState, norm_width, speed_name
from diagnose.parsers._ib import norm_guid, shell_line
from diagnose.parsers._lines import iter_lines

FORMAT = "ibnetdiscover"
PARSE_NS_PER_BYTE = 50.0  # measured on a simulated 4,096-host topology
COLUMNS_WHEN_LARGE = True  # a large topology's links and nodes come as column batches (BATCH_MIN)

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


def _base_lid(rest: str) -> int | None:
    """The base LID of a node line (``port 0 lid N`` after the description), if shown."""
    lm = _BASE_LID_RE.search(rest)
    return int(lm.group("lid")) if lm else None


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
        self.node_lid = _base_lid(rest)
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

    def finish(self, batch: bool = False) -> None:
        """Node records, line order, then the problems only the end of the file shows (cut comments, truncation).
        ``batch``: from :data:`BATCH_MIN` nodes, one column batch instead of a record per node."""
        if self.nodes:
            cols = list(zip(*self.nodes, strict=True))
            columns = dict(source=[self.source] * len(self.nodes), line=cols[0], text=_clip_all(list(cols[1])),
                           host=cols[2], guid=cols[3], node_type=cols[4], description=cols[5], ports=cols[6],
                           lid=cols[7])
            if batch and len(self.nodes) >= BATCH_MIN:  # rows come in line order
                batch_columns: dict[str, object] = {f.name: list(columns[f.name]) for f in fields(FabricNode)}
                batch_columns["line"] = np.array(batch_columns["line"], dtype=np.int64)
                self.records.append(ColumnBatch(source=self.source, line=int(cols[0][0]), text="", host=None,
                                                table="FabricNode", columns=batch_columns, line_columns=("line",)))
            else:
                self.records.extend(_build(FabricNode, len(self.nodes), **columns))
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

# Lines are sorted by their first character (numpy, over the whole text), then the port lines and the node /
# ports-report lines are read by one regex per kind over the joined lines of that kind (one ``findall`` tuple per
# line: a line the strict alternative does not match gives a tuple of empty strings). The strict alternatives are
# the shapes ``ibnetdiscover.c`` prints, written with ``[ \t]`` and ``[0-9]`` where the line-by-line regexes say
# ``\s`` and ``\d`` and with quote-free descriptions, so that a line they match is read the same way by
# _LINK_RE/_NODE_RE and the comment regexes. Such a line is no shell prompt, tool error or command echo either (a
# prompt needs ``user@host`` or ``[user@host``, an error line a word and a colon, an echo a leading ``$``/``#``/
# ``>``), nor is a line that starts with ``vendid=``/``devid=``/``...guid=``. The port-line shape's quantifiers
# are possessive (a quarter faster): each keeps the first choice backtracking would try, so a line it matches
# gives the same groups, and a line it misses is left to the line-by-line logic.
_LINK_SHAPE = possessive(r"""
    \[([0-9]++)\][ \t]*+(?:\([0-9a-fA-F]{1,16}+\))?+[ \t]*+"[SHR]-([0-9a-fA-F]{1,16}+)"\[([0-9]++)\]
    [ \t]*+(?:\([0-9a-fA-F]{1,16}+\))?+[ \t]*+\#[ \t]*+
    (?:lid[ \t]++([0-9]++)[ \t]++lmc[ \t]++[0-9]++[ \t]++)?+    # a CA port's comment starts with its LID and LMC
    "([^"\n]*+)"[ \t]++lid[ \t]++([0-9]++)[ \t]++([0-9]++x\S++)[ \t]*+""")
# A match of the strict shape alone is one whole line: when there are as many as lines, every line is one.
_LINK_ONLY_RE = re.compile(rf"^{_LINK_SHAPE}$", re.MULTILINE | re.VERBOSE)
_LINK_ROW_RE = re.compile(rf"^(?:{_LINK_SHAPE}|.*)$", re.MULTILINE | re.VERBOSE)
_NODE_ROW_RE = re.compile(
    r"""^(?:
    (Switch|Ca|Rt)[ \t]+([0-9]+)[ \t]+"[SHR]-([0-9a-fA-F]{1,16})"[ \t]*(?:(\#)[ \t]*"([^"\n]*)"(.*))?
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
_HEAD_OF = np.full(129, _OTHER_HEAD, np.uint8)  # by the first character's code point (128: any other)
_HEAD_OF[[ord("["), ord("S"), ord("C"), ord("R")]] = _LINK_HEAD, _NODE_HEAD, _NODE_HEAD, _NODE_HEAD
_IDS = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")
# from this many FabricLink rows the fast reader returns them as one column batch (the frame's columns) instead of
# one record each: a 4,096-host fabric has ~200k, and their records cost more to build, frame and send between
# processes than reading them did
BATCH_MIN = 4096
_NOT_SHOWN = ("source", "state", "phys_state")  # FabricLink fields the topology file never shows
_CHUNK = 1 << 15  # lines per chunk: bounds the regex tuples alive at once (~5 MiB)
_GET_LINK = tuple(map(itemgetter, range(7)))  # port, rguid, rport, ca_lid, rdesc, rlid, ws
_get_port = _GET_LINK[0]
_get_kind, _get_nguid, _get_ptype = itemgetter(_KIND), itemgetter(_NGUID), itemgetter(_PTYPE)
_get_nports, _get_rest = itemgetter(_NPORTS), itemgetter(_REST)
(_get_p_lid, _get_p_port, _get_p_guid, _get_p_width, _get_p_speed, _get_p_plid, _get_p_pport, _get_p_pguid,
 _get_p_desc, _get_p_pdesc) = map(itemgetter, range(6, 16))


class _LinkColumns:
    """The FabricLink rows of the lines read column-wise, and the caches of the normalised values, which repeat
    on many lines (one GUID string each, shared)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.cols: dict[str, list[Any]] = {f.name: [] for f in fields(FabricLink) if f.name not in _NOT_SHOWN}
        self.n = 0
        self.guids: dict[str, str] = {}
        self.widths: dict[str, str | None] = {}  # by the topology file's '4xNDR'
        self.speeds: dict[str, str | None] = {}
        self.norm: dict[Any, dict[str, Any]] = {}  # normaliser -> printed -> normalised

    def add(self, n: int, **columns: Iterable[Any]) -> None:
        """``n`` more rows from their columns (all fields but the source and the states, which the topology
        file does not show)."""
        if set(columns) != set(self.cols):
            raise ValueError(f"FabricLink: columns {sorted(columns)} are not its fields")
        for name, values in columns.items():
            self.cols[name].extend(islice(values, n) if type(values) is repeat else values)
        self.n += n
        if any(len(col) != self.n for col in self.cols.values()):
            raise ValueError(f"FabricLink: not {n} values in every column")

    def emit(self, records: list[Record]) -> None:
        """The rows as records, or, from :data:`BATCH_MIN` rows, as one column batch (the table the frame is built
        from, without an object per row) holding the line-by-line reader's FabricLink records too, in line order."""
        cols = self.cols
        if self.n < BATCH_MIN:
            records.extend(_build(FabricLink, self.n, source=repeat(self.source), state=repeat(None),
                                  phys_state=repeat(None), **cols))
            return
        full: dict[str, list[Any]] = {"source": [self.source] * self.n, "state": [None] * self.n,
                                      "phys_state": [None] * self.n, **cols}
        alone = [r for r in records if type(r) is FabricLink]
        if alone:
            records[:] = [r for r in records if type(r) is not FabricLink]
            for name, col in full.items():
                col.extend(map(attrgetter(name), alone))
        line = np.array(full["line"], dtype=np.int64)
        columns: dict[str, object] = {}
        if len(line) > 1 and (line[1:] < line[:-1]).any():
            order = np.argsort(line, kind="stable")
            line = line[order]
            pick = order.tolist()
            for f in fields(FabricLink):
                if f.name != "line":
                    columns[f.name] = list(map(full[f.name].__getitem__, pick))
        else:
            columns = {f.name: full[f.name] for f in fields(FabricLink) if f.name != "line"}
        columns["line"] = line
        columns = {f.name: columns[f.name] for f in fields(FabricLink)}  # the records' field order
        records.append(ColumnBatch(source=self.source, line=int(line[0]), text="", host=None, table="FabricLink",
                                   columns=columns, line_columns=("line",)))

    def guid_of(self, values: Iterable[str]) -> dict[str, str]:
        """The cache of :func:`norm_guid` for 1-16 hex digits without ``0x``, updated for ``values``."""
        missing = list(set(values).difference(self.guids))
        lowered = "\n".join(missing).lower().split("\n") if missing else []
        self.guids.update(zip(missing, map("0x".__add__, map(str.rjust, lowered, repeat(16), repeat("0"))),
                              strict=True))
        return self.guids

    def normalised(self, func: Any, values: list[str]) -> Iterator[Any]:
        """``map(func, values)`` through a cache (widths, speeds, descriptions, node lines' ends repeat)."""
        cache = self.norm.setdefault(func, {})
        for v in set(values).difference(cache):
            cache[v] = func(v)
        return map(cache.__getitem__, values)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    """The fast reader: same records and problems as :func:`_parse_lines`, chunk by chunk of lines.

    In a chunk, only the unusual lines are visited one by one (read by :meth:`_Lines.feed`, in order); the runs of
    lines between two of them (node lines, port lines, connected ports-report lines) are read column-wise by
    :func:`_run`, which leaves the reader in the state the line-by-line logic would be in at the end of the run.
    """
    if "\r" in text or "\x1b" in text:
        lines = [line for _, line in iter_lines(text)]
        heads, lengths = _heads("\n".join(lines))
    else:
        lines = text.split("\n")  # iter_lines without the per-line CR/ANSI checks
        heads, lengths = _heads(text)
    st = _Lines(source, host, records, problems)
    out = _LinkColumns(source)
    for c0 in range(0, len(lines), _CHUNK):
        c1 = c0 + _CHUNK
        if not _chunk(st, out, lines[c0:c1], c0, heads[c0:c1], lengths[c0:c1]):  # pragma: no cover - never guess
            log.warning("ibnetdiscover_fast_path_row_mismatch", source=source, chunk_line=c0 + 1)
            del records[:], problems[:]
            _parse_lines(text, source, host, records, problems)
            return
    st.last_content = next(((i + 1, lines[i]) for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    out.emit(records)
    st.finish(batch=True)


def _heads(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Per line of ``text`` (split on ``\\n``): its kind by its first character (``_*_HEAD``) and its length."""
    if text.isascii():
        codes = np.frombuffer(text.encode("ascii"), np.uint8)
    else:  # one code unit per character
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    ends = np.flatnonzero(codes == 10)
    starts = np.concatenate(([0], ends + 1))
    lengths = np.append(ends, len(codes)) - starts
    filled = lengths > 0
    heads = np.full(len(starts), _BLANK_HEAD, np.uint8)
    heads[filled] = _HEAD_OF[np.minimum(codes[starts[filled]], 128)]
    return heads, lengths


class _Rows(NamedTuple):
    """The lines of a chunk that :func:`_run` reads column-wise, by kind: their indexes in the chunk (ascending)
    and what the regexes read from them."""

    chunk: list[str]
    c0: int  # lines before the chunk
    long: bool  # a line is longer than TEXT_CLIP
    link_at: list[int]  # port lines of the strict shape
    link_texts: list[str]  # those lines
    link_cols: list[list[str]]  # their fields (as _GET_LINK), one list per field
    link_block: np.ndarray  # the count of node lines before each
    ca_port: np.ndarray  # True where the comment is a CA port's
    node_at: list[int]  # node lines of the strict shape
    nodes: list[tuple[str, ...]]
    conn_at: list[int]  # connected ports-report lines
    conns: list[tuple[str, ...]]


def _chunk(st: _Lines, out: _LinkColumns, chunk: list[str], c0: int, heads: np.ndarray, lengths: np.ndarray) -> bool:
    """Read ``chunk`` (lines ``c0 + 1``...); False if a regex did not give one tuple per line."""
    link_at = np.flatnonzero(heads == _LINK_HEAD)
    head_at = np.flatnonzero(heads == _NODE_HEAD).tolist()  # node and ports-report lines
    other_at = np.flatnonzero(heads == _OTHER_HEAD).tolist()
    link_texts = list(map(chunk.__getitem__, link_at.tolist()))
    links, odd_links = _link_rows(link_texts)
    if odd_links:
        ok = np.ones(len(link_at), bool)
        ok[odd_links] = False
        odd_links, link_at = link_at[~ok].tolist(), link_at[ok]
        link_texts = list(compress(link_texts, ok.tolist()))
    head_rows = _NODE_ROW_RE.findall("\n".join(map(chunk.__getitem__, head_at))) if head_at else []
    if links is None or len(head_rows) != len(head_at):
        return False
    is_node = list(map(bool, map(_get_kind, head_rows)))
    connected = list(map(bool, map(_get_p_lid, head_rows)))  # the strict shape of a connected port's report line
    node_at = list(compress(head_at, is_node))
    link_cols = [list(map(get, links)) for get in _GET_LINK]
    rows = _Rows(
        chunk, c0, bool(len(lengths)) and int(lengths.max()) > TEXT_CLIP,
        link_at.tolist(), link_texts, link_cols, np.searchsorted(np.array(node_at, np.int64), link_at),
        np.fromiter(map(bool, link_cols[3]), bool, len(link_at)),  # a CA port's LID in the comment
        node_at, list(compress(head_rows, is_node)),
        list(compress(head_at, connected)), list(compress(head_rows, connected)),
    )
    ports_at = set(compress(head_at, map(_get_ptype, head_rows)))
    # lines to visit in order: whatever is not a port line (of either kind), a node line, blank or an id line
    visit = sorted(chain(
        compress(head_at, map(not_, map(or_, is_node, connected))),
        odd_links,
        compress(other_at, map(not_, map(str.startswith, map(chunk.__getitem__, other_at), repeat(_IDS)))),
    ))
    start = 0
    for i in visit:
        _run(st, out, rows, start, i)
        n, line = c0 + i + 1, chunk[i]
        m = _PORTS_RE.match(line) if i in ports_at else None
        if m:
            _ports_line(m, n, line, st.host, st.source, st.records, st.problems)
        else:
            st.feed(n, line)
        start = i + 1
    _run(st, out, rows, start, len(chunk))
    return True


def _link_rows(lines: list[str]) -> tuple[list[tuple[str, ...]] | None, list[int]]:
    """The fields of the port lines of the strict shape, and the indexes of the others; None if a regex did not
    give one tuple per line."""
    if not lines:
        return [], []
    joined = "\n".join(lines)
    rows = _LINK_ONLY_RE.findall(joined)
    if len(rows) == len(lines):
        return rows, []
    rows = _LINK_ROW_RE.findall(joined)
    if len(rows) != len(lines):  # pragma: no cover - never guess
        return None, []
    ok = list(map(bool, map(_get_port, rows)))
    return list(compress(rows, ok)), list(compress(range(len(rows)), map(not_, ok)))


class _Block(NamedTuple):
    """The reader's state that the port lines of a node block read."""

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


def _run(st: _Lines, out: _LinkColumns, rows: _Rows, start: int, stop: int) -> None:
    """The lines ``chunk[start:stop]``, none of which needs :meth:`_Lines.feed` but the port lines whose comment
    does not fit their block; no line there changes the host.

    Node blocks: 0 is the one open at ``start`` (``st``'s state), then one per node line, in order; ``blocks``
    holds their states column-wise (the fields of :class:`_Block`). The node lines do what
    :meth:`_Lines.start_node` does, column-wise; a port line reads the state of its block, and the first port
    line of a CA or router block gives the node its LID. The odd port lines (a switch-port comment in a CA block
    or the reverse, a port line outside any block) change nothing that the others read, so they are fed to the
    line-by-line logic after the others, in order, each with the state of its block.
    """
    blocks = [[v] for v in _state(st)]
    nlo, nhi = bisect_left(rows.node_at, start), bisect_left(rows.node_at, stop)
    if nlo < nhi:
        _nodes(st, out, rows, nlo, nhi, blocks)
    lo, hi = bisect_left(rows.link_at, start), bisect_left(rows.link_at, stop)
    if lo < hi:
        _links(st, out, rows, lo, hi, nlo, blocks)
    _restore(st, _Block(*map(itemgetter(-1), blocks)))
    _ports(out, rows.chunk, rows.conn_at, rows.conns, start, stop, st.host, rows.c0)


def _nodes(st: _Lines, out: _LinkColumns, rows: _Rows, lo: int, hi: int, blocks: list[list[Any]]) -> None:
    """The node lines ``rows.node_at[lo:hi]``: their rows in ``st.nodes``, their states onto ``blocks``."""
    at, nodes = rows.node_at[lo:hi], rows.nodes[lo:hi]
    host = st.host
    guids = out.guid_of(map(_get_nguid, nodes))
    guid = list(map(guids.__getitem__, map(_get_nguid, nodes)))
    node_type = list(map(_TYPES.__getitem__, map(_get_kind, nodes)))
    desc = list(map(_node_desc, nodes))
    lid = list(out.normalised(_base_lid, list(map(_get_rest, nodes))))
    line = list(map(add, at, repeat(rows.c0 + 1)))
    new = list(map(list, zip(line, map(rows.chunk.__getitem__, at), repeat(host), guid, node_type, desc,
                             map(int, map(_get_nports, nodes)), lid, strict=False)))
    st.nodes.extend(new)
    st.node_line = line[-1]
    n = len(at)
    columns: tuple[Iterable[Any], ...] = (guid, map(eq, node_type, repeat("SW")), desc, lid, repeat(host, n), new,
                                          node_type, repeat(0, n))
    for col, values in zip(blocks, columns, strict=True):
        col.extend(values)


def _node_desc(row: tuple[str, ...]) -> str | None:
    """A node line's description; None (not "") without a ``# "..."`` part."""
    return row[_NDESC] if row[_HASH] else None


def _links(st: _Lines, out: _LinkColumns, rows: _Rows, lo: int, hi: int, nlo: int,
           blocks: list[list[Any]]) -> None:
    """The strict port lines ``rows.link_at[lo:hi]`` of a run whose first node line is ``rows.node_at[nlo]``;
    ``blocks`` as in :func:`_run`, whose last block gets its count of port lines."""
    cid = rows.link_block[lo:hi] - nlo
    ca_port = rows.ca_port[lo:hi]
    guid0, last = blocks[0][0], len(blocks[0]) - 1
    # a switch-port comment in a switch block, a CA-port comment in a CA/router block, all inside a node block
    usual = np.array(blocks[1], bool)[cid] != ca_port
    if guid0 is None:
        usual &= cid > 0
    if blocks[0][last] is not None:
        blocks[-1][-1] += hi - lo - int(np.searchsorted(cid, last))
    if usual.all():
        _usual_links(out, rows, slice(lo, hi), cid, blocks)
        return
    if usual.any():
        _usual_links(out, rows, (np.flatnonzero(usual) + lo).tolist(), cid[usual], blocks)
    for j in np.flatnonzero(~usual).tolist():  # the line-by-line logic, each line with the state of its block
        _restore(st, _Block(*map(itemgetter(int(cid[j])), blocks)))
        i = rows.link_at[lo + j]
        st.feed(rows.c0 + i + 1, rows.chunk[i])


def _usual_links(out: _LinkColumns, rows: _Rows, pick: slice | list[int], cid: np.ndarray,
                 blocks: list[list[Any]]) -> None:
    """The FabricLink records of the port lines ``pick`` (of ``rows.link_at``) that fit their block (``cid``)."""
    if isinstance(pick, slice):
        at, text = rows.link_at[pick], rows.link_texts[pick]
        ports, rguids, rports, ca_lid, rdescs, rlids, ws = (col[pick] for col in rows.link_cols)
    else:
        at, text = list(map(rows.link_at.__getitem__, pick)), list(map(rows.link_texts.__getitem__, pick))
        ports, rguids, rports, ca_lid, rdescs, rlids, ws = (list(map(col.__getitem__, pick)) for col in rows.link_cols)
    c_guid, c_sw, c_desc, c_lid, _, c_pending = blocks[:6]
    ca_port = rows.ca_port[pick]
    lid = np.array(c_lid, object)[cid]  # a switch port: the switch's LID
    if ca_port.any():
        lid[ca_port] = list(map(int, compress(ca_lid, ca_port.tolist())))
    blk, first = np.unique(cid, return_index=True)  # a block's first port line
    for c, j in zip(blk.tolist(), first.tolist(), strict=True):
        pending = c_pending[c]
        if not c_sw[c] and pending is not None and pending[7] is None:
            pending[7] = lid[j]  # a CA's LID is only on its port lines
    guids = out.guid_of(rguids)
    for w in set(ws).difference(out.widths):
        out.widths[w], out.speeds[w] = _ws(w)
    out.add(
        len(at),
        line=(np.array(at, np.int64) + (rows.c0 + 1)).tolist(),
        text=map(clip, text) if rows.long else text,
        host=repeat(blocks[4][0]),  # one host for a run
        guid=np.array(c_guid, object)[cid].tolist(),
        port=list(map(int, ports)),
        peer_guid=map(guids.__getitem__, rguids),
        peer_port=list(map(int, rports)),
        width=map(out.widths.__getitem__, ws),
        speed=map(out.speeds.__getitem__, ws),
        lid=lid.tolist(),
        peer_lid=list(map(int, rlids)),
        description=np.array(c_desc, object)[cid].tolist(),
        peer_description=rdescs,
    )


def _clip_all(texts: list[str]) -> list[str]:
    """``clip`` of each line (no line holds a newline): the lines themselves if none is long or ends with CR."""
    if texts and (max(map(len, texts)) > TEXT_CLIP or any(map(str.endswith, texts, repeat("\r")))):
        return list(map(clip, texts))
    return texts


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
    guids = out.guid_of(chain(guid, pguid))
    out.add(
        len(at),
        line=map(add, at, repeat(c0 + 1)),
        text=_clip_all(list(map(chunk.__getitem__, at))),
        host=repeat(host, len(at)),
        guid=map(guids.__getitem__, guid),
        port=map(int, port),
        peer_guid=map(guids.__getitem__, pguid),
        peer_port=map(int, pport),
        width=out.normalised(norm_width, list(map(_get_p_width, rows))),
        speed=out.normalised(speed_name, list(map(_get_p_speed, rows))),
        lid=map(int, lid),
        peer_lid=map(int, plid),
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
    objs: list[Any] = list(map(object.__new__, repeat(cls, n)))
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
    lines = np.fromiter(map(attrgetter("line"), records), np.int64, len(records))
    if (lines[1:] < lines[:-1]).any():
        records[:] = list(map(records.__getitem__, np.argsort(lines, kind="stable").tolist()))


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
