"""``nvidia-smi nvlink -s`` (link speeds) and ``nvidia-smi nvlink -e`` (per-link error counters).

Shape (both list GPUs the same way; ``-e`` prints one line per counter)::

    GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)
             Link 0: 25 GB/s                 (-s; ``<inactive>`` for a down link)
             Link 0: Replay Errors: 0        (-e; also Recovery Errors, CRC Errors, and newer counter names)

``-s`` lines become :class:`~diagnose.parsers._gpu.NvlinkStatus`, ``-e`` lines
:class:`~diagnose.parsers._gpu.NvlinkErrorCounter` (counter name kept as printed). Other ``nvlink`` sub-commands
(``-c`` capabilities, ``-R`` remote devices, ``-gt`` throughput) are ignored. ``[...]`` elision lines are skipped.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import NvlinkErrorCounter, NvlinkStatus, shell_line, smi_error
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "nvidia_smi_nvlink"
MIXABLE = True  # captured inside job stdout / prolog logs next to NCCL and PyTorch lines

_GPU_RE = re.compile(r"^\s*GPU\s+(?P<idx>\d+):\s*(?P<name>.*?)(?:\s*\(UUID:\s*(?P<uuid>[^)\s]+)\s*\))?\s*$")
_STATUS_RE = re.compile(
    r"^\s*Link\s+(?P<link>\d+):\s*(?:(?P<speed>\d+(?:\.\d+)?)\s*GB/s|(?P<inactive><inactive>|Inactive|inactive))\s*$"
)
_COUNTER_RE = re.compile(r"^\s*Link\s+(?P<link>\d+):\s*(?P<counter>[A-Za-z][A-Za-z0-9 _()/-]*?)\s*:\s*(?P<val>\d+)\s*$")

_SNIFF_GPU = re.compile(r"^GPU \d+: .*\(UUID: GPU-[0-9a-fA-F-]+\)\s*$", re.MULTILINE)
_SNIFF_LINK = re.compile(
    r"^\s+Link \d+: (?:\d+(?:\.\d+)? GB/s|<inactive>|[A-Za-z][A-Za-z ]*(?:Errors|errors|events|discards)?: \d+)\s*$",
    re.MULTILINE,
)


def sniff(head: str) -> int:
    gpus = len(_SNIFF_GPU.findall(head))
    links = len(_SNIFF_LINK.findall(head))
    if gpus and links >= 2:
        return 90
    if links >= 6:
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    gpu: int | None = None
    uuid: str | None = None
    orphan_reported = False
    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped or stripped in ("[...]", "..."):
            continue
        err = smi_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="nvidia-smi",
                                     message=err))
            continue
        gm = _GPU_RE.match(line)
        if gm and not line[:1].isspace():
            gpu = int(gm.group("idx"))
            uuid = gm.group("uuid")
            continue
        sm = _STATUS_RE.match(line)
        cm = None if sm else _COUNTER_RE.match(line)
        if sm or cm:
            if gpu is None:
                if not orphan_reported:
                    problems.append(f"line {n}: link line before any GPU line")
                    orphan_reported = True
                continue
            if sm:
                speed = float(sm.group("speed")) if sm.group("speed") else None
                records.append(NvlinkStatus(source=source, line=n, text=clip(line), host=cur_host, gpu=gpu,
                                            gpu_uuid=uuid, link=int(sm.group("link")), speed_gbs=speed,
                                            active=speed is not None))
            elif cm:
                records.append(NvlinkErrorCounter(source=source, line=n, text=clip(line), host=cur_host, gpu=gpu,
                                                  link=int(cm.group("link")), counter=cm.group("counter").strip(),
                                                  value=int(cm.group("val"))))
            continue
        if not line[:1].isspace():
            sh = shell_line(line)
            if sh is not None:
                gpu, uuid = None, None
                if sh[0]:
                    cur_host = sh[0]
