"""A RoCE switch's own lossless counters: SONiC's ``show pfc counters`` and ``show queue counters``.

Shapes (sonic-utilities ``scripts/pfcstat`` and ``scripts/queuestat``, tabulated; real outputs quoted in
``tests/data/sonic_qos/README.md``)::

      Port Rx    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7
    -----------  ------  ------  ------  ------  ------  ------  ------  ------
      Ethernet4       0       0       0       0       0       0       0       0

      Port Tx    PFC0 ...

    For namespace :
         Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    Drop/bytes
    ---------  -----  --------------  ---------------  -----------  ------------
    Ethernet4    UC3            8193           852072        91786       9545744

``pfcstat`` counts the PFC pause frames each port received (``Rx``) and sent (``Tx``) per priority; ``queuestat``
counts what each egress queue sent and dropped (``UC<n>`` unicast queue n, which carries priority n in SONiC's
default ``TC_TO_QUEUE_MAP``; ``MC<n>`` multicast). Numbers may carry thousands separators (``1,200``) and
``N/A`` where the ASIC does not count. A shell prompt (``admin@leaf07:~$``) names the switch.

Records: one :class:`SwitchPfcCount` per port, direction and priority, one :class:`SwitchQueueCount` per port and
queue. ``host`` is the switch the prompt names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import shell_line
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "sonic_qos"

_TOOLS = ("show", "pfcstat", "queuestat")
_PFC_HDR = re.compile(r"^\s*Port\s+(?P<dir>Rx|Tx)\s+PFC0\s+PFC1\s+PFC2\s+PFC3\s+PFC4\s+PFC5\s+PFC6\s+PFC7\s*$")
_Q_HDR = re.compile(r"^\s*Port\s+TxQ\s+Counter/pkts\s+Counter/bytes\s+Drop/pkts\s+Drop/bytes\s*$")
_RULE = re.compile(r"^\s*-{3,}(?:\s+-{3,})+\s*$")
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+|N/A)"
_PFC_ROW = re.compile(r"^\s*(?P<port>\S+)" + r"".join(rf"\s+(?P<p{i}>{_NUM})" for i in range(8)) + r"\s*$")
_Q_ROW = re.compile(rf"^\s*(?P<port>\S+)\s+(?P<q>(?:UC|MC|ALL)\d+)\s+(?P<pk>{_NUM})\s+(?P<by>{_NUM})\s+"
                    rf"(?P<dpk>{_NUM})\s+(?P<dby>{_NUM})\s*$")
_SKIP = re.compile(r"^\s*(?:For namespace\b.*|Last cached time was .*)$")
_SNIFF = re.compile(r"^[ \t]*Port (?:Rx|Tx)[ \t]+PFC0[ \t]+PFC1|^[ \t]*Port[ \t]+TxQ[ \t]+Counter/pkts", re.MULTILINE)


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchPfcCount(Record):
    """PFC pause frames one switch port received (``rx``) or sent (``tx``) on one priority."""

    port: str  # 'Ethernet4'
    direction: str  # 'rx' | 'tx'
    prio: int
    frames: int | None  # None: N/A


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchQueueCount(Record):
    """What one egress queue of a switch port sent and dropped."""

    port: str
    queue: str  # 'UC3'
    prio: int | None  # the priority a unicast queue carries by SONiC's default TC_TO_QUEUE_MAP (UCn <- TC n)
    pkts: int | None
    bytes: int | None
    drop_pkts: int | None
    drop_bytes: int | None


def sniff(head: str) -> int:
    return 95 if _SNIFF.search(head) else 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _num(s: str) -> int | None:
    return None if s == "N/A" else int(s.replace(",", ""))


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    table: str | None = None  # 'rx' | 'tx' | 'queue'
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        h = _PFC_HDR.match(line)
        if h is not None:
            table = h.group("dir").lower()
            continue
        if _Q_HDR.match(line):
            table = "queue"
            continue
        if _RULE.match(line) or _SKIP.match(line):
            continue
        t = clip(line)
        if table in ("rx", "tx") and (m := _PFC_ROW.match(line)):
            for i in range(8):
                records.append(SwitchPfcCount(source=source, line=n, text=t, host=cur_host, port=m.group("port"),
                                              direction=table, prio=i, frames=_num(m.group(f"p{i}"))))
            continue
        if table == "queue" and (q := _Q_ROW.match(line)):
            queue = q.group("q")
            records.append(SwitchQueueCount(
                source=source, line=n, text=t, host=cur_host, port=q.group("port"), queue=queue,
                prio=int(queue[2:]) if queue.startswith("UC") and int(queue[2:]) < 8 else None,
                pkts=_num(q.group("pk")), bytes=_num(q.group("by")), drop_pkts=_num(q.group("dpk")),
                drop_bytes=_num(q.group("dby"))))
            continue
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind == "boundary":
            table = None
        elif kind is None and len(problems) < 20:
            problems.append(f"line {n}: not a counter line: {clip(line.strip())}")
