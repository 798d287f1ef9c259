"""The CUDA samples' peer-to-peer tests: ``p2pBandwidthLatencyTest`` and ``simpleP2P`` (NVIDIA/cuda-samples,
``Samples/5_Domain_Specific/p2pBandwidthLatencyTest``, ``Samples/0_Introduction/simpleP2P``).

``p2pBandwidthLatencyTest`` prints, in this order (its ``printf`` formats)::

    [P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
    Device: 0, NVIDIA RTX A6000, pciBusID: 3, pciDeviceID: 0, pciDomainID:0      # "%x": hex bus number
    Device=0 CAN Access Peer Device=1                                             # cudaDeviceCanAccessPeer
    P2P Connectivity Matrix                                                       # the same answer as 0/1 cells
         D\\D     0     1
         0<tab>     1     1
    Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)                           # copies staged through the host
       D\\D     0      1
         0 673.20  13.15
    Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)               # direct peer writes
    Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)                # with --p2p_read
    Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
    P2P=Disabled Latency Matrix (us)                                              # a "GPU" and a "CPU" sub-matrix
    P2P=Enabled Latency (P2P Writes) Matrix (us)
    NOTE: The CUDA Samples are not meant for performance measurements. ...        # the last line of a full run

Older releases print ``Unidirectional P2P=Enabled Bandwidth Matrix (GB/s)`` and latency matrices headed ``D\\D``.
For a pair that cannot access its peer the "enabled" cell is measured through the host as well, so only pairs
that CAN access each other compare P2P against the staged copy. The diagonal is a copy inside one GPU.

``simpleP2P`` checks every pair (``> Peer access from <name> (GPU0) -> <name> (GPU1) : Yes``), enables peer
access for the first capable pair, times ``cudaMemcpyPeer`` and runs a kernel on each GPU that reads the other's
memory; then it checks the result on the host: ``Verification error @ element 1: val = 0.000000, ref =
4.000000`` (at most 12 lines) and ``Test failed!`` mean the peer writes/reads returned wrong data, ``Test
passed`` that they did not. Without a capable pair it prints ``Peer to Peer access is not available amongst GPUs
in the system, waiving test.``

Records: :class:`CudaP2pRun` (one per run, at its first line), :class:`CudaP2pDevice`, :class:`CudaP2pAccess`
(per ordered pair; from the access lines, the connectivity matrix only for pairs the lines did not give),
:class:`CudaP2pMeasure` (one per off-diagonal and diagonal cell of every bandwidth/latency matrix) and
:class:`CudaP2pVerifyError`. ``run`` numbers the runs of one file from 1. A matrix cut short (fewer rows than
columns, a row with fewer cells) is a ``truncated`` problem; the last cell of a short row is dropped, since the
cut may have split the number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "cuda_p2p"
MIXABLE = True  # pasted into job logs and issue threads next to nvidia-smi, NCCL and PyTorch output

# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaP2pRun(Record):
    """One run of a CUDA P2P sample, cited at its first line.

    ``tool`` is ``p2pBandwidthLatencyTest`` or ``simpleP2P`` (None for bare ``Device=i CAN Access Peer
    Device=j`` lines, which other samples such as conjugateGradientMultiDeviceCG print too). ``complete``: the
    run's last line was seen (the closing NOTE, ``Test passed``/``Test failed!``, or the waiver). ``result``:
    ``passed``, ``failed``, ``waived`` (no capable pair) or ``error`` (a ``Cuda failure``/``CUDA error at`` line,
    kept in ``error``). ``memcpy_gbps`` and ``tested_pair`` (``"0-1"``) are simpleP2P's timed pair."""

    run: int
    tool: str | None
    gpus: int | None
    complete: bool
    result: str | None
    error: str | None
    memcpy_gbps: float | None
    tested_pair: str | None
    verification_errors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaP2pDevice(Record):
    """``Device: 0, NVIDIA RTX A6000, pciBusID: 3, pciDeviceID: 0, pciDomainID:0``; ``pci`` is
    ``dddd:bb:dd.0`` built from the hex fields (function 0: the sample does not print it)."""

    run: int
    index: int
    name: str
    pci: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaP2pAccess(Record):
    """Whether CUDA lets ``src`` access ``dst``'s memory directly (``cudaDeviceCanAccessPeer``). ``origin``:
    ``access_line`` (``Device=0 CAN Access Peer Device=1``), ``matrix`` (a connectivity-matrix cell) or
    ``simpleP2P`` (``> Peer access from ... : Yes``)."""

    run: int
    src: int
    dst: int
    can_access: bool
    origin: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaP2pMeasure(Record):
    """One cell of a bandwidth or latency matrix: ``src`` is the row, ``dst`` the column.

    ``metric`` ``bandwidth`` (``unit`` GB/s; ``direction`` ``unidirectional``/``bidirectional``) or ``latency``
    (``us``; ``timer`` ``gpu``/``cpu``, the sample's two sub-matrices). ``p2p`` is the matrix's ``P2P=Enabled``;
    ``transfer`` ``write``/``read`` when the title names it. ``value`` is NaN for a ``nan`` cell."""

    run: int
    metric: str
    direction: str | None
    p2p: bool
    transfer: str | None
    timer: str | None
    src: int
    dst: int
    value: float
    unit: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaP2pVerifyError(Record):
    """``Verification error @ element 1: val = 0.000000, ref = 4.000000``: simpleP2P read back a wrong value
    after the two kernels that read each other's memory (``value`` as printed: ``nan`` is common)."""

    run: int
    element: int
    value: str
    ref: float | None


