"""``mlnx_qos -i <if>`` (MLNX_OFED / mlnx-tools): a RoCE NIC's trust state, DSCP-to-priority map and PFC.

Layout (also printed after a setting such as ``mlnx_qos -i eth4 --trust dscp``)::

    DCBX mode: OS controlled
    Priority trust state: dscp
    dscp2prio mapping:
            prio:0 dscp:07,06,05,04,03,02,01,00,
            prio:3 dscp:31,30,29,28,27,26,25,24,
    Cable len: 7
    PFC configuration:
            priority    0   1   2   3   4   5   6   7
            enabled     0   0   0   1   0   0   0   0
            buffer      0   0   0   1   0   0   0   0
    tc: 0 ratelimit: unlimited, tsa: vendor
             priority:  1

One :class:`~diagnose.parsers._nic.RoceQosConfig` per report (cited at its trust line, else its first line) and a
:class:`~diagnose.parsers._nic.DscpPrio` per DSCP value listed. ``priority:``/``enabled:`` with colons (newer
tools) are read alike. A command line (a prompt, a ``+ mlnx_qos -i eth4`` shell trace, a ``# mlnx_qos`` echo)
names the interface and starts a new report. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._nic import DscpPrio, RoceQosConfig
from diagnose.parsers.base import guarded_parse

FORMAT = "mlnx_qos"

_CMD = re.compile(r"^\s*(?:[+$#>]\s*)?(?:sudo\s+)?(?:\S*/)?mlnx_qos\b(?P<args>.*)$")
_IFACE = re.compile(r"(?:-i|--interface)[=\s]+(?P<i>[\w.\-@]+)")
_DCBX = re.compile(r"^\s*DCBX mode:\s*(?P<v>.+?)\s*$")
_TRUST = re.compile(r"^\s*Priority trust (?:state|mode):\s*(?P<v>\w+)")
_MAP = re.compile(r"^\s*prio:\s*(?P<p>[0-7])\s+dscp:\s*(?P<d>[\d,.\s…]*)$")
# a paste that glued a section's rows to its header ("dscp2prio mapping:  prio:0 dscp:07,...,00   prio:5 dscp:59",
# "PFC configuration:  enabled 0 0 0 0 0 1 0 0"), a '...' where the reporter cut a DSCP list
_MAP_HDR = re.compile(r"^\s*dscp2prio mapping:(?P<rest>.*)$")
_MAP_INLINE = re.compile(r"prio:\s*(?P<p>[0-7])\s+dscp:\s*(?P<d>[\d,.…]*)")
_PFC_HDR = re.compile(r"^\s*PFC configuration:(?P<rest>.*)$")
_PRIO_ROW = re.compile(r"^\s*priority:?\s+((?:[0-7]\s*)+)$")
_EN_ROW = re.compile(r"^\s*enabled:?\s+((?:[01]\s*)+)$")
_TC = re.compile(r"^\s*tc:\s*\d+\s+ratelimit:")

_SNIFF = re.compile(r"^\s*(?:Priority trust state:|PFC configuration:|dscp2prio mapping:|DCBX mode:|"
                    r"tc: \d+ ratelimit:)", re.MULTILINE)


def sniff(head: str) -> int:
    try:
        kinds = {m.group(0).strip().split(":")[0] for m in _SNIFF.finditer(head)}
        if len(kinds) >= 3:
            return 95
        if len(kinds) == 2:
            return 80
        return 0
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, lambda t, s, h, r, p: _parse(t, s, h, r), text, source, host)


class _Report:
    def __init__(self, iface: str | None, host: str | None) -> None:
        self.iface, self.host = iface, host
        self.dcbx: str | None = None
        self.trust: str | None = None
        self.prios: list[int] | None = None
        self.pfc: str | None = None
        self.at: tuple[int, str] | None = None
        self.maps: list[tuple[int, str, int, int]] = []

    def started(self) -> bool:
        return self.at is not None

    def add_map(self, idx: int, raw: str, prio: int, dscps: str) -> None:
        """The DSCP values of one ``prio:N dscp:a,b,...`` entry (a cut ``...`` or stray numbers above 63 skipped)."""
        for d in re.findall(r"\d+", dscps):
            if int(d) < 64:
                self.maps.append((idx, raw, int(d), prio))

    def set_pfc(self, flags_text: str) -> None:
        """The PFC-enabled priorities of an ``enabled 0 0 0 1 ...`` row, by the ``priority`` row read before it."""
        flags = [int(x) for x in flags_text.split()]
        prios = self.prios or list(range(len(flags)))
        self.pfc = ",".join(str(pr) for pr, f in zip(prios, flags, strict=False) if f == 1)


def _parse(text: str, source: str, host: str | None, records: list[Record]) -> None:
    cur_host = host
    rep = _Report(None, cur_host)

    def flush() -> None:
        if not rep.started():
            return
        line, raw = rep.at  # type: ignore[misc]
        records.append(RoceQosConfig(source=source, line=line, text=clip(raw), host=rep.host, interface=rep.iface,
                                     trust=rep.trust, pfc_prios=rep.pfc, dcbx=rep.dcbx))
        for ln, r, d, p in rep.maps:
            records.append(DscpPrio(source=source, line=ln, text=clip(r), host=rep.host, interface=rep.iface,
                                    dscp=d, prio=p))

    for idx, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        p = shell_prompt(line)
        cmd = p[1] if p is not None else None
        m = _CMD.match(cmd if cmd is not None else line)
        if p is not None or (m and line.lstrip()[:1] in "+$#>"):
            if p is not None and p[0] and p[0] not in ("localhost",):
                cur_host = p[0]
            flush()
            im = _IFACE.search(m.group("args")) if m else None
            rep = _Report(im.group("i") if im else None, cur_host)
            continue
        m = _DCBX.match(line)
        if m:
            if rep.started() and (rep.dcbx is not None or rep.trust is not None):
                flush()
                rep = _Report(rep.iface, cur_host)
            rep.dcbx = m.group("v")
            rep.at = rep.at or (idx, raw)
            continue
        m = _TRUST.match(line)
        if m:
            if rep.trust is not None:
                flush()
                rep = _Report(rep.iface, cur_host)
            rep.trust = m.group("v").lower()
            rep.at = (idx, raw)
            continue
        m = _MAP.match(line)
        if m:
            rep.at = rep.at or (idx, raw)
            rep.add_map(idx, raw, int(m.group("p")), m.group("d"))
            continue
        m = _MAP_HDR.match(line)
        if m:
            rep.at = rep.at or (idx, raw)
            for mm in _MAP_INLINE.finditer(m.group("rest")):
                rep.add_map(idx, raw, int(mm.group("p")), mm.group("d"))
            continue
        m = _PFC_HDR.match(line)
        if m:
            rep.at = rep.at or (idx, raw)
            en = _EN_ROW.match(m.group("rest"))
            if en:
                rep.set_pfc(en.group(1))
            continue
        m = _PRIO_ROW.match(line)
        if m and rep.started():
            rep.prios = [int(x) for x in m.group(1).split()]
            continue
        m = _EN_ROW.match(line)
        if m and rep.started():
            rep.set_pfc(m.group(1))
            continue
        if _TC.match(line):
            rep.at = rep.at or (idx, raw)
    flush()
