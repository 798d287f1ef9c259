"""``nvidia-smi topo -m``: the GPU/NIC connection matrix.

Two layouts are seen in captures: the tool's own output (tab separated, ``NIC<i>`` columns explained by a
``NIC Legend:`` block) and copies where tabs became spaces (markdown, terminals)::

    <tab>GPU0<tab>GPU1<tab>NIC0<tab>CPU Affinity<tab>NUMA Affinity<tab>GPU NUMA ID
    GPU0<tab> X <tab>NV18<tab>PIX<tab>0-191<tab>0<tab><tab>N/A
    ...
    NIC Legend:
      NIC0: mlx5_0

Older drivers name NIC columns by device (``mlx5_0``) and print ``SOC`` for ``SYS``. Every cell becomes a
:class:`~diagnose.parsers._gpu.TopoEntry` (the ``X`` diagonal included); every row a
:class:`~diagnose.parsers._gpu.TopoDevice` with its CPU/NUMA affinity and, for NICs, the legend's device name.
A file may hold several matrices (each starts at its own header line). ``topo -p2p`` matrices (``OK``/``NS`` cells)
are not connection matrices: their rows are skipped with a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import TopoDevice, TopoEntry, na, shell_line, smi_error
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "nvidia_smi_topo"
MIXABLE = True  # captured inside job stdout / prolog logs next to NCCL and PyTorch lines

_DEV_TOKEN = r"(?:GPU\d+|NIC\d+|mlx\d+_(?:bond_)?\d+|[a-z][a-z0-9]*_\d+)"
_DEV_RE = re.compile(rf"^{_DEV_TOKEN}$")
_REL_RE = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB|PXN|C2C)$")
_TRAILER_HEADS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND_RE = re.compile(r"^\s*(?P<nic>NIC\d+)\s*:\s*(?P<dev>\S+)\s*$")

_SNIFF_HEADER = re.compile(
    rf"^[ \t]*GPU0(?:[ \t]+{_DEV_TOKEN})*[ \t]+CPU Affinity(?:[ \t]+NUMA Affinity)?", re.MULTILINE
)
_SNIFF_ROW = re.compile(r"^GPU\d+[ \t]+(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)[ \t]", re.MULTILINE)
_SNIFF_LEGEND = re.compile(r"^\s*NV#\s*=\s*Connection traversing a bonded set of # NVLinks", re.MULTILINE)


def sniff(head: str) -> int:
    header = bool(_SNIFF_HEADER.search(head))
    rows = len(_SNIFF_ROW.findall(head))
    legend = bool(_SNIFF_LEGEND.search(head))
    if header and (rows or legend):
        return 95
    if header or (rows >= 2 and legend):
        return 80
    if legend and "PIX" in head and "NODE" in head:
        return 45
    return 0


@dataclass
class _Matrix:
    line: int
    cols: list[str]
    tabbed: bool
    host: str | None
    rows: list[tuple[int, str, str, str | None, str | None]] = field(default_factory=list)  # line, raw, name, cpu, numa
    done: bool = False


def _header_cols(line: str) -> tuple[list[str], bool] | None:
    """Device column names when ``line`` is a matrix header; None otherwise."""
    if "GPU0" not in line or "CPU Affinity" not in line:
        return None
    tabbed = "\t" in line
    before = line.split("CPU Affinity", 1)[0]
    toks = before.split()
    if not toks or toks[0] != "GPU0" or not all(_DEV_RE.match(t) for t in toks):
        return None
    return toks, tabbed


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    matrices: list[_Matrix] = []
    mat: _Matrix | None = None
    legend: dict[str, str] = {}
    entries: list[TopoEntry] = []
    in_legend = False

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        err = smi_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="nvidia-smi",
                                     message=err))
            continue
        hc = _header_cols(line)
        if hc is not None:
            if mat is not None:
                mat.done = True
            mat = _Matrix(line=n, cols=hc[0], tabbed=hc[1], host=cur_host)
            matrices.append(mat)
            in_legend = False
            continue
        stripped = line.strip()
        if stripped.startswith("NIC Legend"):
            in_legend = True
            if mat is not None:
                mat.done = True
            mat = None
            continue
        if in_legend:
            lm = _LEGEND_RE.match(line)
            if lm:
                legend[lm.group("nic")] = lm.group("dev")
                continue
            in_legend = False
        if mat is not None and not mat.done:
            row = _row(line, mat)
            if row is None:
                # the first non-row line after rows ends the matrix (Legend:, prose, a closing code fence)
                if mat.rows:
                    mat.done = True
                    mat = None
                continue
            name, rels, cpu, numa = row
            bad = [r for r in rels if not _REL_RE.match(r)]
            if bad:
                problems.append(f"line {n}: not a connection matrix row ({', '.join(sorted(set(bad))[:3])})")
                continue
            mat.rows.append((n, line, name, cpu, numa))
            for col, rel in zip(mat.cols, rels, strict=True):
                entries.append(TopoEntry(source=source, line=n, text=clip(line), host=mat.host, row=name, col=col,
                                         relation=rel))
            continue
        sh = shell_line(line)
        if sh is not None and sh[0]:
            cur_host = sh[0]

    records.extend(entries)
    for m in matrices:
        for ln, raw, name, cpu, numa in m.rows:
            device = legend.get(name) if name.startswith("NIC") else (None if name.startswith("GPU") else name)
            records.append(TopoDevice(source=source, line=ln, text=clip(raw), host=m.host, name=name, device=device,
                                      cpu_affinity=cpu, numa_affinity=numa))
        if len(m.rows) < len(m.cols):
            where = "truncated: " if not m.done else f"line {m.line}: "
            problems.append(f"{where}matrix shows {len(m.rows)} of {len(m.cols)} rows")
    truncated = any(len(m.rows) < len(m.cols) and not m.done for m in matrices)
    if any(any(c.startswith("NIC") for c in m.cols) for m in matrices) and not legend and not truncated:
        problems.append("NIC columns without a NIC Legend")


def _row(line: str, mat: _Matrix) -> tuple[str, list[str], str | None, str | None] | None:
    ncol = len(mat.cols)
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
        if not cells or not _DEV_RE.match(cells[0]):
            return None
        rels = cells[1 : 1 + ncol]
        if len(rels) < ncol or any(not r for r in rels):
            return None
        trailer = cells[1 + ncol :]
    else:
        toks = line.split()
        if len(toks) < 1 + ncol or not _DEV_RE.match(toks[0]):
            return None
        rels = toks[1 : 1 + ncol]
        trailer = toks[1 + ncol :]
    cpu = na(trailer[0]) if len(trailer) > 0 else None
    numa = na(trailer[1]) if len(trailer) > 1 else None
    return (line.split()[0], rels, cpu, numa)