# --------------------------------------------------------------------------------------------- patterns

_P2P_HEADER = re.compile(r"^\s*\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]\s*$")
_SIMPLE_HEADER = re.compile(r"^\s*\[(?P<prog>[^\]\n]*simpleP2P[^\]\n]*)\] - Starting\.\.\.\s*$")
_DEVICE = re.compile(
    r"^\s*Device: (?P<i>\d+), (?P<name>.+?), pciBusID: (?P<bus>[0-9a-fA-F]+), pciDeviceID: (?P<dev>[0-9a-fA-F]+), "
    r"pciDomainID:\s*(?P<dom>[0-9a-fA-F]+)\s*$"
)
_ACCESS = re.compile(r"^\s*Device=(?P<i>\d+) (?P<can>CAN|CANNOT) Access Peer Device=(?P<j>\d+)\s*$")
_SIMPLE_ACCESS = re.compile(
    r"^\s*> Peer access from .*? \(GPU(?P<i>\d+)\) -> .*? \(GPU(?P<j>\d+)\) : (?P<yes>Yes|No)\s*$")
_CONNECTIVITY = re.compile(r"^\s*P2P Connectivity Matrix\s*$")
_BW_TITLE = re.compile(
    r"^\s*(?P<dir>Unidirectional|Bidirectional) P2P=(?P<p2p>Enabled|Disabled) Bandwidth"
    r"(?: \(P2P (?P<tr>Writes|Reads)\))? Matrix \((?P<unit>GB/s)\)\s*$"
)
_LAT_TITLE = re.compile(
    r"^\s*P2P=(?P<p2p>Enabled|Disabled) Latency(?: \(P2P (?P<tr>Writes|Reads)\))? Matrix \((?P<unit>us)\)\s*$")
_COLS = re.compile(r"^\s*(?P<head>D\\D|GPU|CPU)(?P<cols>(?:\s+\d+)+)\s*$")
_NUM = r"(?:-?\d+(?:\.\d*)?|-?nan|-?inf)"  # "918." is a number a paste cut in half
_ROW = re.compile(rf"^\s*(?P<i>\d+)(?P<vals>(?:\s+{_NUM})+)\s*$", re.I)
_CLOSING = re.compile(r"^\s*NOTE: The CUDA Samples are not meant for performance measurements")
_DEVICE_COUNT = re.compile(r"^\s*CUDA-capable device count: (?P<n>\d+)\s*$")
_ENABLING = re.compile(r"^\s*Enabling peer access between GPU(?P<i>\d+) and GPU(?P<j>\d+)")
_MEMCPY = re.compile(
    r"^\s*cudaMemcpyPeer / cudaMemcpy between GPU(?P<i>\d+) and GPU(?P<j>\d+): (?P<bw>\d+(?:\.\d+)?)\s*GB/s")
