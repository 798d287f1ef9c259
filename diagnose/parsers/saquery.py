"""``saquery`` (infiniband-diags): the subnet administrator's records, as ``<Record> dump:`` blocks.

Shape (rdma-core ``infiniband-diags/saquery.c``, the ``dump_*_record`` functions): a header line, then one
``name<dots>value`` line per field, each indented by two tabs (a paste in a mail or a README may lose the tabs)::

    NodeRecord dump:
            lid.....................134
            node_type...............Channel Adapter
            num_ports...............1
            node_guid...............0x98039b03006c7913
            port_guid...............0x98039b03006c7913
            NodeDescription.........MT4119 ConnectX5   Mellanox Technologies
    PathRecord dump:
            service_id..............0x0000000000000000
            dgid....................fe80::...
            dlid....................26
            slid....................14
            pkey....................0xFFFF
            sl......................0x0
            mtu.....................0x85
            rate....................0x90

``saquery`` (no option, or ``-N``) prints NodeRecords, ``-p`` PathRecords; ``-g`` ``MCMemberRecord group dump``,
``-m`` ``MCMemberRecord member dump``, ``-s`` PortInfoRecords, ``-S`` ServiceRecords, ``-I`` InformInfoRecords,
``-x`` LinkRecords, ``-c`` the ``SA ClassPortInfo``, and the ``SL2VLTableRecord`` / ``VLArbTableRecord`` /
``PKeyTableRecord`` / ``LFT Record`` / ``GUIDInfo Record`` / ``MFT Record`` / ``SMInfoRecord`` /
``SwitchInfoRecord`` queries their own blocks. Before infiniband-diags 1.5.x (commit "Change lids and port numbers to
decimal", 2009) LIDs and port numbers were printed in hex (``dlid....................0x1A``): a value is read as
hex when it starts with ``0x``, as decimal otherwise.

The ``mtu`` and ``rate`` bytes of a PathRecord (and of an MCMemberRecord) are printed raw, selector included
(man page: ``--mtu`` "MTU and selector"): the top two bits are the selector (2 = exactly), the low six the IBA
enum (MTU 1..5 = 256..4096 bytes; rate 2 = 2.5 Gb/s ... 16 = 100, 17 = 200, 21 = 400, 23 = 800 Gb/s, libibmad
``iba_types.h`` ``IB_PATH_RECORD_RATE_*``). ``0x84`` is 2048 bytes, ``0x85`` 4096.

Records:

* NodeRecord -> :class:`~diagnose.parsers._fabric.FabricNode` (``guid`` the node GUID, ``lid`` the LID of the
  record's port: a NodeRecord is per port, so a two-port HCA gives two records of one node GUID; ``ports`` the
  node's port count; ``description`` the NodeDescription as printed, possibly remapped by ``--node-name-map``),
  at the ``node_guid`` line.
* PathRecord -> :class:`SaPath` (LIDs, GIDs, SL, MTU in bytes, rate, P_Key), at its ``mtu`` line (the header
  line when the block has none); ``sl_line`` is the ``sl`` line.
* Every other block -> :class:`SaBlock` (its kind, first LID-like field, MTU/SL/rate where it has them).
* ``Query SA failed: ...``, ``ERROR: Query result returned ...``, ``Failed to find lid for ...`` and
  ``ibwarn:``/``iberror:`` lines -> :class:`~diagnose.parsers._ib.ToolError`.

Not read: the one-value-a-line forms (``-L``/``-l`` LIDs, ``-G`` GUIDs, ``-O``/``-U`` names) and ``-D``
(``   134  "name"``) carry too little to be recognised by content; no public capture of them was found either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import FabricNode, norm_node_type
from diagnose.parsers._ib import ToolError, norm_guid, tool_error
from diagnose.parsers._lines import iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "saquery"

MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
# IBA PathRecord rate enum (libibmad iba_types.h IB_PATH_RECORD_RATE_*): code -> Gb/s
RATE_GBPS: dict[int, float] = {
    2: 2.5, 3: 10, 4: 30, 5: 5, 6: 20, 7: 40, 8: 60, 9: 80, 10: 120, 11: 14, 12: 56, 13: 112, 14: 168, 15: 25,
    16: 100, 17: 200, 18: 300, 19: 28, 20: 50, 21: 400, 22: 600, 23: 800, 24: 1200,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SaPath(Record):
    """One PathRecord the SA answered: the path from ``slid``/``sgid`` to ``dlid``/``dgid``.

    ``mtu`` is in bytes (None for an enum outside 1..5), ``mtu_selector`` the selector bits (2 = exactly);
    ``rate`` the rate as text (``100 Gb/s``; ``enum 31`` when unknown), ``rate_gbps`` its number.
    """

    slid: int | None
    dlid: int | None
    sgid: str | None
    dgid: str | None
    sl: int | None
    mtu: int | None
    mtu_selector: int | None
    rate: str | None
    rate_gbps: float | None
    pkey: int | None
    block_line: int  # the ``PathRecord dump:`` line
    sl_line: int | None = None
    sl_text: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SaBlock(Record):
    """A saquery block other than a NodeRecord or PathRecord (MCMemberRecord, PortInfoRecord, ...), at its header."""

    kind: str  # the header without ' dump:' ('MCMemberRecord group', 'PortInfoRecord', 'SA ClassPortInfo')
    fields: int
    lid: int | None  # the block's first LID-like field (lid, LID, EndPortLid, FromLID, Mlid)
    mtu: int | None  # bytes, when the block has an MTU field
    sl: int | None
    rate_gbps: float | None


_KINDS = (
    "NodeRecord", "PathRecord", "PortInfoRecord", "MCMember Record", "MCMemberRecord group", "MCMemberRecord member",
    "ServiceRecord", "SMInfoRecord", "SwitchInfoRecord", "InformInfoRecord", "LinkRecord", "SL2VLTableRecord",
    "VLArbTableRecord", "PKeyTableRecord", "LFT Record", "GUIDInfo Record", "MFT Record",
)
_HEADER_RE = re.compile(r"^\s*(?:(?P<kind>" + "|".join(re.escape(k) for k in _KINDS) + r") dump|(?P<cpi>SA ClassPortInfo)):\s*$")
_FIELD_RE = re.compile(r"^\s*(?P<key>[A-Za-z_][\w ./]*?)\.{3,}(?P<val>.*?)\s*$")
_CMD_RE = re.compile(r"^\s*(?:sudo\s+)?(?:\S*/)?saquery(?:\s.*)?$")
_SA_ERR_RE = re.compile(
    r"^\s*(?:Query SA failed:.*|ERROR: Query result returned.*|Failed to find lid for .*|Invalid lid specified:.*"
    r"|Failed to query SA:ClassPortInfo.*|ERROR: (?:name|lid|guid) (?:not specified|invalid).*)$"
)
_SNIFF_HDR = re.compile(r"^[ \t]*(?:(?:NodeRecord|PathRecord|PortInfoRecord|MCMemberRecord group|MCMemberRecord member"
                        r"|MCMember Record|ServiceRecord|SMInfoRecord|InformInfoRecord|LinkRecord) dump"
                        r"|SA ClassPortInfo):[ \t]*$", re.MULTILINE)
_SNIFF_FIELD = re.compile(r"^[ \t]*(?:node_guid|port_guid|sys_guid|NodeDescription|num_path_revers|hop_flow_raw"
                          r"|service_id|EndPortLid|MGID|Mlid|PortGid)\.{3,}\S", re.MULTILINE)
_LID_KEYS = ("lid", "LID", "EndPortLid", "FromLID", "Mlid", "mlid")


def sniff(head: str) -> int:
    hdr = len(_SNIFF_HDR.findall(head[:65536]))
    fields = len(_SNIFF_FIELD.findall(head[:65536]))
    if hdr and fields:
        return 95
    if hdr >= 2:
        return 70
    if fields >= 3:
        return 60  # a block cut above its header
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def num(value: str | None) -> int | None:
    """``0x1A`` (hex, as saquery prints most fields and, before 2009, LIDs) or ``26`` (decimal)."""
    if value is None:
        return None
    v = value.strip()
    try:
        return int(v, 16) if v[:2].lower() == "0x" else int(v, 10)
    except ValueError:
        return None


def mtu_bytes(raw: int | None) -> tuple[int | None, int | None]:
    """The raw MTU byte (selector << 6 | enum) -> (bytes, selector)."""
    if raw is None:
        return None, None
    return MTU_BYTES.get(raw & 0x3F), raw >> 6


def rate_of(raw: int | None) -> tuple[str | None, float | None]:
    if raw is None:
        return None, None
    g = RATE_GBPS.get(raw & 0x3F)
    if g is None:
        return f"enum {raw & 0x3F}", None
    return f"{g:g} Gb/s", float(g)


@dataclass
class _Block:
    kind: str
    line: int
    text: str
    host: str | None
    fields: dict[str, tuple[str, int, str]]  # key -> (value, line, text), first one wins


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    block: _Block | None = None
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        m = _HEADER_RE.match(line)
        if m:
            _close(block, source, records, problems)
            block = _Block(kind=m.group("kind") or m.group("cpi"), line=n, text=clip(line), host=cur_host, fields={})
            continue
        f = _FIELD_RE.match(line)
        if f:
            if block is None:
                if len(problems) < 20:
                    problems.append(f"line {n}: field outside any record block: {clip(line.strip())}")
                continue
            block.fields.setdefault(f.group("key").strip(), (f.group("val"), n, clip(line)))
            continue
        err = tool_error(line) or (line.strip() if _SA_ERR_RE.match(line) else None)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=err))
            continue
        p = prompt(line)
        if p is not None or _CMD_RE.match(line) or line.lstrip().startswith(("$ ", "# ")):
            _close(block, source, records, problems)
            block = None
            if p is not None and p[0]:
                cur_host = p[0]
            continue
        # anything else inside a block is its own layout (RID, 'PortInfo dump:', SL2VL/LFT tables, a '...'
        # elision of the paste): skipped; outside a block it is not saquery's
        if block is None and len(problems) < 20:
            problems.append(f"line {n}: not a saquery line: {clip(line.strip())}")
    _close(block, source, records, problems)


def _close(block: _Block | None, source: str, records: list[Record], problems: list[str]) -> None:
    if block is None:
        return
    f = block.fields
    if block.kind == "NodeRecord":
        guid_f = f.get("node_guid")
        guid = norm_guid(guid_f[0]) if guid_f else None
        if guid is None or guid_f is None:
            problems.append(f"line {block.line}: NodeRecord without a node_guid (cut short?)")
            return
        desc = f.get("NodeDescription")
        records.append(FabricNode(
            source=source, line=guid_f[1], text=guid_f[2], host=block.host, guid=guid,
            node_type=norm_node_type(_v(f, "node_type")) or (_v(f, "node_type") or "?"),
            description=(desc[0].strip() or None) if desc else None,
            ports=num(_v(f, "num_ports")), lid=num(_v(f, "lid")),
        ))
        return
    if block.kind == "PathRecord":
        slid, dlid = num(_v(f, "slid")), num(_v(f, "dlid"))
        if slid is None and dlid is None:
            problems.append(f"line {block.line}: PathRecord without slid/dlid (cut short?)")
            return
        if "mtu" not in f:
            problems.append(f"line {block.line}: PathRecord without its mtu field (cut short?)")
        mtu, sel = mtu_bytes(num(_v(f, "mtu")))
        rate, gbps = rate_of(num(_v(f, "rate")))
        at = f.get("mtu")
        sl_f = f.get("sl")
        records.append(SaPath(
            source=source, line=at[1] if at else block.line, text=at[2] if at else block.text, host=block.host,
            slid=slid, dlid=dlid, sgid=_gid(_v(f, "sgid")), dgid=_gid(_v(f, "dgid")), sl=num(_v(f, "sl")),
            mtu=mtu, mtu_selector=sel, rate=rate, rate_gbps=gbps, pkey=num(_v(f, "pkey")), block_line=block.line,
            sl_line=sl_f[1] if sl_f else None, sl_text=sl_f[2] if sl_f else None,
        ))
        return
    lid = next((num(f[k][0]) for k in _LID_KEYS if k in f), None)
    mtu_raw = next((num(f[k][0]) for k in ("mtu", "Mtu") if k in f), None)
    sl = next((num(f[k][0]) for k in ("sl", "SL") if k in f), None)
    rate_raw = next((num(f[k][0]) for k in ("rate", "Rate") if k in f), None)
    records.append(SaBlock(
        source=source, line=block.line, text=block.text, host=block.host, kind=block.kind, fields=len(f), lid=lid,
        mtu=mtu_bytes(mtu_raw)[0], sl=sl, rate_gbps=rate_of(rate_raw)[1],
    ))


def _v(fields: dict[str, tuple[str, int, str]], key: str) -> str | None:
    got = fields.get(key)
    return got[0] if got else None


def _gid(value: str | None) -> str | None:
    v = (value or "").strip().lower()
    return v if re.fullmatch(r"[0-9a-f:.]{2,45}", v) and ":" in v else None
