"""OpenSM log (``/var/log/opensm.log``) and OpenSM syslog lines: errors and fabric events.

Line shape (linux-rdma/opensm ``libopensm/osm_log.c`` ``osm_log``)::

    Mar 11 19:32:26 717944 [EC430700] 0x01 -> sm_mad_ctrl_send_err_cb: ERR 3113: MAD completed in error (IB_TIMEOUT): SubnGet(SMInfo), attr_mod 0x0, TID 0x11f51

``<Mon> <DD> <HH:MM:SS> <usec> [<thread id>] 0x<level> -> <function>: <text>``; the level is the OSM_LOG bit
(0x01 ERROR, 0x02 INFO, 0x04 VERBOSE, 0x08 DEBUG, 0x10 FUNCS, 0x20 FRAMES, 0x40 ROUTING, 0x80 SYS). Lines without
that prefix continue the previous message (``OSM_LOG_MSG_BOX`` banners such as ``*** HEAVY SWEEP START ***``,
indented ``Method 0x1, Attr 0x20, TID ...`` details). OSM_LOG_SYS messages also go to syslog
(``Mar 11 19:32:26 host OpenSM[1234]: SUBNET UP``), which is parsed too.

Records: :class:`~diagnose.parsers._fabric.SmEvent` per line of interest: ``error`` (``ERR XXXX:``, code kept),
``subnet_up`` (``SUBNET UP``), ``heavy_sweep`` (heavy sweep start / ``Entering heavy sweep``), ``lid_change``
(LID assignment changes), ``port_state_change`` (trap 128 ``Link state change``, ``Received Generic Notice``
num 128/129..131) and ``config_option`` (``Loading Cached Option:<key> = <value>``, osm_subnet.c ``log_config_value``: printed for
every option read at start and, on the rescan of opensm.conf a heavy sweep or SIGHUP triggers, for each option that
changed) and ``other`` for the remaining ERROR- and SYS-level lines (``Entering MASTER state``, ``SM port
is down``). INFO/VERBOSE/DEBUG chatter outside these categories is not emitted. ``timestamp`` is
``"<Mon> <DD> <HH:MM:SS>.<usec>"`` as printed (the log has no year).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import SmEvent
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "opensm_log"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk
MIXABLE = True

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_LINE_RE = re.compile(
    rf"^(?P<ts>{_MON}\s+\d{{1,2}}\s+\d{{2}}:\d{{2}}:\d{{2}})\s+(?P<usec>\d{{6}})\s+\[(?P<tid>[0-9A-Fa-f]+)\]\s+"
    r"(?P<level>0x[0-9a-fA-F]{2})\s+->\s?(?P<msg>.*)$"
)
_SYSLOG_RE = re.compile(
    rf"^(?P<ts>{_MON}\s+\d{{1,2}}\s+\d{{2}}:\d{{2}}:\d{{2}})\s+\S+\s+OpenSM(?:\[\d+\])?:\s+(?P<msg>.*)$"
)
_ERR_RE = re.compile(r"\bERR\s+(?P<code>[0-9A-Fa-f]{4})\s*:")
_BANNER_RE = re.compile(r"^\*+\s*(?P<title>[^*]*?)\s*\*+$")
# osm_lid_mgr.c / osm_ucast_cache.c messages about a port's LID changing
_LID_CHANGE_RE = re.compile(
    r"does not match its known lid|assigned a new lid range|remote lid change|Assigned port 0x[0-9a-fA-F]+, new LID"
    r"|Skipping all lids as we are reassigning them",
    re.IGNORECASE,
)
_NOTICE_RE = re.compile(r"Received Generic Notice type:\s*\d+\s+num:\s*(?P<num>\d+)")

_SNIFF_RE = re.compile(
    rf"^{_MON} [ \d]\d \d{{2}}:\d{{2}}:\d{{2}} \d{{6}} \[[0-9A-Fa-f]+\] 0x[0-9a-fA-F]{{2}} -> ", re.MULTILINE
)
_SNIFF_SYSLOG = re.compile(rf"^{_MON} [ \d]\d \d{{2}}:\d{{2}}:\d{{2}} \S+ OpenSM(?:\[\d+\])?: ", re.MULTILINE)

_LEVELS_KEPT = ("0x01", "0x80")


def sniff(head: str) -> int:
    hits = len(_SNIFF_RE.findall(head))
    if hits >= 2:
        return 95
    if hits == 1:
        return 70
    sys_hits = len(_SNIFF_SYSLOG.findall(head))
    if sys_hits:
        return 60 if sys_hits == 1 else 80
    return 0


@dataclass
class _Event:
    line: int
    text: str
    level: str | None
    timestamp: str
    first: str
    extra: list[str] = field(default_factory=list)


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _classify(message: str, level: str | None) -> tuple[str, str | None] | None:
    m = _ERR_RE.search(message)
    if m:
        return "error", m.group("code").upper()
    up = message.upper()
    if "SUBNET UP" in up:
        return "subnet_up", None
    if "HEAVY SWEEP START" in up or "INITIATING HEAVY SWEEP" in up or "ENTERING HEAVY SWEEP" in up:
        return "heavy_sweep", None
    nm = _NOTICE_RE.search(message)
    if nm and int(nm.group("num")) in (128, 129, 130, 131):
        return "port_state_change", None
    if "LINK STATE CHANGE" in up or "LINK STATE CHANGED" in up or "PORT STATE CHANGE" in up:
        return "port_state_change", None
    if _LID_CHANGE_RE.search(message):
        return "lid_change", None
    if "Loading Cached Option:" in message:  # osm_subnet.c log_config_value: an option read (at start, or changed on
        return "config_option", None  # the rescan a heavy sweep or SIGHUP triggers), to syslog as "OpenSM[pid]:"
    if "binding to port GUID" in message:  # libvendor osm_vendor_bind (INFO): the SM's own port, kept as 'other'
        return "other", None
    if level is None or level.lower() in _LEVELS_KEPT:
        return "other", None
    return None


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    ev: _Event | None = None

    def close() -> None:
        nonlocal ev
        if ev is None:
            return
        parts = [ev.first] + ev.extra
        message = " ".join(p for p in parts if p)
        cls = _classify(message, ev.level)
        prev = records[-1] if records else None
        if cls is not None and cls[0] == "heavy_sweep" and isinstance(prev, SmEvent) and prev.category == "heavy_sweep":
            cls = None  # MLNX OpenSM logs the banner and "Entering heavy sweep ..." for the same sweep
        if cls is not None:
            records.append(
                SmEvent(
                    source=source,
                    line=ev.line,
                    text=clip(ev.text),
                    host=host,
                    level=ev.level,
                    category=cls[0],
                    code=cls[1],
                    message=message if len(message) <= 1000 else message[:999] + "\u2026",
                    timestamp=ev.timestamp,
                )
            )
        ev = None

    for n, line in iter_lines(text):
        m = _LINE_RE.match(line)
        if m:
            close()
            ev = _Event(
                line=n,
                text=line,
                level=m.group("level").lower(),
                timestamp=f"{' '.join(m.group('ts').split())}.{m.group('usec')}",
                first=m.group("msg").strip(),
            )
            continue
        m = _SYSLOG_RE.match(line)
        if m:
            close()
            ev = _Event(line=n, text=line, level=None, timestamp=" ".join(m.group("ts").split()), first=m.group("msg").strip())
            continue
        s = line.strip()
        if ev is None or not s:
            continue
        if set(s) == {"*"}:
            continue
        bm = _BANNER_RE.match(s)
        if bm:
            ev.extra.append(bm.group("title"))
            continue
        if line[:1] in (" ", "\t"):
            ev.extra.append(s)
            continue
        close()  # an unrelated line (other log interleaved) ends the message
    close()
