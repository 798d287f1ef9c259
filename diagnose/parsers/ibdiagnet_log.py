"""``ibdiagnet2.log`` / ibdiagnet stdout (NVIDIA ibdiagnet): per-stage info, warnings and errors.

Shape (ibdiagnet user manual, "Warnings and Errors Printing Policy"; real output quoted in public notes, see
``tests/data/ibdiagnet_log/README.md``)::

    ---------------------------------------------
    Discovery
    -I- Discovering ... 15 nodes (3 Switches & 12 CA-s) discovered.
    -W- ...
    ---------------------------------------------
    Fabric Summary

    Total Nodes             : 15
    IB Switches             : 3
    ---------------------------------------------
    Summary
    -I- Stage                     Warnings   Errors     Comment
    -I- Discovery                 3          0
    -I- Routing                   0          0

Each stage starts after a ``-----`` rule with its title on the next line. Messages are ``-I- `` (info),
``-W- `` (warning) and ``-E- `` (error); indented lines right after a message continue it. The older ibdiagnet
(v1) frames its stage titles as ``-I---------`` / ``-I- <title>`` / ``-I---------``, which is recognised too.

Records: one :class:`~diagnose.parsers._fabric.ToolMessage` (``tool="ibdiagnet"``) per message, with the stage
title in ``stage``; the ``Summary`` table rows are info messages of stage ``Summary`` (the table header row is
skipped) and the ``Fabric Summary`` ``key : value`` lines info messages of stage ``Fabric Summary``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import ToolMessage
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibdiagnet_log"
TOOL = "ibdiagnet"

_MSG_RE = re.compile(r"^\s*-(?P<lvl>[IWEV])-\s?(?P<msg>.*?)\s*$")
_RULE_RE = re.compile(r"^\s*-{10,}\s*$")
_V1_RULE_RE = re.compile(r"^\s*-I-{10,}\s*$")
_KV_RE = re.compile(r"^\s*(?P<key>[A-Za-z][\w /&()-]*?)\s+:\s+(?P<val>\S.*?)\s*$")
_TABLE_HDR_RE = re.compile(r"^Stage\s+Warnings\s+Errors\b")
_LEVELS = {"I": "info", "W": "warning", "E": "error", "V": "info"}

_SNIFF_MSG = re.compile(r"^[ \t]*-[IWE]- \S", re.MULTILINE)
_SNIFF_STRONG = re.compile(
    r"(?:ibdiagnet|IBDIAG|-I- Stage\s+Warnings\s+Errors|^Fabric Summary\s*$|Discovering \.\.\.|"
    r"\bnodes \(\d+ Switches & \d+ CA-s\)|ibdiagnet2\.(?:log|db_csv|lst|pm|net_dump)"
    r"|^-{20,}[ \t]*\n[A-Z][^\n]*\n-[IWE]- "  # a stage rule, its title, its first message
    r"|Unexpected actual link (?:speed|width)|increased during the run \(difference value=|Links (?:Speed|Width) Check"
    r"|\bS[0-9a-fA-F]{16}/N[0-9a-fA-F]{16}/P\d)",  # its port names
    re.MULTILINE,
)


def sniff(head: str) -> int:
    msgs = len(_SNIFF_MSG.findall(head))
    if not msgs:
        return 0
    if _SNIFF_STRONG.search(head):
        return 95 if msgs >= 2 else 80
    if msgs >= 5:
        return 45
    return 20  # other Mellanox tools (flint, mst, mlxconfig) print -I-/-E- lines too


@dataclass
class _Msg:
    line: int
    text: str
    level: str
    stage: str | None
    parts: list[str] = field(default_factory=list)


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    lines = list(iter_lines(text))
    stage: str | None = None
    expect_title = False
    cur: _Msg | None = None

    def close() -> None:
        nonlocal cur
        if cur is not None:
            msg = " ".join(p for p in cur.parts if p)
            if msg:
                records.append(
                    ToolMessage(
                        source=source, line=cur.line, text=clip(cur.text), host=host, tool=TOOL, level=cur.level,
                        message=msg, stage=cur.stage,
                    )
                )
        cur = None

    for i, (n, line) in enumerate(lines):
        s = line.strip()
        if not s:
            if cur is not None:
                close()
            continue
        if _V1_RULE_RE.match(line):
            close()
            # ibdiagnet v1: -I---- / -I- <title> / -I----
            if i + 2 < len(lines) and _V1_RULE_RE.match(lines[i + 2][1]):
                m = _MSG_RE.match(lines[i + 1][1])
                if m:
                    stage = m.group("msg")
                    expect_title = True  # swallow the title line
            continue
        if _RULE_RE.match(line):
            close()
            expect_title = True
            stage = None
            continue
        m = _MSG_RE.match(line)
        if expect_title:
            expect_title = False
            if m is None:
                stage = s
                continue
            if stage is not None and m.group("msg") == stage:
                continue  # v1 title line already taken
        if m:
            close()
            msg = m.group("msg")
            if _TABLE_HDR_RE.match(msg):
                stage = "Summary"  # the run summary table (its title line may be missing)
                continue
            cur = _Msg(line=n, text=line, level=_LEVELS[m.group("lvl")], stage=stage, parts=[msg])
            continue
        if cur is not None and line[:1] in (" ", "\t"):
            cur.parts.append(s)
            continue
        close()
        kv = _KV_RE.match(line)
        if kv and stage == "Fabric Summary":
            records.append(
                ToolMessage(
                    source=source, line=n, text=clip(line), host=host, tool=TOOL, level="info",
                    message=f"{kv.group('key').strip()}: {kv.group('val')}", stage=stage,
                )
            )
    close()
