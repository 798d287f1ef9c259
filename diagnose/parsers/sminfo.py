"""``sminfo`` (infiniband-diags): which subnet manager is master, its priority and activity count.

Shape (rdma-core ``infiniband-diags/sminfo.c``)::

    sminfo: sm lid 37 sm guid 0x7cfe90030016aef1, activity count 4484381 priority 14 state 3 SMINFO_MASTER

Older builds print the LID in hex and may stop after the priority
(``sminfo: sm lid 0x1 sm guid 0x2c9010b7c2ae1, activity count 20 priority 1``). A capture of several hosts or of
two runs has one line each; every line becomes a :class:`~diagnose.parsers._fabric.SmInfo` (an activity count that
does not grow between two runs means the SM is stuck). ``sminfo: iberror: ... query failed`` and similar lines
(no SM answering) become :class:`~diagnose.parsers._ib.ToolError`.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import SmInfo, norm_sm_state
from diagnose.parsers._ib import ToolError, norm_guid, to_int, tool_error
from diagnose.parsers._lines import iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "sminfo"

_LINE_RE = re.compile(
    r"^\s*(?:[\w.-]+:\s+)?sminfo:\s+sm\s+lid\s+(?P<lid>0x[0-9a-fA-F]+|\d+)\s+sm\s+guid\s+(?P<guid>0x[0-9a-fA-F]+)\s*,?"
    r"\s*(?:activity\s+count\s+(?P<act>\d+))?\s*(?:priority\s+(?P<prio>\d+))?"
    r"\s*(?:state\s+(?P<state_num>\d+)(?:\s+(?P<state>\w+))?)?\s*$"
)
_ERR_RE = re.compile(r"^\s*(?:[\w.-]+:\s+)?sminfo:\s*(?:iberror|ibwarn|ibpanic|Failed|failed)\b.*$")

_SNIFF_RE = re.compile(r"^[ \t]*(?:[\w.-]+:[ \t]+)?sminfo: sm lid (?:0x[0-9a-fA-F]+|\d+) sm guid 0x", re.MULTILINE)
_SNIFF_ERR = re.compile(r"^[ \t]*(?:[\w.-]+:[ \t]+)?sminfo: iberror:", re.MULTILINE)


def sniff(head: str) -> int:
    if _SNIFF_RE.search(head):
        return 95
    if _SNIFF_ERR.search(head):
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        p = prompt(line)
        if p is not None:
            if p[0]:
                cur_host = p[0]
            continue
        m = _LINE_RE.match(line)
        if m:
            state = norm_sm_state(m.group("state")) or norm_sm_state(m.group("state_num"))
            records.append(
                SmInfo(
                    source=source,
                    line=n,
                    text=clip(line),
                    host=cur_host,
                    sm_lid=to_int(m.group("lid")),
                    sm_guid=norm_guid(m.group("guid")),
                    activity=to_int(m.group("act")),
                    priority=to_int(m.group("prio")),
                    state=state,
                )
            )
            continue
        if _ERR_RE.match(line) or tool_error(line) is not None:
            records.append(
                ToolError(source=source, line=n, text=clip(line), host=cur_host, tool=FORMAT, message=line.strip())
            )
            continue
        if "sminfo: sm lid" in line:
            problems.append(f"line {n}: unparseable sminfo line {line.strip()[:80]!r}")
