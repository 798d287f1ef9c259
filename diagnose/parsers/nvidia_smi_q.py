"""``nvidia-smi -q``: one :class:`~diagnose.parsers._gpu.GpuInfo` per ``GPU <bus id>`` block.

Shape (an indented ``Key : Value`` tree, 4 spaces per level; section headers have no colon)::

    ==============NVSMI LOG==============
    Driver Version                            : 535.161.08
    CUDA Version                              : 12.2
    Attached GPUs                             : 8
    GPU 00000000:19:00.0
        Product Name                          : NVIDIA H100 80GB HBM3
        PCI
            GPU Link Info
                PCIe Generation
                    Max                       : 5
                    Current                   : 5
                Link Width
                    Max                       : 16x
                    Current                   : 16x
            Replays Since Reset               : 67
        Clocks Event Reasons                  (``Clocks Throttle Reasons`` before driver 535)
            HW Slowdown                       : Active
                HW Power Brake Slowdown       : Active
        ECC Errors
            Volatile
                SRAM Uncorrectable Parity     : 0   (or ``Double Bit`` > ``Total`` on older drivers/GPUs)
                DRAM Uncorrectable            : 0
        Remapped Rows
            Uncorrectable Error               : 4
            Pending                           : Yes
            Remapping Failure Occurred        : No
        Temperature
            GPU Current Temp                  : 29 C
        Fabric
            State                             : Completed
            Status                            : Success

Matching is on the path of lowercased keys, so spacing/alignment changes between driver versions do not matter.
Active clock-event reasons exclude ``Idle``/``GPU Idle`` and ``Applications Clocks Setting``. ``ecc_uncorrected_volatile``
sums the volatile uncorrectable counters (SRAM parity + SEC-DED + DRAM, or the old ``Double Bit`` total).
A full (unfiltered) GPU block always ends with ``Processes``; a last block without it is reported as truncated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import GpuInfo, lead_float, lead_int, na, norm_pci, shell_line, smi_error, yes_no
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "nvidia_smi_q"
MIXABLE = True  # captured inside job stdout / prolog logs next to NCCL and PyTorch lines

_GPU_RE = re.compile(r"^GPU\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV_RE = re.compile(r"^(?P<key>[^:]*?[^\s:])\s*:(?:\s(?P<val>.*))?$")
_BANNER_RE = re.compile(r"^=+\s*NVSMI LOG\s*=+$")

_SNIFF_BANNER = re.compile(r"^=+NVSMI LOG=+\s*$", re.MULTILINE)
_SNIFF_GPU = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7][ \t]*$", re.MULTILINE)
_SNIFF_KEYS = re.compile(
    r"^[ \t]+(?:Product Name|GPU UUID|Replays Since Reset|Clocks (?:Event|Throttle) Reasons|Remapped Rows"
    r"|Bus Id|Persistence Mode|Performance State|FB Memory Usage|VBIOS Version|Minor Number)\b",
    re.MULTILINE,
)
_THROTTLE_SECTIONS = ("clocks event reasons", "clocks throttle reasons", "clocks_event_reasons",
                      "clocks_throttle_reasons")
_BENIGN_REASONS = ("idle", "gpu idle", "applications clocks setting", "application clocks setting")


def sniff(head: str) -> int:
    banner = bool(_SNIFF_BANNER.search(head))
    gpus = len(_SNIFF_GPU.findall(head))
    keys = len(_SNIFF_KEYS.findall(head))
    if banner and (gpus or keys >= 2):
        return 95
    if gpus and keys >= 2:
        return 85
    if banner:
        return 70
    if keys >= 4:
        return 50
    return 0


@dataclass
class _Block:
    pci: str
    line: int
    text: str
    host: str | None
    values: dict[tuple[str, ...], tuple[int, str]] = field(default_factory=dict)
    throttle: list[str] = field(default_factory=list)
    ecc_parts: list[int] = field(default_factory=list)
    ecc_total: int | None = None
    ecc_seen: bool = False
    has_processes: bool = False
    has_product: bool = False


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _flush(b: _Block, header: dict[str, str], source: str, records: list[Record]) -> None:
    def val(*path: str) -> str | None:
        hit = b.values.get(tuple(p.lower() for p in path))
        return hit[1] if hit else None

    def first(*paths: tuple[str, ...]) -> str | None:
        for p in paths:
            v = val(*p)
            if v is not None:
                return v
        return None

    remap_unc = val("remapped rows", "uncorrectable error")
    ecc: int | None
    if b.ecc_total is not None:
        ecc = b.ecc_total
    elif b.ecc_parts:
        ecc = sum(b.ecc_parts)
    else:
        ecc = None
    records.append(
        GpuInfo(
            source=source,
            line=b.line,
            text=clip(b.text),
            host=b.host,
            pci=b.pci,
            product=na(first(("product name",), ("name",))),
            serial=na(val("serial number")),
            uuid=na(first(("gpu uuid",), ("uuid",))),
            driver_version=na(header.get("driver version")),
            cuda_version=na(header.get("cuda version")),
            pcie_gen_max=lead_int(first(("pci", "gpu link info", "pcie generation", "max"),
                                        ("pci", "gpu link info", "pcie generation", "device max"))),
            pcie_gen_current=lead_int(first(("pci", "gpu link info", "pcie generation", "current"),
                                            ("pci", "gpu link info", "pcie generation", "device current"))),
            pcie_width_max=lead_int(val("pci", "gpu link info", "link width", "max")),
            pcie_width_current=lead_int(val("pci", "gpu link info", "link width", "current")),
            replays=lead_int(first(("pci", "replays since reset"), ("pci", "replays"))),
            throttle_active=tuple(b.throttle),
            ecc_uncorrected_volatile=ecc,
            remap_pending=yes_no(val("remapped rows", "pending")),
            remap_failure=yes_no(val("remapped rows", "remapping failure occurred")),
            remap_uncorrectable=lead_int(remap_unc),
            fabric_state=na(val("fabric", "state")),
            fabric_status=na(val("fabric", "status")),
            temperature_c=lead_float(first(("temperature", "gpu current temp"), ("temperature", "gpu temp"))),
        )
    )


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    header: dict[str, str] = {}
    block: _Block | None = None
    stack: list[tuple[int, str]] = []  # (indent, lowercased section name) inside the current GPU block
    blocks = 0
    banner = False

    def close() -> None:
        nonlocal block
        if block is not None:
            _flush(block, header, source, records)
        block = None

    for n, raw in iter_lines(text):
        line = raw.rstrip()
        if not line.strip():
            continue
        err = smi_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(raw), host=cur_host, tool="nvidia-smi",
                                     message=err))
            continue
        stripped = line.strip()
        if _BANNER_RE.match(stripped):
            close()
            header = {}
            banner = True
            continue
        gm = _GPU_RE.match(stripped) if line == stripped else None
        if gm:
            close()
            pci = norm_pci(gm.group("bus"))
            block = _Block(pci=pci or gm.group("bus"), line=n, text=raw, host=cur_host)
            stack = []
            blocks += 1
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        if indent == 0:
            sh = shell_line(line)
            if sh is not None:
                close()
                if sh[0]:
                    cur_host = sh[0]
                continue
            km = _KV_RE.match(stripped)
            if km and block is None:
                header[km.group("key").strip().lower()] = (km.group("val") or "").strip()
            elif stripped in ("...", "[...]"):
                continue
            elif block is not None and not km:
                close()  # unindented non-tree text ends the block
            continue
        if block is None:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        km = _KV_RE.match(stripped)
        if not km:
            stack.append((indent, stripped.lower()))
            continue
        key = km.group("key").strip().lower()
        value = (km.group("val") or "").strip()
        path = tuple(s for _, s in stack) + (key,)
        block.values.setdefault(path, (n, value))
        if len(path) == 1 and key in ("product name", "name"):
            block.has_product = True
        if len(path) == 1 and key == "processes":
            block.has_processes = True
        if path[0] == "processes":
            block.has_processes = True
        if path[0] in _THROTTLE_SECTIONS and len(path) >= 2:
            if value.lower() == "active" and key not in _BENIGN_REASONS:
                name = km.group("key").strip()
                if name not in block.throttle:
                    block.throttle.append(name)
        if len(path) >= 3 and path[0] in ("ecc errors",) and path[1] == "volatile":
            v = lead_int(value)
            if len(path) == 3 and "uncorrectable" in key:
                block.ecc_seen = True
                if v is not None:
                    block.ecc_parts.append(v)
            elif len(path) == 4 and path[2] == "double bit" and key == "total":
                block.ecc_seen = True
                block.ecc_total = v
        # a `Processes` section header (no colon) also counts
    # end of text
    if block is not None:
        if block.has_product and not block.has_processes and not _last_is_processes(block):
            problems.append(f"truncated: GPU {block.pci} block ends early (no Processes section)")
        close()
    if banner and blocks == 0 and not any(isinstance(r, ToolError) for r in records):
        problems.append("nvidia-smi -q header without any GPU block")


def _last_is_processes(b: _Block) -> bool:
    return any(p and p[0] == "processes" for p in b.values)
