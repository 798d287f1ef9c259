"""``ibswinfo`` (stanford-rc/ibswinfo): inventory and vitals of an unmanaged InfiniBand switch.

Default output is a ``key | value`` table between ``====``/``----`` rules; indented keys belong to the unindented
key above them (``PSU0 status`` then ``     P/N``, ``     power (W)``)::

    =================================================
    SwitchIB Mellanox Technologies
    =================================================
    part number        | MSB7790-ES2F
    PSID               | MT_1880110032
    GUID               | 0x1c34da0300010540
    firmware version   | 11.2008.2102
    PSU0 status        | OK
         P/N           | MTEF-PSF-AC-A
         power (W)     | 72
    temperature (C)    | 45
    fan status         | ERROR
    fan#1 (rpm)        | 8493

``-o vitals`` prints ``key : value`` lines (``cur.temp (C)       : 73``, ``psu0.power (W)     : 92``).

Records: one :class:`~diagnose.parsers._fabric.SwitchInfo` per row. Keys are the printed keys with their
spacing collapsed; an indented key is prefixed with the first word of its parent (``PSU0 P/N``,
``PSU0 power (W)``); the banner line becomes ``device``. ``guid`` is the ``GUID`` row of the same block (None in
vitals mode, which does not print it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import SwitchInfo
from diagnose.parsers._ib import norm_guid, shell_line
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibswinfo"

# A key starts with a non-blank (a blank run is the indent's alone) and a value ends at its last non-blank: lines of
# any length are matched in linear time (a lazy value before ``\s*$``, or a key that could start inside the indent,
# tried every split of a long blank run).
_TABLE_RE = re.compile(r"^(?P<indent>\s*)(?P<key>[^|\s](?:[^|]*?\S)?)\s*\|\s*(?P<val>(?:.*\S)?)\s*$")
_VITALS_RE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][\w.#/() -]*?\S)\s+:\s+(?P<val>(?:.*\S)?)\s*$")
_RULE_RE = re.compile(r"^\s*(?:={5,}|-{5,})\s*$")
_TOOLS = ("ibswinfo", "ibswinfo.sh")

_SNIFF_TABLE = re.compile(
    r"^(?:part number|serial number|product name|PSID|GUID|firmware version|uptime \(d-h:m:s\)|PSU\d status"
    r"|temperature \(C\)|max temp \(C\)|fan status|fan#\d+ \(rpm\))[ \t]+\|[ \t]",
    re.MULTILINE,
)
_SNIFF_VITALS = re.compile(
    r"^(?:uptime \(sec\)|psu\d\.power \(W\)|cur\.temp \(C\)|max\.temp \(C\)|fan#\d+\.speed \(rpm\))[ \t]+:[ \t]",
    re.MULTILINE,
)


def sniff(head: str) -> int:
    table = len(_SNIFF_TABLE.findall(head))
    vitals = len(_SNIFF_VITALS.findall(head))
    if table >= 3 or vitals >= 3:
        return 95
    if table or vitals:
        return 50
    return 0


@dataclass
class _Row:
    line: int
    text: str
    host: str | None
    key: str
    value: str
    block: int


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    rows: list[_Row] = []
    guids: dict[int, str] = {}
    block = 0
    parent: str | None = None
    prev_rule = False
    seen_rows_in_block = False

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind is not None:
            if kind == "boundary":
                block += 1
                seen_rows_in_block = False
                parent = None
            continue
        if _RULE_RE.match(line):
            if line.strip().startswith("=") and seen_rows_in_block and not prev_rule:
                block += 1  # a new switch's banner
                seen_rows_in_block = False
            prev_rule = True
            continue
        m = _TABLE_RE.match(line) or _VITALS_RE.match(line)
        if m is None:
            if prev_rule and not seen_rows_in_block and "|" not in line and ":" not in line:
                rows.append(_Row(n, line, cur_host, "device", line.strip(), block))
            prev_rule = False
            continue
        prev_rule = False
        seen_rows_in_block = True
        key = " ".join(m.group("key").split())
        value = m.group("val")
        if m.group("indent"):
            if parent is not None:
                key = f"{parent} {key}"
        else:
            parent = key.split()[0] if key.split() else None
        if key.upper() == "GUID":
            g = norm_guid(value)
            if g is not None:
                guids.setdefault(block, g)
        rows.append(_Row(n, line, cur_host, key, value, block))

    for r in rows:
        records.append(
            SwitchInfo(
                source=source, line=r.line, text=clip(r.text), host=r.host, guid=guids.get(r.block), key=r.key,
                value=r.value,
            )
        )
    records.sort(key=lambda r: r.line)