_VERIFY = re.compile(r"^\s*Verification error @ element (?P<e>\d+): val = (?P<val>\S+), ref = (?P<ref>\S+)\s*$")
_PASSED = re.compile(r"^\s*Test passed\s*$")
_FAILED = re.compile(r"^\s*Test failed!\s*$")
_WAIVED = re.compile(r"Peer to Peer access is not available amongst GPUs in the system, waiving test")
_ERROR = re.compile(r"^\s*(?:Cuda failure \S+:\d+: '.*'|CUDA error at \S+:\d+ code=\d+.*)\s*$")

_SNIFF = re.compile(
    r"^\s*(?:\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]|Device=\d+ (?:CAN|CANNOT) Access Peer Device=\d+"
    r"|P2P Connectivity Matrix|(?:Unidirectional|Bidirectional) P2P=(?:Enabled|Disabled) Bandwidth"
    r"|P2P=(?:Enabled|Disabled) Latency|> Peer access from .* \(GPU\d+\) -> .* \(GPU\d+\) : (?:Yes|No)"
    r"|\[[^\]\n]*simpleP2P[^\]\n]*\] - Starting\.\.\.|Verification error @ element \d+: val = "
    r"|cudaMemcpyPeer / cudaMemcpy between GPU\d+ and GPU\d+:)",
    re.M,
)
_STRONG = re.compile(
    r"^\s*(?:\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]|\[[^\]\n]*simpleP2P[^\]\n]*\] - Starting\.\.\."
    r"|(?:Unidirectional|Bidirectional) P2P=(?:Enabled|Disabled) Bandwidth.*Matrix \(GB/s\))",
    re.M,
)


def sniff(head: str) -> int:
    hits = 0
    for _ in _SNIFF.finditer(head):
        hits += 1
        if hits >= 6:
            break
    if hits == 0:
        return 0
    if _STRONG.search(head):
        return 95
    if hits >= 4:
        return 85
    return 45 + 10 * hits


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, lambda t, s, h, r, p: _Parser(s, h, r, p).feed(t), text, source, host)


# --------------------------------------------------------------------------------------------- parsing


@dataclass
class _Matrix:
    title: str
    line: int
    kind: str  # connectivity | bandwidth | latency
    direction: str | None = None
    p2p: bool = False
    transfer: str | None = None
    unit: str = ""
    timer: str | None = None
    cols: list[int] = field(default_factory=list)
    rows: int = 0
    header_seen: bool = False


@dataclass
class _Run:
    number: int
    line: int
    text: str
    tool: str | None
    host: str | None
    gpus: int | None = None
    complete: bool = False
    result: str | None = None
    error: str | None = None
    memcpy_gbps: float | None = None
    tested_pair: str | None = None
    verification_errors: int = 0
    devices: int = 0
    access: set[tuple[int, int]] = field(default_factory=set)


