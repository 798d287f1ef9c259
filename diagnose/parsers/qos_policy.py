"""OpenSM's QoS policy file (``qos-policy.conf``, opensm ``-Y`` / ``qos_policy_file``).

Syntax (linux-rdma/opensm ``doc/QoS_management_in_OpenSM.txt`` sections 2-6; the lexer and grammar
``opensm/osm_qos_parser_l.l`` / ``osm_qos_parser_y.y``): keyword lines, each keyword the first non-blank of its line,
``#`` to the end of the line a comment, blank lines and indentation ignored. Sections and their blocks open and close
with matching keywords; every section is optional::

    port-groups
        port-group
            name: Storage
            use: SRP Targets
            port-guid: 0x10000000000001, 0x10000000000005-0x1000000000FFFA
            port-name: vs1 HCA-1/P1, vs2 HCA-1/P1
            node-type: CA, SELF
        end-port-group
    end-port-groups
    qos-setup
        vlarb-tables
            vlarb-scope
                group: Storage
                across: Storage
                vlarb-high: 0:255,1:127,2:63,3:31,4:15,5:7,6:3,7:1
                vlarb-low: 8:255,9:127,10:63,11:31,12:15,13:7,14:3
                vl-high-limit: 10
            end-vlarb-scope
        end-vlarb-tables
        sl2vl-tables
            sl2vl-scope
                group: Part1
                from: *
                to: *
                sl2vl-table: 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7
            end-sl2vl-scope
        end-sl2vl-tables
    end-qos-setup
    qos-levels
        qos-level
            name: DEFAULT
            sl: 0
            mtu-limit: 4
        end-qos-level
    end-qos-levels
    qos-match-rules
        qos-match-rule
            qos-class: 7-9,11
            destination: Storage
            qos-level-name: WholeSet
        end-qos-match-rule
    end-qos-match-rules
    qos-ulps
        default                : 0
        ipoib, pkey 0x8001     : 1
        any, service-id 0x6234 : 2
    end-qos-ulps

Semantics that matter downstream (same sources): the QoS level named ``DEFAULT`` (case-insensitive) is applied to an
SA PathRecord query that matches no rule; without one, the ``default : N`` of ``qos-ulps`` is that level
(``osm_qos_policy.c``, "Check whether the 'simple' default QoS level ... exists"). ``qos-match-rules`` are tried
before ``qos-ulps``. The ``qos-setup`` section is parsed and *ignored*: upstream OpenSM programs SL2VL and VLArb from
the ``qos_*`` options of ``opensm.conf`` only (doc section 2.II and the example's comment, ``osm_qos.c``
``osm_qos_setup``); NVIDIA's MLNX_OFED manual says the same ("not supported in OFED").

Records, each cited at its line (a prompt such as ``cat /etc/opensm/qos-policy.conf`` names the host):

* :class:`QosPortGroupMember` per member line of a ``port-group`` (``kind`` the key, ``members`` the comma-separated
  values as written);
* :class:`QosLevel` per ``qos-level`` (cited at its ``sl:`` line when it has one);
* :class:`QosMatchRule` per ``qos-match-rule`` (cited at its ``qos-level-name:`` line when it has one);
* :class:`QosUlp` per ``qos-ulps`` rule;
* :class:`QosVlArbScope` / :class:`QosSl2VlScope` per ``vlarb-scope`` / ``sl2vl-scope`` of ``qos-setup`` (cited at
  the first table line).

Lines that are no keyword of the block they are in, values that do not read (an SL above 15: OpenSM's "illegal SL
value"), and blocks left open at the end of the text (a cut paste; the block's record is still kept) are problems.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "qos_policy"
NUM_SL = 16
DEFAULT_LEVEL = "default"  # OSM_QOS_POLICY_DEFAULT_LEVEL_NAME, compared case-insensitively


@dataclass(frozen=True, slots=True, kw_only=True)
class QosPortGroupMember(Record):
    """One member line of a ``port-group``: ``kind`` is ``port-guid`` | ``port-name`` | ``partition`` | ``pkey`` |
    ``node-type``; ``members`` the values as written (``0x10000000000005-0x1000000000FFFA``, ``vs1 HCA-1/P1``,
    ``CA``...)."""

    group: str | None  # the group's name: (None before its name: line)
    kind: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class QosLevel(Record):
    """A ``qos-level``: the SL and limits an SA path query that selects it gets (``mtu_limit`` / ``rate_limit`` are the
    IBA enum values as written, ``packet_life`` the IBA exponent)."""

    name: str | None
    use: str | None
    sl: int | None
    mtu_limit: int | None
    rate_limit: int | None
    packet_life: int | None
    path_bits: str | None
    pkey: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class QosMatchRule(Record):
    """A ``qos-match-rule`` (``index`` its 1-based order: the first rule that matches a query wins)."""

    index: int
    use: str | None
    qos_class: str | None
    source_groups: str | None  # the source: port groups, comma-joined
    destination_groups: str | None
    service_id: str | None
    pkey: str | None
    level: str | None  # qos-level-name


@dataclass(frozen=True, slots=True, kw_only=True)
class QosUlp(Record):
    """A ``qos-ulps`` rule: ``ulp`` (``default``, ``sdp``, ``rds``, ``iser``, ``srp``, ``ipoib``, ``any``), the selector
    after the comma as written (``pkey 0x8001``, ``service-id 0x6234``...), and the SL it gives (None: unreadable)."""

    ulp: str
    selector: str | None
    sl: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class QosVlArbScope(Record):
    """A ``vlarb-scope`` of ``qos-setup``: the port groups it names (``groups``: their ports, ``across``: the ports
    linked to them) and its tables as (VL, weight) pairs. OpenSM parses this and does not program it."""

    groups: tuple[str, ...]
    across: tuple[str, ...]
    high: tuple[tuple[int, int], ...]
    low: tuple[tuple[int, int], ...]
    high_limit: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class QosSl2VlScope(Record):
    """An ``sl2vl-scope`` of ``qos-setup``: ``vls[sl]`` the VL of SL ``sl`` (None without a readable 16-entry table),
    for the ``groups`` / ``across_from`` / ``across_to`` port groups and the ``from`` / ``to`` port lists as written
    (``*`` all). OpenSM parses this and does not program it."""

    groups: tuple[str, ...]
    across: tuple[str, ...]
    across_from: tuple[str, ...]
    across_to: tuple[str, ...]
    from_ports: str | None
    to_ports: str | None
    vls: tuple[int, ...] | None


# section keyword -> (its end keyword, the block keyword inside it or None for a line section)
_SECTIONS = {
    "port-groups": ("end-port-groups", "port-group"),
    "qos-setup": ("end-qos-setup", None),
    "qos-levels": ("end-qos-levels", "qos-level"),
    "qos-match-rules": ("end-qos-match-rules", "qos-match-rule"),
    "qos-ulps": ("end-qos-ulps", None),
}
_SETUP_TABLES = {"vlarb-tables": ("end-vlarb-tables", "vlarb-scope"),
                 "sl2vl-tables": ("end-sl2vl-tables", "sl2vl-scope")}
# block keyword -> the keys it takes (osm_qos_parser_y.y *_entry rules)
_BLOCK_KEYS = {
    "port-group": {"name", "use", "port-guid", "port-name", "partition", "pkey", "node-type"},
    "qos-level": {"name", "use", "sl", "mtu-limit", "rate-limit", "packet-life", "path-bits", "pkey"},
    "qos-match-rule": {"use", "qos-class", "source", "destination", "service-id", "pkey", "qos-level-name"},
    "vlarb-scope": {"group", "across", "vlarb-high", "vlarb-low", "vl-high-limit"},
    "sl2vl-scope": {"group", "across", "across-from", "across-to", "from", "to", "sl2vl-table"},
}
_ALL_KEYWORDS = (set(_SECTIONS) | {v[0] for v in _SECTIONS.values()} | set(_SETUP_TABLES)
                 | {v[0] for v in _SETUP_TABLES.values()} | set(_BLOCK_KEYS) | {f"end-{b}" for b in _BLOCK_KEYS})
_KEYWORD_RE = re.compile(r"^(?P<kw>[a-z][a-z0-9\-]*)$", re.IGNORECASE)
_KEY_RE = re.compile(r"^(?P<key>[a-z][a-z0-9\-]*)\s*:\s*(?P<value>.*)$", re.IGNORECASE)
_ULP_RE = re.compile(r"^(?P<ulp>default|sdp|srp|rds|iser|ipoib|any)\s*(?:,\s*(?P<sel>[^:]*?))?\s*:\s*(?P<sl>\S*)$",
                     re.IGNORECASE)
_PAIR_RE = re.compile(r"^\s*(0[xX][0-9a-fA-F]+|\d+)\s*:\s*(0[xX][0-9a-fA-F]+|\d+)\s*$")

_SNIFF_SECTION = re.compile(
    r"^[ \t]*(?:port-groups|qos-setup|qos-levels|qos-match-rules|qos-ulps|end-port-groups|end-qos-setup|"
    r"end-qos-levels|end-qos-match-rules|end-qos-ulps|port-group|end-port-group|qos-level|end-qos-level|"
    r"qos-match-rule|end-qos-match-rule|vlarb-scope|sl2vl-scope|vlarb-tables|sl2vl-tables)[ \t]*(?:#[^\n]*)?$",
    re.MULTILINE)
_SNIFF_KEY = re.compile(
    r"^[ \t]*(?:qos-level-name|port-guid|port-name|node-type|mtu-limit|rate-limit|packet-life|sl2vl-table|"
    r"vlarb-high|vlarb-low|(?:sl|name)(?=[ \t]*:[ \t]*\S))[ \t]*:", re.MULTILINE)
_SNIFF_ULP = re.compile(r"^[ \t]*(?:default|sdp|rds|iser|ipoib|any|srp)[ \t]*(?:,[^:\n]*)?:[ \t]*\d+[ \t]*(?:#.*)?$",
                        re.MULTILINE | re.IGNORECASE)


def sniff(head: str) -> int:
    if "qos-" not in head and "port-group" not in head and "sl2vl" not in head and "vlarb" not in head:
        return 0
    sections = len(_SNIFF_SECTION.findall(head))
    if not sections:
        return 0
    keys = len(_SNIFF_KEY.findall(head)) + len(_SNIFF_ULP.findall(head))
    if sections >= 2 and keys:
        return 95
    if sections >= 2 or keys >= 2:
        return 80
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _strip_comment(line: str) -> str:
    """The line without its ``#`` comment; a ``#`` inside ``"..."`` (the lexer's quoted text) is kept."""
    if "#" not in line:
        return line
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def _num(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _items(value: str) -> tuple[str, ...]:
    return tuple(p.strip().strip('"') for p in value.split(",") if p.strip())


def _pairs(value: str, n: int, problems: list[str]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for part in value.split(","):
        if not part.strip():
            continue
        m = _PAIR_RE.match(part)
        if not m:
            problems.append(f"line {n}: VLArb entry {part.strip()!r} is not VL:weight")
            continue
        out.append((int(m.group(1), 0), int(m.group(2), 0)))
    return tuple(out)


@dataclass
class _Block:
    kind: str
    start: int
    start_text: str
    fields: dict[str, list[tuple[int, str, str]]]  # key -> [(line, value, raw line)]

    def first(self, key: str) -> str | None:
        got = self.fields.get(key)
        return got[0][1] if got else None

    def joined(self, key: str) -> tuple[str, ...]:
        return tuple(x for _, v, _ in self.fields.get(key, []) for x in _items(v))

    def line_of(self, *keys: str) -> tuple[int, str]:
        for k in keys:
            got = self.fields.get(k)
            if got:
                return got[0][0], got[0][2]
        return self.start, self.start_text


class _State:
    def __init__(self, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
        self.source, self.host, self.records, self.problems = source, host, records, problems
        self.stack: list[tuple[str, int]] = []  # open sections / tables (keyword, line)
        self.block: _Block | None = None
        self.group: str | None = None  # the current port-group's name
        self.rules = 0
        self.bad = 0

    def problem(self, text: str) -> None:
        self.bad += 1
        if self.bad <= 20:
            self.problems.append(text)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    st = _State(source, host, records, problems)
    for n, raw in iter_lines(text):
        p = shell_prompt(raw)
        if p is not None:
            if p[0] and p[0].lower() not in ("localhost", "localhost.localdomain"):
                st.host = p[0]
            continue
        s = _strip_comment(raw).strip()
        if not s or s.startswith("```"):
            continue
        _line(st, n, raw, s)
    if st.block is not None:
        st.problem(f"line {st.block.start}: {st.block.kind} not closed (end-{st.block.kind} missing: cut?)")
        _close_block(st)
    for kw, line in reversed(st.stack):
        end = _SECTIONS.get(kw, _SETUP_TABLES.get(kw, ("end-" + kw, None)))[0]
        st.problem(f"line {line}: {kw} not closed ({end} missing: cut?)")
    if st.bad > 20:
        problems.append(f"{st.bad} problem(s) in all")


def _line(st: _State, n: int, raw: str, s: str) -> None:
    kw_m = _KEYWORD_RE.match(s)
    kw = kw_m.group("kw").lower() if kw_m else None
    top = st.stack[-1][0] if st.stack else None
    if st.block is not None:
        if kw == f"end-{st.block.kind}":
            _close_block(st)
            return
        m = _KEY_RE.match(s)
        if m and m.group("key").lower() in _BLOCK_KEYS[st.block.kind]:
            key = m.group("key").lower()
            st.block.fields.setdefault(key, []).append((n, m.group("value").strip(), raw))
            if st.block.kind == "port-group":
                _group_line(st, n, raw, key, m.group("value").strip())
            return
        if kw in _ALL_KEYWORDS:  # a section keyword inside a block: the block was never closed
            st.problem(f"line {st.block.start}: {st.block.kind} not closed before line {n}")
            _close_block(st)
            _line(st, n, raw, s)
            return
        st.problem(f"line {n}: not a {st.block.kind} entry: {s[:60]!r}")
        return
    if top is not None:
        end, block = _SECTIONS.get(top, _SETUP_TABLES.get(top, (None, None)))
        if kw == end:
            st.stack.pop()
            return
        if block is not None and kw == block:
            st.block = _Block(kind=block, start=n, start_text=raw, fields={})
            st.group = None
            return
        if top == "qos-setup" and kw in _SETUP_TABLES:
            st.stack.append((kw, n))
            return
        if top == "qos-ulps":
            _ulp(st, n, raw, s)
            return
    if kw in _SECTIONS and top is None:
        st.stack.append((kw, n))
        return
    if kw in _ALL_KEYWORDS and top is not None:  # e.g. qos-levels inside an unclosed port-groups
        end = _SECTIONS.get(top, _SETUP_TABLES.get(top, ("end-" + top, None)))[0]
        st.problem(f"line {st.stack[-1][1]}: {top} not closed ({end} missing) before line {n}")
        st.stack.pop()
        _line(st, n, raw, s)
        return
    where = f"in {top}" if top else "outside any section"
    st.problem(f"line {n}: not QoS policy syntax {where}: {s[:60]!r}")


def _group_line(st: _State, n: int, raw: str, key: str, value: str) -> None:
    if key == "name":
        st.group = value.strip('"') or None
        return
    if key == "use":
        return
    members = _items(value)
    if key == "node-type":
        members = tuple(m.upper() for m in members)
        odd = [m for m in members if m not in ("CA", "SWITCH", "ROUTER", "ALL", "SELF")]
        if odd:
            st.problem(f"line {n}: unknown node-type {', '.join(odd)}")
    st.records.append(QosPortGroupMember(source=st.source, line=n, text=clip(raw), host=st.host, group=st.group,
                                         kind=key, members=members))


def _ulp(st: _State, n: int, raw: str, s: str) -> None:
    m = _ULP_RE.match(s)
    if not m:
        st.problem(f"line {n}: not a qos-ulps rule: {s[:60]!r}")
        return
    sl = _num(m.group("sl")) if m.group("sl") else None
    if sl is None or not 0 <= sl < NUM_SL:
        st.problem(f"line {n}: illegal SL value {m.group('sl')!r}")
        sl = None
    sel = (m.group("sel") or "").strip() or None
    st.records.append(QosUlp(source=st.source, line=n, text=clip(raw), host=st.host, ulp=m.group("ulp").lower(),
                             selector=sel, sl=sl))


def _int_field(st: _State, b: _Block, key: str, limit: int | None = None) -> int | None:
    v = b.first(key)
    if v is None:
        return None
    x = _num(v)
    if x is None or x < 0 or (limit is not None and x >= limit):
        line, _ = b.line_of(key)
        st.problem(f"line {line}: bad {key} value {v!r}" if key != "sl" else f"line {line}: illegal SL value {v!r}")
        return None
    return x


def _close_block(st: _State) -> None:
    b = st.block
    st.block = None
    if b is None:
        return
    src, host = st.source, st.host
    if b.kind == "qos-level":
        line, raw = b.line_of("sl", "name")
        st.records.append(QosLevel(
            source=src, line=line, text=clip(raw), host=host, name=(b.first("name") or "").strip('"') or None,
            use=b.first("use"), sl=_int_field(st, b, "sl", NUM_SL), mtu_limit=_int_field(st, b, "mtu-limit"),
            rate_limit=_int_field(st, b, "rate-limit"), packet_life=_int_field(st, b, "packet-life"),
            path_bits=b.first("path-bits"), pkey=b.first("pkey")))
    elif b.kind == "qos-match-rule":
        st.rules += 1
        line, raw = b.line_of("qos-level-name")
        st.records.append(QosMatchRule(
            source=src, line=line, text=clip(raw), host=host, index=st.rules, use=b.first("use"),
            qos_class=b.first("qos-class"),
            source_groups=None if b.first("source") is None else ",".join(b.joined("source")),
            destination_groups=None if b.first("destination") is None else ",".join(b.joined("destination")),
            service_id=b.first("service-id"), pkey=b.first("pkey"), level=b.first("qos-level-name")))
    elif b.kind == "vlarb-scope":
        line, raw = b.line_of("vlarb-low", "vlarb-high", "group")
        high = tuple(p for ln, v, _ in b.fields.get("vlarb-high", []) for p in _pairs(v, ln, st.problems))
        low = tuple(p for ln, v, _ in b.fields.get("vlarb-low", []) for p in _pairs(v, ln, st.problems))
        st.records.append(QosVlArbScope(
            source=src, line=line, text=clip(raw), host=host, groups=b.joined("group"), across=b.joined("across"),
            high=high, low=low, high_limit=_int_field(st, b, "vl-high-limit", 256)))
    elif b.kind == "sl2vl-scope":
        line, raw = b.line_of("sl2vl-table", "group")
        vls: tuple[int, ...] | None = None
        table = b.first("sl2vl-table")
        if table is not None:
            got = [_num(x) for x in table.split(",") if x.strip()]
            if len(got) == NUM_SL and all(v is not None and 0 <= v < NUM_SL for v in got):
                vls = tuple(v for v in got if v is not None)
            else:
                st.problem(f"line {line}: sl2vl-table needs 16 VLs 0-15, got {table[:60]!r}")
        st.records.append(QosSl2VlScope(
            source=src, line=line, text=clip(raw), host=host, groups=b.joined("group"), across=b.joined("across"),
            across_from=b.joined("across-from"), across_to=b.joined("across-to"), from_ports=b.first("from"),
            to_ports=b.first("to"), vls=vls))

