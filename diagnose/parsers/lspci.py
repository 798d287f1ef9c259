"""``lspci -vvv`` (pciutils): per-device PCIe link capability vs status, ACS control, MaxReadReq.

Shape (pciutils ``ls-caps.c``; real sample: leptonai/gpud ``pkg/pci/testdata/lspci-vvv``)::

    1a:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]
    <tab>Subsystem: ...
    <tab>Capabilities: [60] Express (v2) Endpoint, MSI 00
    <tab><tab>DevCtl:<tab>CorrErr+ NonFatalErr+ FatalErr+ UnsupReq+
    <tab><tab><tab>MaxPayload 256 bytes, MaxReadReq 4096 bytes
    <tab><tab>LnkCap:<tab>Port #0, Speed 32GT/s, Width x16, ASPM not supported
    <tab><tab>LnkSta:<tab>Speed 16GT/s (downgraded), Width x16 (ok)
    <tab>Capabilities: [170 v1] Access Control Services
    <tab><tab>ACSCtl:<tab>SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-

One :class:`~diagnose.parsers._host.PcieLink` per device header (also for plain ``lspci`` / ``-nn`` lines,
with the capability fields None); ``-nn`` class codes (``Infiniband controller [0207]``) are dropped from
``device_class``; ``-D`` domains are kept, missing ones become ``0000``. Older lspci prints ``LnkSta: Speed
8GT/s, Width x16`` without ``(ok)``/``(downgraded)``; then ``downgraded`` compares status with capability.
``Capabilities: <access denied>`` (lspci run without root) is reported once as a problem. A last device with
``LnkCap`` but no ``LnkSta`` is reported as truncated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import AcsControl, PcieLink, norm_bdf, shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "lspci"

_HDR_RE = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[0-9A-Za-z][^:\[]*?)(?:\s*\[[0-9a-fA-F]{4}\])?:\s+(?P<name>\S.*?)\s*$"
)
_SPEED_RE = re.compile(r"Speed\s+(?P<speed>[\d.]+|unknown)\s*GT/s(?:\s*\((?P<snote>[^)]*)\))?", re.IGNORECASE)
_SPEED_UNKNOWN_RE = re.compile(r"Speed\s+unknown", re.IGNORECASE)
_WIDTH_RE = re.compile(r"Width\s+x(?P<width>\d+)(?:\s*\((?P<wnote>[^)]*)\))?")
_MRR_RE = re.compile(r"MaxReadReq\s+(?P<mrr>\d+)\s+bytes")
_FIELD_RE = re.compile(r"^\s+(?P<key>LnkCap|LnkSta|ACSCtl|DevCtl):\s*(?P<val>.*)$")
_GREP_ACS_RE = re.compile(r"^\s*ACSCtl:\s*(?P<val>\S.*)$")  # `lspci -vvv | grep ACSCtl`: no device header

_SNIFF_HDR = re.compile(
    r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [0-9A-Za-z][^:\n]*: \S", re.MULTILINE
)
_SNIFF_CAP = re.compile(
    r"^\t+(?:LnkCap|LnkSta|Capabilities: \[|Kernel driver in use:|Subsystem:|Control: I/O|DevCap:)", re.MULTILINE
)


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    hdrs = len(_SNIFF_HDR.findall(head))
    if not hdrs:
        acs = sum(1 for ln in head.split("\n") if _GREP_ACS_RE.match(ln))
        return 80 if acs >= 2 and acs * 2 >= sum(1 for ln in head.split("\n") if ln.strip()) else 0
    caps = len(_SNIFF_CAP.findall(head))
    if caps >= 2:
        return 95
    lines = sum(1 for ln in head.split("\n") if ln.strip())
    if hdrs >= 3 and hdrs * 2 >= lines:
        return 85  # plain `lspci` / `lspci -nn`
    if hdrs >= 1 and hdrs * 2 >= lines:
        return 50
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


@dataclass
class _Dev:
    line: int
    text: str
    host: str | None
    bdf: str
    cls: str
    name: str
    fields: dict[str, str] = field(default_factory=dict)
    mrr: int | None = None
    denied: bool = False


def _speed(val: str) -> tuple[float | None, str | None]:
    m = _SPEED_RE.search(val)
    if not m or m.group("speed").lower() == "unknown":
        return None, (m.group("snote") if m else None)
    try:
        return float(m.group("speed")), m.group("snote")
    except ValueError:
        return None, m.group("snote")


def _width(val: str) -> tuple[int | None, str | None]:
    m = _WIDTH_RE.search(val)
    if not m:
        return None, None
    return int(m.group("width")), m.group("wnote")


def _acs_on(val: str) -> tuple[str, ...]:
    return tuple(f[:-1] for f in val.split() if f.endswith("+") and len(f) > 1)


def _build(d: _Dev, source: str) -> PcieLink:
    cap = d.fields.get("LnkCap", "")
    sta = d.fields.get("LnkSta", "")
    cap_speed, _ = _speed(cap)
    cap_width, _ = _width(cap)
    sta_speed, snote = _speed(sta)
    sta_width, wnote = _width(sta)
    downgraded = any(note and "downgraded" in note.lower() for note in (snote, wnote))
    if cap_speed is not None and sta_speed is not None and sta_speed < cap_speed:
        downgraded = True
    if cap_width is not None and sta_width is not None and 0 < sta_width < cap_width:
        downgraded = True
    acs = _acs_on(d.fields.get("ACSCtl", ""))
    return PcieLink(
        source=source,
        line=d.line,
        text=clip(d.text),
        host=d.host,
        bdf=d.bdf,
        device_class=d.cls,
        name=d.name,
        cap_speed_gts=cap_speed,
        cap_width=cap_width,
        sta_speed_gts=sta_speed,
        sta_width=sta_width,
        downgraded=downgraded,
        acs_enabled=acs,
        max_read_req=d.mrr,
    )


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    dev: _Dev | None = None
    devs: list[_Dev] = []
    in_devctl = False
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        m = _HDR_RE.match(line)
        if m:
            bdf = norm_bdf(m.group("bdf"))
            if bdf is not None:
                dev = _Dev(
                    line=n,
                    text=line,
                    host=cur_host,
                    bdf=bdf,
                    cls=m.group("cls").strip(),
                    name=m.group("name"),
                )
                devs.append(dev)
                in_devctl = False
                continue
        g = _GREP_ACS_RE.match(line) if dev is None or line[:1] not in ("\t", " ") else None
        if g:
            dev = None
            records.append(AcsControl(source=source, line=n, text=clip(line), host=cur_host,
                                      enabled=_acs_on(g.group("val"))))
            continue
        if line[:1] not in ("\t", " "):
            p = shell_prompt(line)
            if p is not None and p[0]:
                cur_host = p[0]
            dev = None
            continue
        if dev is None:
            continue
        f = _FIELD_RE.match(line)
        if f:
            key = f.group("key")
            dev.fields.setdefault(key, f.group("val"))
            in_devctl = key == "DevCtl"
        elif re.match(r"^\s+[A-Z][\w ]*:", line) and not re.match(r"^\t\t\t", line):
            in_devctl = False  # another field starts; DevCtl continuation lines are deeper
        if "<access denied>" in line:
            dev.denied = True
        if dev.mrr is None and (in_devctl or "DevCtl" in line):
            mm = _MRR_RE.search(line)
            if mm:
                dev.mrr = int(mm.group("mrr"))
    for d in devs:
        records.append(_build(d, source))
    denied = [d.bdf for d in devs if d.denied]
    if denied:
        problems.append(
            f"capabilities not readable for {len(denied)} device(s) (lspci run without root), e.g. {denied[0]}"
        )
    if devs and "LnkCap" in devs[-1].fields and "LnkSta" not in devs[-1].fields:
        problems.append(f"truncated: block for {devs[-1].bdf} ends early (LnkCap without LnkSta)")