class _Parser:
    def __init__(self, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
        self.source = source
        self.host = host
        self.records = records
        self.problems = problems
        self.run: _Run | None = None
        self.runs = 0
        self.matrix: _Matrix | None = None
        self.cut_rows: list[str] = []

    # runs ------------------------------------------------------------------------------------------

    def _start(self, n: int, line: str, tool: str | None) -> _Run:
        self._finish()
        self.runs += 1
        self.run = _Run(self.runs, n, clip(line), tool, self.host)
        return self.run

    def _current(self, n: int, line: str, tool: str | None = None) -> _Run:
        if self.run is None or self.run.complete or (tool is not None and self.run.tool not in (None, tool)):
            return self._start(n, line, tool)
        if self.run.tool is None and tool is not None:
            self.run.tool = tool
        return self.run

    def _finish(self) -> None:
        self._close_matrix()
        r = self.run
        if r is None:
            return
        self.records.append(CudaP2pRun(
            source=self.source, line=r.line, text=r.text, host=r.host, run=r.number, tool=r.tool,
            gpus=r.gpus if r.gpus is not None else (r.devices or None), complete=r.complete, result=r.result,
            error=r.error, memcpy_gbps=r.memcpy_gbps, tested_pair=r.tested_pair,
            verification_errors=r.verification_errors,
        ))
        self.run = None

    # matrices --------------------------------------------------------------------------------------

    def _open_matrix(self, m: _Matrix) -> None:
        self._close_matrix()
        self.matrix = m

    def _close_matrix(self) -> None:
        m = self.matrix
        self.matrix = None
        if m is None:
            return
        if not m.header_seen:
            self.problems.append(f"truncated: '{m.title}' (line {m.line}) has no rows")
        elif m.rows < len(m.cols):
            self.problems.append(f"truncated: '{m.title}' (line {m.line}) has {m.rows} of {len(m.cols)} rows")

    def _row(self, n: int, line: str, i: int, raw: list[str], run: _Run) -> None:
        m = self.matrix
        assert m is not None
        ncols = len(m.cols)
        vals = raw
        if len(raw) < ncols:
            self.problems.append(
                f"truncated: '{m.title}' row {i} (line {n}) has {len(raw)} of {ncols} cells")
            vals = raw[:-1]  # the last number may be cut in half
        elif len(raw) > ncols:
            self.problems.append(f"'{m.title}' row {i} (line {n}) has {len(raw)} cells for {ncols} columns")
            vals = raw[:ncols]
        m.rows += 1
        txt = clip(line)
        for j, v in zip(m.cols, vals, strict=False):
            if m.kind == "connectivity":
                if i == j or (i, j) in run.access:
                    continue
                run.access.add((i, j))
                self.records.append(CudaP2pAccess(
                    source=self.source, line=n, text=txt, host=run.host, run=run.number, src=i, dst=j,
                    can_access=v.strip() not in ("0", "0.0"), origin="matrix"))
                continue
            self.records.append(CudaP2pMeasure(
                source=self.source, line=n, text=txt, host=run.host, run=run.number, metric=m.kind,
                direction=m.direction, p2p=m.p2p, transfer=m.transfer, timer=m.timer, src=i, dst=j,
                value=float(v), unit=m.unit))

    # lines -----------------------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        for n, line in iter_lines(text):
            try:
                self._line(n, line)
            except (ValueError, IndexError) as exc:
                self.problems.append(f"line {n}: {type(exc).__name__}: {exc}")
        self._finish()

    def _line(self, n: int, line: str) -> None:
        s = line.strip()
        if not s:
            return
        p = shell_prompt(line)
        if p is not None:  # the next command: whatever run was open has printed all it will
            self._finish()
            if p[0]:
                self.host = p[0]
            return
        if self.matrix is not None and self._matrix_line(n, line):
            return
        if _P2P_HEADER.match(line):
            self._start(n, line, "p2pBandwidthLatencyTest")
            return
        if _SIMPLE_HEADER.match(line):
            self._start(n, line, "simpleP2P")
            return
        m = _DEVICE.match(line)
        if m:
            run = self._current(n, line, "p2pBandwidthLatencyTest")
            run.devices += 1
            dom, bus, dev = int(m["dom"], 16), int(m["bus"], 16), int(m["dev"], 16)
            self.records.append(CudaP2pDevice(
                source=self.source, line=n, text=clip(line), host=run.host, run=run.number, index=int(m["i"]),
                name=m["name"].strip(), pci=f"{dom:04x}:{bus:02x}:{dev:02x}.0"))
            return
        m = _ACCESS.match(line)
        if m:
            run = self._current(n, line)
            self._access(n, line, run, int(m["i"]), int(m["j"]), m["can"] == "CAN", "access_line")
            return
        m = _SIMPLE_ACCESS.match(line)
        if m:
            run = self._current(n, line, "simpleP2P")
            self._access(n, line, run, int(m["i"]), int(m["j"]), m["yes"] == "Yes", "simpleP2P")
            return
        if _CONNECTIVITY.match(line):
            self._current(n, line, "p2pBandwidthLatencyTest")
            self._open_matrix(_Matrix(s, n, "connectivity"))
            return
        m = _BW_TITLE.match(line)
        if m:
            self._current(n, line, "p2pBandwidthLatencyTest")
            self._open_matrix(_Matrix(
                s, n, "bandwidth", direction=m["dir"].lower(), p2p=m["p2p"] == "Enabled",
                transfer={"Writes": "write", "Reads": "read"}.get(m["tr"] or ""), unit=m["unit"]))
            return
        m = _LAT_TITLE.match(line)
        if m:
            self._current(n, line, "p2pBandwidthLatencyTest")
            self._open_matrix(_Matrix(
                s, n, "latency", p2p=m["p2p"] == "Enabled",
                transfer={"Writes": "write", "Reads": "read"}.get(m["tr"] or ""), unit=m["unit"], timer="gpu"))
            return
        if self.run is None:
            return
        self._run_line(n, line, self.run)

    def _matrix_line(self, n: int, line: str) -> bool:
        """A line of the open matrix (its column header or a row); False closes the matrix."""
        m = self.matrix
        assert m is not None and self.run is not None
        h = _COLS.match(line)
        if h:
            cols = [int(c) for c in h["cols"].split()]
            if m.header_seen:
                if m.kind == "latency" and h["head"] == "CPU" and m.timer == "gpu":
                    self._close_matrix()
                    self.matrix = _Matrix(m.title, m.line, "latency", p2p=m.p2p, transfer=m.transfer, unit=m.unit,
                                          timer="cpu", cols=cols, header_seen=True)
                    return True
                self._close_matrix()
                return False
            m.cols, m.header_seen = cols, True
            if m.kind == "latency" and h["head"] == "CPU":
                m.timer = "cpu"
            return True
        if not m.header_seen:
            self._close_matrix()
            return False
        r = _ROW.match(line)
        if r and int(r["i"]) in m.cols:
            self._row(n, line, int(r["i"]), r["vals"].split(), self.run)
            return True
        self._close_matrix()
        return False

    def _access(self, n: int, line: str, run: _Run, i: int, j: int, can: bool, origin: str) -> None:
        if (i, j) in run.access:
            return
        run.access.add((i, j))
        self.records.append(CudaP2pAccess(
            source=self.source, line=n, text=clip(line), host=run.host, run=run.number, src=i, dst=j,
            can_access=can, origin=origin))

    def _run_line(self, n: int, line: str, run: _Run) -> None:
        if _CLOSING.match(line):
            run.complete = True
            self._finish()
            return
        m = _DEVICE_COUNT.match(line)
        if m:
            run.gpus = int(m["n"])
            return
        m = _ENABLING.match(line)
        if m:
            run.tested_pair = f"{m['i']}-{m['j']}"
            return
        m = _MEMCPY.match(line)
        if m:
            run.memcpy_gbps = float(m["bw"])
            run.tested_pair = run.tested_pair or f"{m['i']}-{m['j']}"
            return
        m = _VERIFY.match(line)
        if m:
            run.verification_errors += 1
            try:
                ref: float | None = float(m["ref"])
            except ValueError:
                ref = None
            self.records.append(CudaP2pVerifyError(
                source=self.source, line=n, text=clip(line), host=run.host, run=run.number, element=int(m["e"]),
                value=m["val"], ref=ref))
            return
        if _PASSED.match(line) or _FAILED.match(line) or _WAIVED.search(line):
            run.result = "passed" if _PASSED.match(line) else "failed" if _FAILED.match(line) else "waived"
            run.complete = True
            self._finish()
            return
        if _ERROR.match(line):
            run.result, run.error, run.complete = "error", line.strip()[:200], True
            self._finish()
