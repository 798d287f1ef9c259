"""Default ``nvidia-smi`` table: one :class:`~diagnose.parsers._gpu.GpuSummary` per GPU row.

Shape (driver 550; 525 and older print the same cells in narrower columns, 418 has no ``MIG M.`` third line)::

    | NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |
    |-----------------------------------------+------------------------+----------------------+
    | GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
    | Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
    |                                         |                        |               MIG M. |
    |=========================================+========================+======================|
    |   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |                    0 |
    | N/A   27C    P0             72W /  700W |       1MiB /  81559MiB |      0%      Default |
    |                                         |                        |             Disabled |
    +-----------------------------------------+------------------------+----------------------+

A GPU row is a ``|``-separated line whose second cell holds a PCI bus id; the next ``|`` line is its second row.
Any cell reading ``ERR!`` is listed in ``err_fields`` (NVML could not read it). The ``Processes:`` table is ignored.
``NVIDIA-SMI has failed ...`` / ``No devices were found`` lines become ``ToolError`` records.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import GpuSummary, lead_float, lead_int, na, norm_pci, shell_line, smi_error
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "nvidia_smi"
MIXABLE = True  # captured inside job stdout / prolog logs next to NCCL and PyTorch lines

_HEADER_RE = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s*(?P<driver>\S+)(?:\s+CUDA Version:\s*(?P<cuda>[^\s|]+))?"
)
_BUS_RE = re.compile(r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
_ROW1_CELL0_RE = re.compile(r"^\s*(?P<idx>\d+)\s+(?P<name>.*?)\s*(?:\s(?P<pers>On|Off|ERR!|N/A))?\s*$")
_ROW2_CELL0_RE = re.compile(
    r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<pwr>\S+)\s*/\s*(?P<cap>\S+)\s*$"
)
_MEM_RE = re.compile(r"(?P<used>\d+|ERR!|N/A)\s*MiB\s*/\s*(?P<total>\d+|ERR!|N/A)\s*MiB")
_UTIL_RE = re.compile(r"^\s*(?P<util>\d+%|N/A|ERR!)(?:\s+(?P<mode>.*?))?\s*$")

_SNIFF_HEADER = re.compile(r"^\|\s*NVIDIA-SMI\s+\S+\s+Driver Version:", re.MULTILINE)
_SNIFF_COLS = re.compile(r"^\|\s*GPU\s+Name\s+Persistence-M\s*\|\s*Bus-Id\s+Disp\.A\s*\|", re.MULTILINE)
_SNIFF_ROW = re.compile(
    r"^\|\s+\d+\s+\S.*\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s+\S+\s+\|", re.MULTILINE
)
_SNIFF_FAIL = re.compile(
    r"^(?:NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    r"|Unable to determine the device handle for GPU ?[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]: )",
    re.MULTILINE,
)
_TOOLS = ("nvidia-smi",)


def sniff(head: str) -> int:
    header = bool(_SNIFF_HEADER.search(head))
    cols = bool(_SNIFF_COLS.search(head))
    rows = len(_SNIFF_ROW.findall(head))
    if header and (cols or rows):
        return 95
    if header or (cols and rows):
        return 85
    if rows >= 2 and "MiB /" in head:
        return 60
    if _SNIFF_FAIL.search(head):
        return 60
    return 0


def _cells(line: str) -> list[str] | None:
    s = line.strip()
    if not s.startswith("|"):
        return None
    parts = s.split("|")
    # drop the empty strings before the first and after the last '|'
    if parts and parts[0] == "":
        parts = parts[1:]
    if parts and parts[-1].strip() == "":
        parts = parts[:-1]
    return parts


def _err(value: str | None) -> bool:
    return value is not None and "ERR!" in value


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    driver: str | None = None
    cuda: str | None = None
    headers = 0
    in_processes = False
    pending: tuple[int, str, list[str], str | None] | None = None  # (line, raw, cells of row 1, host)
    n_rows = 0

    def emit(p: tuple[int, str, list[str], str | None], row2: list[str] | None) -> None:
        nonlocal n_rows
        line_no, raw, c1, h = p
        m = _ROW1_CELL0_RE.match(c1[0])
        if not m:
            problems.append(f"line {line_no}: unparseable GPU row")
            return
        err: list[str] = []
        name = m.group("name") or None
        if m.group("pers") == "ERR!":
            err.append("persistence")
        bm = _BUS_RE.search(c1[1]) if len(c1) > 1 else None
        if len(c1) > 1 and _err(c1[1]):
            err.append("bus_id" if bm is None else "display_active")
        ecc_cell = c1[2] if len(c1) > 2 else None
        if _err(ecc_cell):
            err.append("ecc")
        temp = power = cap = None
        used = total = util = None
        if row2 is not None:
            r0 = _ROW2_CELL0_RE.match(row2[0]) if row2 else None
            if r0:
                for key, label in (("fan", "fan"), ("temp", "temperature"), ("perf", "perf"), ("pwr", "power"),
                                   ("cap", "power_cap")):
                    if _err(r0.group(key)):
                        err.append(label)
                temp = lead_float(r0.group("temp"))
                power = lead_float(r0.group("pwr"))
                cap = lead_float(r0.group("cap"))
            if len(row2) > 1:
                mm = _MEM_RE.search(row2[1])
                if mm:
                    used, total = lead_int(mm.group("used")), lead_int(mm.group("total"))
                if _err(row2[1]):
                    err.append("memory")
            if len(row2) > 2:
                um = _UTIL_RE.match(row2[2])
                if um:
                    util = lead_int(um.group("util"))
                if _err(row2[2]):
                    err.append("utilization")
        ecc_val = na(ecc_cell)
        records.append(
            GpuSummary(
                source=source,
                line=line_no,
                text=clip(raw),
                host=h,
                index=int(m.group("idx")),
                name=name,
                bus_id=norm_pci(bm.group("bus")) if bm else None,
                temperature_c=temp,
                power_w=power,
                power_cap_w=cap,
                memory_used_mib=used,
                memory_total_mib=total,
                utilization_pct=util,
                driver_version=driver,
                cuda_version=cuda,
                ecc_uncorrected=int(ecc_val) if ecc_val is not None and ecc_val.isdigit() else None,
                err_fields=tuple(err),
            )
        )
        n_rows += 1

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        err_msg = smi_error(line)
        if err_msg is not None:
            if pending is not None:
                emit(pending, None)
                problems.append(f"line {pending[0]}: GPU row without its second line")
                pending = None
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="nvidia-smi",
                                     message=err_msg))
            continue
        if not stripped.startswith(("|", "+")):
            sh = shell_line(line)
            if sh is not None and sh[0]:
                cur_host = sh[0]
            continue
        hm = _HEADER_RE.search(line)
        if hm:
            headers += 1
            driver = hm.group("driver")
            cuda = na(hm.group("cuda"))
            in_processes = False
            continue
        if re.match(r"^\|\s*Processes:", stripped):
            in_processes = True
            continue
        if in_processes:
            continue
        cells = _cells(line)
        if cells is None:
            continue  # '+----' separators
        if pending is not None:
            if len(cells) >= 2 and _BUS_RE.search(cells[1]):
                emit(pending, None)
                problems.append(f"line {pending[0]}: GPU row without its second line")
                pending = None
            else:
                if not cells or cells[0].strip().startswith("=") or set(stripped) <= set("|=+-"):
                    continue
                emit(pending, cells)
                pending = None
                continue
        if len(cells) >= 2 and _BUS_RE.search(cells[1]) and _ROW1_CELL0_RE.match(cells[0]):
            pending = (n, line, cells, cur_host)
    if pending is not None:
        emit(pending, None)
        problems.append(f"truncated: GPU {pending[2][0].split()[0] if pending[2][0].split() else '?'} row ends early")
    if headers and n_rows == 0 and not any(isinstance(r, ToolError) for r in records):
        problems.append("nvidia-smi header without any GPU row")
