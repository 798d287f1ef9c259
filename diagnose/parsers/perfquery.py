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

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ParseResult, Record, clip
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
        _parse(text, source, host, records, problems)
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


@dataclass
class _Block:
    key: tuple[str, int | None, int | None, str | None]  # (attribute, lid, port, guid)
    line: int
    label: str
    extended: bool
    snapshot: int
    timestamp: str | None
    counter_lines: int = 0


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    guid: str | None = None
    timestamp: str | None = None
    seen: dict[tuple[str, int | None, int | None, str | None], int] = {}
    block: _Block | None = None
    max_lines: dict[str, int] = {}
    orphan_reported = False
    last_line_bad: tuple[int, str] | None = None

    def close() -> None:
        nonlocal block
        if block is not None:
            attr = block.key[0]
            max_lines[attr] = max(max_lines.get(attr, 0), block.counter_lines)
        block = None

    canon_cache: dict[str, str | None] = {}
    for n, line in iter_lines(text):
        if block is not None:
            # fast path: inside a block almost every line is `Name:.....value`
            fm = _FAST_COUNTER_RE.match(line)
            if fm is not None:
                name = fm.group(1)
                block.counter_lines += 1
                canon = canon_cache.get(name, "")
                if canon == "":
                    canon = canon_cache[name] = canonical_counter(name)
                last_line_bad = None
                if canon is not None:
                    records.append(PortCounter(
                        source=source, line=n, text=clip(line), host=cur_host, lid=block.key[1],
                        guid=block.key[3], port=block.key[2], counter=canon, value=int(fm.group(2)),
                        extended=block.extended, snapshot=block.snapshot, timestamp=block.timestamp,
                    ))
                continue
        stripped = line.strip()
        if not stripped:
            continue
        last_line_bad = None
        err = tool_error(line)
        if err is not None:
            records.append(
                ToolError(source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=err)
            )
            continue
        m = _HDR_RE.match(line)
        if m:
            close()
            attr = m.group("attr")
            lm = _LID_RE.search(m.group("portid"))
            lid = int(lm.group("lid")) if lm else None
            port_num = int(m.group("port"))
            port = None if port_num == ALL_PORTS else port_num
            key = (attr, lid, port, guid)
            snap = seen.get(key, 0)
            seen[key] = snap + 1
            label = f"Lid {lid if lid is not None else m.group('portid')} port {port_num}"
            block = _Block(
                key=key,
                line=n,
                label=label,
                extended=attr == "Port extended",
                snapshot=snap,
                timestamp=timestamp,
            )
            continue
        ts = _timestamp(line)
        if ts is not None:
            close()
            timestamp = ts
            continue
        p = prompt(line)
        cmd = p[1] if p is not None else command_line(line, ("perfquery",))
        if p is not None or cmd is not None:
            close()
            if p is not None and p[0]:
                cur_host = p[0]
            if cmd and "perfquery" in cmd:
                gm = _GUID_ARG_RE.search(cmd)
                guid = norm_guid(gm.group("guid")) if gm else None
            continue
        if stripped.startswith("#"):
            close()  # another attribute's header (e.g. `# PortSamplesControl:`) or a comment ends the block
            continue
        m = _COUNTER_RE.match(line)
        if not m:
            if (
                block is not None
                and stripped.startswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
                and ":" not in stripped
            ):
                last_line_bad = (n, stripped)  # e.g. a line cut before its colon
            continue
        name, raw = m.group("name"), m.group("val")
        if block is None:
            if canonical_counter(name) and not orphan_reported:
                problems.append(
                    f"line {n}: counter line before any perfquery header (header missing or cut off)"
                )
                orphan_reported = True
            continue
        block.counter_lines += 1
        canon = canonical_counter(name)
        if canon is None:
            continue
        if not raw:
            last_line_bad = (n, stripped)
            continue
        if not raw.isdigit():
            problems.append(f"line {n}: unparseable value {raw!r} for {name}")
            continue
        records.append(
            PortCounter(
                source=source,
                line=n,
                text=clip(line),
                host=cur_host,
                lid=block.key[1],
                guid=block.key[3],
                port=block.key[2],
                counter=canon,
                value=int(raw),
                extended=block.extended,
                snapshot=block.snapshot,
                timestamp=block.timestamp,
            )
        )
    if block is not None:
        attr = block.key[0]
        if last_line_bad is not None:
            problems.append(
                f"truncated: block for {block.label} ends early (line {last_line_bad[0]}: "
                f"{last_line_bad[1]!r})"
            )
        elif block.counter_lines == 0:
            problems.append(f"truncated: block for {block.label} ends early (no counters)")
        elif block.counter_lines < max_lines.get(attr, 0):
            problems.append(
                f"truncated: block for {block.label} ends early ({block.counter_lines} of "
                f"{max_lines[attr]} lines)"
            )
