"""NVIDIA Fabric Manager log (``/var/log/fabricmanager.log``) and its systemd journal
(``journalctl -u nvidia-fabricmanager``).

Log lines: ``[<Mon DD YYYY HH:MM:SS>] [INFO|ERROR|WARNING] [tid <n>] <message>``; multi-line payloads
continue without a prefix. Journal lines: ``<Mon DD HH:MM:SS> <host> nv-fabricmanager[<pid>]: <message>``
and ``systemd[1]: nvidia-fabricmanager.service: ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip

FORMAT = "fabric_manager_log"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk

_LOG = re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} \d{1,2} \d{4} \d\d:\d\d:\d\d)\] \[(?P<level>[A-Z]+)\] \[tid \d+\] (?P<msg>.*)$")
_JOURNAL = re.compile(
    r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (?P<host>\S+) "
    r"(?:nv-fabricmanager\[\d+\]|systemd\[1\]|nvidia-fabricmanager(?:d)?\[\d+\]): (?P<msg>.*)$"
)
_SNIFF = re.compile(r"^\[[A-Z][a-z]{2} \d{1,2} \d{4} \d\d:\d\d:\d\d\] \[(?:INFO|ERROR|WARNING)\] \[tid \d+\] ", re.M)
_SNIFF_J = re.compile(r"nv-fabricmanager\[\d+\]:|nvidia-fabricmanager\.service", re.M)

_CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("version_mismatch", re.compile(r"don't match with driver version|version mismatch|does not match", re.I)),
    ("service_failed", re.compile(r"nvidia-fabricmanager\.service: (?:Failed|Main process exited|Control process exited)"
                                  r"|Failed to start NVIDIA fabric manager", re.I)),
    ("nvswitch_error", re.compile(r"detected NVSwitch (?:non-)?fatal error", re.I)),
    ("started", re.compile(r"Fabric Manager version \S+ is running|Started NVIDIA fabric manager", re.I)),
    ("configured", re.compile(r"Successfully configured all the available NVSwitches", re.I)),
    ("stopped", re.compile(r"Stopping NVIDIA fabric manager|fabric manager (?:is )?(?:exiting|stopped)", re.I)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FmEvent(Record):
    level: str | None  # INFO / ERROR / WARNING; None for journal lines
    category: str  # version_mismatch, service_failed, nvswitch_error, started, configured, stopped, error, other
    message: str
    timestamp: str | None


def sniff(head: str) -> int:
    n = len(_SNIFF.findall(head))
    if n >= 3:
        return 92
    if n:
        return 60
    j = len(_SNIFF_J.findall(head))
    return 85 if j >= 2 else 55 if j else 0


def _category(msg: str, level: str | None) -> str:
    for name, pat in _CATEGORIES:
        if pat.search(msg):
            return name
    return "error" if level == "ERROR" else "other"


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        m = _LOG.match(raw)
        if m:
            level, msg, ts, h = m["level"], m["msg"], m["ts"], host
        else:
            m = _JOURNAL.match(raw)
            if not m:
                continue
            level, msg, ts, h = None, m["msg"], m["ts"], m["host"]
            if "fabric" not in raw.lower():
                continue
        cat = _category(msg, level)
        if cat == "other" and level == "INFO":
            continue  # routine chatter (inband messages, multicast teams) carries no verdict
        records.append(FmEvent(source=source, line=lineno, text=clip(raw), host=h, level=level, category=cat,
                               message=msg.strip(), timestamp=ts))
    return ParseResult(format=FORMAT, records=records, problems=[] if records else ["no fabric manager lines found"])
