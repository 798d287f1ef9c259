"""Kernel log parser: ``dmesg`` (raw, ``-T``, ``--time-format iso``, ``--decode``), ``journalctl -k`` and
syslog/``/var/log/messages`` files (``Mon DD HH:MM:SS <host> kernel: ...``), optionally behind a ``pdsh``
``<host>: `` prefix.

It keeps what matters for GPU-cluster networking:

* ``NVRM: Xid (PCI:<dom:bus:dev>): <xid>, pid=<pid>, name=<proc>, <detail>`` -> :class:`XidEvent`
* ``NVRM: GPU at PCI:<addr>: GPU-<uuid>`` (+ the following ``GPU Board Serial Number``) -> :class:`GpuIdentity`
* ``mlx5_core <bdf>[ <netdev>]: [<func>:<line>:(pid N): ]<msg>`` -> :class:`Mlx5Event`
* ``nvidia-peermem`` / ``nvidia_peermem`` / ``nv_peer_mem`` lines -> :class:`PeermemEvent`
* IB / netdev carrier changes, PCIe AER, OOM kills, segfaults, GPU fallen off the bus -> :class:`KernelEvent`

The line prefix varies (timestamps, facility/level decode, syslog host); the message body is matched after
the prefix is peeled off. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from diagnose.models.records import ParseResult, Record, clip, positional_maker
from diagnose.parsers.base import guarded_parse

FORMAT = "dmesg"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk

# ----------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True, kw_only=True)
class XidEvent(Record):
    """An NVIDIA Xid error reported by the GPU driver."""

    pci: str
    xid: int
    pid: int | None
    process: str | None
    detail: str
    timestamp: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Mlx5Event(Record):
    """A ``mlx5_core`` (ConnectX) driver message keyed by PCI BDF."""

    bdf: str
    netdev: str | None
    category: str
    message: str
    timestamp: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PeermemEvent(Record):
    """A GPUDirect RDMA peer-memory module message (nvidia-peermem / nv_peer_mem)."""

    category: str
    message: str
    timestamp: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuIdentity(Record):
    """Ties a GPU PCI address to its UUID / board serial number."""

    pci: str
    uuid: str | None
    serial: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelEvent(Record):
    """Another kernel line relevant to the communication stack."""

    category: str
    device: str | None
    message: str
    timestamp: str | None


MLX5_CATEGORIES = (
    "link_down",
    "link_up",
    "cmd_timeout",
    "health",
    "fw_error",
    "pcie_power",
    "pcie_bandwidth",
    "module_event",
    "other",
)
KERNEL_CATEGORIES = ("ib_link", "netdev_link", "pcie_aer", "iommu_fault", "oom", "other")
# IOMMU translation faults (Intel DMAR, AMD-Vi, Arm SMMU): P2P/GDR traffic blocked by the IOMMU
_IOMMU_RE = re.compile(
    r"DMAR: \[DMA (?:Read|Write)|DMAR: DRHD: handling fault|AMD-Vi: Event logged \[IO_PAGE_FAULT"
    r"|IO_PAGE_FAULT|arm-smmu(?:-v3)?.*(?:event|fault)|iommu fault", re.I)
_IOMMU_DEV_RE = re.compile(r"(?:Request device \[|device=|^\S+ )(?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]|[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])", re.I)
PEERMEM_CATEGORIES = ("error", "loaded", "other")

# ----------------------------------------------------------------------------------------------------------------
# Line prefixes

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"

# pdsh / clush style "<host>: " in front of a bracketed dmesg timestamp.
_PDSH_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,62}): (?=\[)")
# syslog / journalctl: "Mar  3 12:00:00 node017 kernel: " or "2024-06-24T07:18:32+0000 node017 kernel: ".
_SYSLOG_RE = re.compile(
    r"^(?P<ts>" + _MON + r" [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?|" + _ISO + r")"
    r" (?P<host>[^\s:\[\]]+) (?P<ident>[^\s:\[]+)(?:\[\d+\])?:(?: |$)"
)
# dmesg --decode / -x: "kern  :warn  : ".
_DECODE_RE = re.compile(
    r"^(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
    r"(?:emerg|alert|crit|err|warn|notice|info|debug)\s*: ?"
)
# "[ 1234.567890] " (raw), "[Sun Feb 23 16:24:18 2025] " (-T), "[  +0.000123] " (delta).
_BRACKET_TS_RE = re.compile(
    r"^\[(?P<ts>\s*[+]?\d{1,10}\.\d{1,9}|" + _DOW + r" " + _MON + r" [ \d]\d \d\d:\d\d:\d\d \d{4})\] ?"
)
_ISO_TS_RE = re.compile(r"^(?P<ts>" + _ISO + r") ")
# "<6>[ 1234.5678] " printk level prefix (dmesg -r).
_PRINTK_LEVEL_RE = re.compile(r"^<\d>")


# What _peel finds in a raw line: (message body, timestamp, host, kernel) where ``kernel`` is False for a syslog
# line from another program (skipped). A plain tuple: the parser peels every line of every host's log.
_Line = tuple[str, str | None, str | None, bool]


def _peel(raw: str) -> _Line:
    s = raw.rstrip("\r\n")
    if s.startswith("["):  # plain dmesg: no other prefix (nor an ISO time) starts with "[", only a bracketed time
        m = _BRACKET_TS_RE.match(s)
        return (s[m.end() :].strip(), m.group("ts").strip(), None, True) if m else (s.strip(), None, None, True)
    host: str | None = None
    ts: str | None = None
    kernel = True
    m = _PDSH_RE.match(s)
    if m:
        host = m.group(1)
        s = s[m.end() :]
    m = _SYSLOG_RE.match(s)
    if m:
        ts = m.group("ts")
        host = m.group("host")
        kernel = m.group("ident") == "kernel"
        s = s[m.end() :]
    m = _PRINTK_LEVEL_RE.match(s)
    if m:
        s = s[m.end() :]
    m = _DECODE_RE.match(s)
    if m:
        s = s[m.end() :]
    m = _BRACKET_TS_RE.match(s)
    if m:
        if ts is None:
            ts = m.group("ts").strip()
        s = s[m.end() :]
    else:
        m = _ISO_TS_RE.match(s)
        if m:
            if ts is None:
                ts = m.group("ts")
            s = s[m.end() :]
    return s.strip(), ts, host, kernel


# ----------------------------------------------------------------------------------------------------------------
# Message patterns

_PCI = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

_XID_START_RE = re.compile(r"NVRM: Xid\b")
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>" + _PCI + r")[^)]{0,40}\): (?P<xid>\d{1,6})(?P<rest>.*)$"
)
_XID_PID_RE = re.compile(r"^,\s*pid=(?P<pid>'?<unknown>'?|'?\d{1,10}'?|[^,\s]*)")
_XID_NAME_RE = re.compile(r"^,\s*name=(?P<name>[^,]*)")
_GPU_AT_RE = re.compile(r"NVRM: GPU at PCI:(?P<pci>" + _PCI + r"): (?P<rest>.*)$")
_UUID_RE = re.compile(r"^(GPU-[0-9a-fA-F-]{8,})")
_SERIAL_RE = re.compile(r"NVRM: GPU Board Serial Number: (?P<serial>\S+)")
_NVRM_GPU_BDF_RE = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?P<pci>" + _PCI + r")\b")
_FALLEN_RE = re.compile(r"fallen off the bus", re.IGNORECASE)
_NVRM_FATAL_RE = re.compile(r"NVRM: (?P<msg>(?:RmInitAdapter failed|rm_init_adapter failed|GPU is lost).*)")

_MLX5_RE = re.compile(
    r"\b(?P<drv>mlx5_core|mlx5_ib)\s+(?P<bdf>" + _BDF + r")(?:\s+(?P<netdev>[^\s:]+))?:\s?(?P<msg>.*)$"
)
_FUNC_PREFIX_RE = re.compile(r"^[A-Za-z_][\w]*:\d+:\(pid \d+\):\s*")

_PEERMEM_RE = re.compile(r"\b(?P<mod>nvidia[-_]peermem|nv_peer_mem)\b:?\s*(?P<msg>.*)$")
_PEERMEM_ERROR_RE = re.compile(
    r"\b(?:ERROR|error|failed|fail|Unknown symbol|invalid|disagrees|unable|cannot|can't)\b", re.IGNORECASE
)
_PEERMEM_LOADED_RE = re.compile(r"\b(?:loaded|loading|registered|initiali[sz]ed|init)\b", re.IGNORECASE)

_AER_RE = re.compile(
    r"\bAER:|PCIe Bus Error|error status/mask=|: +\[ ?\d{1,2}\] (?:RxErr|BadTLP|BadDLLP|Rollover|Timeout|"
    r"NonFatalErr|CorrIntErr|HeaderOF|Undefined|DLP|SDES|TLP|FCP|CmpltTO|CmpltAbrt|UnxCmplt|RxOF|MalfTLP|ECRC|"
    r"UnsupReq|ACSViol|UncorrIntErr|BlockedTLP|AtomicOpBlocked|TLPBlockedErr)\b"
)
_AER_SRC_RE = re.compile(r"error received:\s*(?:id=)?(?P<bdf>" + _BDF + r")")
_LEADING_DEV_RE = re.compile(r"^(?:[\w-]+ )?(?P<bdf>" + _BDF + r"):")
_IB_DEV_RE = re.compile(r"^infiniband (?P<dev>\S+?):\s*(?P<msg>.*)$")
_CARRIER_RE = re.compile(
    r"^(?:IPv6: )?(?:ADDRCONF\(NETDEV_\w+\): )?(?P<dev>[\w.@-]+): "
    r"(?P<msg>(?:lost carrier|gained carrier|carrier (?:lost|on|off|acquired)|"
    r"link (?:becomes ready|is not ready)|Link is (?:Down|Up)\b.*|NIC Link is (?:Down|Up)\b.*))$"
)
_NIC_LINK_RE = re.compile(r"(?<![\w.@-])(?P<dev>[\w.@-]+): (?P<msg>(?:NIC )?Link is (?:Down|Up)\b.*)$")  # from a name's start: linear
_BOND_RE = re.compile(r"^(?P<dev>bond\w*): (?P<msg>.*link status (?:definitely )?(?:down|up).*)$")
_NETDEV_WATCHDOG_RE = re.compile(
    r"NETDEV WATCHDOG: (?P<dev>[\w.@-]+)\b.*(?P<msg>transmit queue \d+ timed out.*)$"
)
_OOM_RE = re.compile(r"Out of memory|invoked oom-killer|Memory cgroup out of memory")
_SEGFAULT_RE = re.compile(r"^(?P<dev>[^\s\[]+)\[\d+\]: segfault at ")


def _mlx5_category(msg: str) -> str:
    m = msg
    low = m.lower()
    if re.search(r"\bLink (?:down|DOWN)\b|Port: ?\d+ Link DOWN", m) or "link down" in low:
        return "link_down"
    if re.search(r"\bLink (?:up|UP|ACTIVE)\b|Port: ?\d+ Link ACTIVE", m) or "link up" in low:
        return "link_up"
    if "port module event" in low:
        return "module_event"
    if (
        "will cause a leak of a command resource" in low
        or "no done completion" in low
        or "out of queue timeout" in low
        or re.search(r"\bcmd\[\d+\].*timeout|\(0x[0-9a-f]+\) (?:async, )?timeout", low)
    ):
        return "cmd_timeout"
    if (
        "health" in low
        or re.search(
            r"\bfatal error\b|\bassert_(?:var|exit_ptr|callra)\b|\b(?:ext_)?synd 0x|irisc_index", low
        )
        or "mlx5_enter_error_state" in low
        or "internal error" in low
    ):
        return "health"
    if "insufficient power" in low or "power budget" in low or "pcie slot power" in low:
        return "pcie_power"
    if "pcie bandwidth" in low:
        return "pcie_bandwidth"
    if (
        re.search(r"\b(?:fw|firmware)\b.*\b(?:error|fail(?:ed|ure)?|timeout|syndrome)\b", low)
        or "mlx5_cmd_check" in low
        or "mlx5_cmd_out_err" in low
        or re.search(r"failed, status .*\(0x[0-9a-f]+\)", low)
    ):
        return "fw_error"
    return "other"


def _peermem_category(msg: str) -> str:
    if _PEERMEM_ERROR_RE.search(msg):
        return "error"
    if _PEERMEM_LOADED_RE.search(msg):
        return "loaded"
    return "other"


def _safe_int(s: str | None) -> int | None:
    if s is None:
        return None
    s = s.strip().strip("'\"")
    if not s.isdigit() or len(s) > 18:
        return None
    try:
        return int(s)
    except ValueError:
        return None


def _parse_xid(body: str) -> tuple[str, int, int | None, str | None, str] | None:
    m = _XID_RE.search(body)
    if not m:
        return None
    xid = _safe_int(m.group("xid"))
    if xid is None:
        return None
    rest = m.group("rest")
    pid: int | None = None
    process: str | None = None
    pm = _XID_PID_RE.match(rest)
    if pm:
        pid = _safe_int(pm.group("pid"))
        rest = rest[pm.end() :]
        nm = _XID_NAME_RE.match(rest)
        if nm:
            name = nm.group("name").strip()
            process = None if name in ("", "<unknown>", "'<unknown>'") else name
            rest = rest[nm.end() :]
    else:
        nm = _XID_NAME_RE.match(rest)
        if nm:
            name = nm.group("name").strip()
            process = None if name in ("", "<unknown>", "'<unknown>'") else name
            rest = rest[nm.end() :]
    detail = rest.lstrip(",").strip()
    return m.group("pci"), xid, pid, process, detail


# ----------------------------------------------------------------------------------------------------------------
# Sniff

_SNIFF_STRONG = (
    r"NVRM: (?:Xid|GPU at PCI)|\bmlx5_core \d{4}:[0-9a-f]{2}:|nvidia[-_]peermem|nv_peer_mem|"
    r"\bAER: |PCIe Bus Error|: lost carrier|invoked oom-killer"
)
# Each alternative starts with one of these characters: looking at it first spares trying all eight at every
# position of a line that holds none (a third of the cost of sniffing a host's kernel log).
_SNIFF_STRONG_RE = re.compile(r"(?=[NmnAP:i])(?:" + _SNIFF_STRONG + ")")
# A kernel message body starts with a subsystem tag ("NVRM: ", "mlx5_core <bdf>: ", "<driver> <bdf>: ").
_SNIFF_BODY_START_RE = re.compile(
    r"(?:NVRM: |mlx5_core \d{4}:|mlx5_ib |nvidia[-_]peermem|nv_peer_mem|infiniband \w+: |"
    r"[\w-]+ [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: |ib\w*: (?:lost|gained) carrier)"
)
_SNIFF_PREFIX_RE = re.compile(
    r"^(?:\[\s*\d{1,10}\.\d{3,9}\] |\[" + _DOW + r" " + _MON + r" [ \d]\d \d\d:\d\d:\d\d \d{4}\] |"
    r"(?:kern|user|daemon|syslog)\s*:\w+\s*: |"
    + _MON
    + r" [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ kernel: |"
    + _ISO
    + r" \S+ kernel: |"
    + _ISO
    + r" (?:NVRM|mlx5_|nvidia|pcieport|ib\d|infiniband)|"
    r"[A-Za-z0-9][\w.-]*: \[\s*\d{1,10}\.\d{3,9}\] )",
    re.MULTILINE,
)
_SNIFF_NEG_RE = re.compile(r" NCCL (?:INFO|WARN|TRACE|CALL)\b|ProcessGroupNCCL|Watchdog caught")
_SNIFF_NEG_WORDS = (" NCCL ", "ProcessGroupNCCL", "Watchdog caught")  # one is in every line _SNIFF_NEG_RE finds


def sniff(head: str) -> int:
    try:
        lines = [ln for ln in head.split("\n") if ln.strip()]
        if not lines:
            return 0
        n = len(lines)
        # the negative lines first (one scan of the head finds there are none): unless they veto, three strong
        # lines settle the score, whatever the rest of the head holds
        neg = sum(1 for ln in lines if _SNIFF_NEG_RE.search(ln)) if any(w in head for w in _SNIFF_NEG_WORDS) else 0
        vetoed = neg * 3 >= n
        prefixed = strong = 0
        for ln in lines:
            is_prefixed = _SNIFF_PREFIX_RE.match(ln) is not None
            if is_prefixed:
                prefixed += 1
            if _SNIFF_STRONG_RE.search(ln) and (is_prefixed or _SNIFF_BODY_START_RE.match(_peel(ln)[0])):
                strong += 1
                if strong >= 3 and not vetoed:
                    return 95  # above any score the share of prefixed lines gives
        if vetoed:
            return min(20, 5 * strong)
        score = 0
        frac = prefixed / n
        if frac >= 0.5 and prefixed >= 2:
            score = 80 if frac < 0.8 else 90
        elif frac >= 0.2 and prefixed >= 3:
            score = 55
        if strong:
            hit_score = 95 if strong >= 3 else 60 + 10 * strong
            if prefixed == 0 and strong < 3:
                hit_score = 45
            score = max(score, hit_score)
        return max(0, min(100, score))
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------------------
# Parse


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse_into, text, source, host)


def _parse_into(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    raw_lines = text.split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    # pending "GPU at PCI" identity waiting for its serial number line: (line_no, raw, pci, uuid, host)
    pending_id: tuple[int, str, str, str | None, str | None] | None = None
    last_gpu_bdf: tuple[int, str] | None = None  # ("The NVIDIA GPU <bdf>" seen at line n) for fallen-off-bus

    def flush_identity(serial: str | None = None) -> None:
        nonlocal pending_id
        if pending_id is None:
            return
        ln, raw, pci, uuid, h = pending_id
        records.append(
            GpuIdentity(source=source, line=ln, text=clip(raw), host=h, pci=pci, uuid=uuid, serial=serial)
        )
        pending_id = None

    for idx, raw in enumerate(raw_lines):
        line_no = idx + 1
        body, ts, h, kernel = _peel(raw)
        if not kernel or not body:
            continue
        h = h or host

        if "NVRM:" in body:
            if pending_id is not None:
                sm = _SERIAL_RE.search(body)
                if sm:
                    flush_identity(sm.group("serial"))
                    continue
                flush_identity()
            if _XID_START_RE.search(body):
                parsed = _parse_xid(body)
                if parsed is None:
                    problems.append(f"line {line_no}: unparseable or truncated Xid line: {clip(raw)[:120]}")
                    continue
                pci, xid, pid, process, detail = parsed
                if not detail:
                    problems.append(f"line {line_no}: Xid {xid} line has no detail (truncated?)")
                records.append(
                    XidEvent(
                        source=source,
                        line=line_no,
                        text=clip(raw),
                        host=h,
                        pci=pci,
                        xid=xid,
                        pid=pid,
                        process=process,
                        detail=detail,
                        timestamp=ts,
                    )
                )
                continue
            gm = _GPU_AT_RE.search(body)
            if gm:
                um = _UUID_RE.match(gm.group("rest").strip())
                if um:
                    pending_id = (line_no, raw, gm.group("pci"), um.group(1), h)
                    continue
                rest = gm.group("rest").strip()
                if _FALLEN_RE.search(rest):
                    records.append(
                        KernelEvent(
                            source=source,
                            line=line_no,
                            text=clip(raw),
                            host=h,
                            category="other",
                            device=gm.group("pci"),
                            message=rest,
                            timestamp=ts,
                        )
                    )
                continue
            bm = _NVRM_GPU_BDF_RE.search(body)
            if bm:
                last_gpu_bdf = (line_no, bm.group("pci"))
            if _FALLEN_RE.search(body):
                dev = None
                if bm:
                    dev = bm.group("pci")
                elif last_gpu_bdf is not None and line_no - last_gpu_bdf[0] <= 3:
                    dev = last_gpu_bdf[1]
                records.append(
                    KernelEvent(
                        source=source,
                        line=line_no,
                        text=clip(raw),
                        host=h,
                        category="other",
                        device=dev,
                        message=body,
                        timestamp=ts,
                    )
                )
                continue
            fm = _NVRM_FATAL_RE.search(body)
            if fm:
                records.append(
                    KernelEvent(
                        source=source,
                        line=line_no,
                        text=clip(raw),
                        host=h,
                        category="other",
                        device=None,
                        message=fm.group("msg").strip(),
                        timestamp=ts,
                    )
                )
            continue
        if pending_id is not None:
            flush_identity()

        hit = _message(body) if len(body) <= _MEMO_CHARS else _message_of(body)
        if hit is not None:
            cls, values = hit
            records.append(_MAKE[cls](source, line_no, clip(raw), h, *values, ts))
    if pending_id is not None:
        flush_identity()


_Message = tuple[type[Record], tuple[object, ...]]
_MEMO_CHARS = 512  # longer bodies are not memoised (bounded memory)
# The records a kernel message outside the NVRM block makes, built positionally (source, line, text, host, the
# message's values, timestamp: each class's fields in order): a 4,096-host bundle's logs make tens of thousands.
_MAKE: dict[type[Record], Callable[..., Record]] = {
    cls: positional_maker(cls) for cls in (KernelEvent, Mlx5Event, PeermemEvent)
}


def _message_of(body: str) -> _Message | None:
    """The record a kernel message outside the NVRM block stands for, as (record class, the values of its fields
    between host and timestamp, in order); None for a message that matters to none of them. A pure function of
    the message body: the line prefix (timestamp, host) was peeled off."""
    # AER and IOMMU lines are checked first: drivers (mlx5_core, nvidia) print them under their own prefix
    if _AER_RE.search(body) or _IOMMU_RE.search(body):
        ev = _kernel_event(body)
        if ev is not None:
            return KernelEvent, ev  # (category, device, message)

    mm = _MLX5_RE.search(body)
    if mm:
        msg = _FUNC_PREFIX_RE.sub("", mm.group("msg").strip())
        return Mlx5Event, (mm.group("bdf").lower(), mm.group("netdev"), _mlx5_category(msg), msg)

    pm = _PEERMEM_RE.search(body)
    if pm and not body.startswith("Modules linked in"):
        msg = pm.group("msg").strip() or body
        return PeermemEvent, (_peermem_category(msg), msg)

    ev = _kernel_event(body)
    if ev is not None:
        return KernelEvent, ev
    return None


# A cluster's kernel logs repeat the same messages host after host (firmware versions, module events, link
# changes, with only the timestamp differing): each distinct message is classified once per run.
_message = lru_cache(maxsize=4096)(_message_of)


def _kernel_event(body: str) -> tuple[str, str | None, str] | None:
    if _IOMMU_RE.search(body):
        m = _IOMMU_DEV_RE.search(body)
        return "iommu_fault", m.group("bdf") if m else None, body
    if _AER_RE.search(body):
        m = _AER_SRC_RE.search(body)
        dev = m.group("bdf") if m else None
        if dev is None:
            lm = _LEADING_DEV_RE.match(body)
            dev = lm.group("bdf") if lm else None
        return "pcie_aer", dev, body
    m = _IB_DEV_RE.match(body)
    if m:
        return "ib_link", m.group("dev"), m.group("msg").strip() or body
    m = _CARRIER_RE.match(body)
    if m:
        dev = m.group("dev")
        cat = "ib_link" if re.match(r"ib", dev) else "netdev_link"
        return cat, dev, m.group("msg")
    m = _BOND_RE.match(body)
    if m:
        return "netdev_link", m.group("dev"), m.group("msg")
    m = _NIC_LINK_RE.search(body)
    if m:
        dev = m.group("dev")
        cat = "ib_link" if re.match(r"ib", dev) else "netdev_link"
        return cat, dev, m.group("msg")
    m = _NETDEV_WATCHDOG_RE.search(body)
    if m:
        return "netdev_link", m.group("dev"), body
    if _OOM_RE.search(body):
        return "oom", None, body
    m = _SEGFAULT_RE.match(body)
    if m:
        return "other", m.group("dev"), body
    return None
