"""perftest (linux-rdma/perftest: ``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``, ``ib_atomic_bw`` and the
``*_lat`` tests): the point-to-point RDMA benchmark operators run between two hosts before blaming NCCL.

What one run prints (``perftest_parameters.c`` ``ctx_print_test_info``, ``perftest_parameters.h`` formats)::

    root@node02:~# ib_write_bw -d mlx5_0 --report_gbits 192.168.33.11      (the prompt names the host)
    initializing CUDA / Picking device No. 0 / allocated GPU buffer ...    (--use_cuda only)
    ---------------------------------------------------------------------------------------
                        RDMA_Write BW Test                                 (Send / RDMA_Read / Atomic ...)
     Dual-port       : OFF          Device         : mlx5_0
     Number of qps   : 1            Transport type : IB
     Connection type : RC           Using SRQ      : OFF
     Mtu             : 4096[B]                                             (the path MTU the QP uses)
     Link type       : IB                                                  (Ethernet = RoCE)
     GID index       : 3                                                   (printed when -x is given)
     rdma_cm QPs     : OFF
     Data ex. method : Ethernet
    ---------------------------------------------------------------------------------------
     local address: LID 0x08 QPN 0x0218 PSN 0x72df54 RKey 0x010100 VAddr 0x007f75883c2000
     GID: 00:00:...:10:00:21:03                                            (RoCE)
     remote address: LID 0x07 ...
    ---------------------------------------------------------------------------------------
     #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
     65536      5000             4508.97            4508.79               0.072141

``BW ...[MB/sec]`` (``[MiB/sec]`` since 2024) is 2^20 bytes/s, ``[Gb/sec]`` (``--report_gbits``) 10^9 bits/s; both
are normalised to Gb/s here. Latency tests print ``t_min`` ... ``99.9% percentile`` in microseconds.

Failures are single lines: ``Couldn't connect to host:port`` / ``Unable to open file descriptor for socket
connection`` (the TCP side channel: server not started, firewall, wrong address), ``Failed to modify QP to RTR``
(path / GID / MTU attributes refused), ``Completion with error at client`` followed by ``Failed status 12: wr_id 0
syndrom 0x81`` (older) or ``Failed status-transport retry counter exceeded (12): ...`` (2025 on): the work
completion status (12 = transport retry exceeded, 13 = RNR retry exceeded, 4 = local protection), ``Couldn't
allocate MR`` (``ibv_reg_mr`` failed: the memlock limit, or with ``--use_cuda`` no GPUDirect RDMA peer memory
client), ``Requested mtu is higher than active mtu`` and ``Conflicting CPU frequency values detected`` (cycle
counts, so the timing, are unreliable).

One :class:`PerftestRun` per run (per command, or per test title when several follow one another), a
:class:`PerftestResult` per table row, a :class:`PerftestError` per failure line. A run can be pasted inside a
report of prose, indented, quoted (``> ``) or behind log prefixes: lines are matched after those. Pure: no I/O,
never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "perftest"
# A run's header, table and errors must stay together: parsed whole (head and tail beyond the size limit).
STREAMABLE = False
# captured inside job stdout, health-check logs and pasted reports next to other tools' lines
MIXABLE = True

# ----------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True, kw_only=True)
class PerftestRun(Record):
    """One perftest run: its command, its header block and what it set up."""

    run_index: int
    tool: str | None  # ib_write_bw ... from the command line, when there is one
    test: str | None  # the title: "RDMA_Write BW", "Send BW", "RDMA_Read Latency", "Atomic FETCH_AND_ADD BW"
    verb: str | None  # write / read / send / atomic
    kind: str | None  # bw / lat
    bidirectional: bool
    device: str | None
    transport: str | None
    connection: str | None  # RC / UC / UD / XRC / DC / SRD
    qps: int | None
    mtu: int | None  # bytes
    link_type: str | None  # IB / Ethernet
    gid_index: int | None
    rdma_cm: bool | None
    data_exchange: str | None
    use_cuda: bool
    cuda_device: int | None
    role: str | None  # server / client
    peer: str | None  # the server the client connects to (command line)
    command: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PerftestResult(Record):
    """One row of a run's result table. Bandwidth in Gb/s whatever the unit printed (``unit``)."""

    run_index: int
    kind: str  # bw / lat / lat_dur
    bytes: int
    iterations: int
    unit: str | None  # as printed: MB/sec, MiB/sec, Gb/sec, usec
    bw_peak_gbps: float | None
    bw_avg_gbps: float | None
    msg_rate_mpps: float | None
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    t_avg_us: float | None
    t_stdev_us: float | None
    p99_us: float | None
    p999_us: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PerftestError(Record):
    """A failure or warning line of a run.

    ``kind``: ``connect`` (TCP side channel), ``socket``, ``completion`` (a work completion error; ``status`` is
    the ibv_wc_status, ``vendor_err`` the syndrome, ``side`` client/server), ``modify_qp`` (``detail`` the target
    state), ``mr`` (memory registration; ``detail`` the errno when printed), ``mtu_lowered`` (``detail`` the
    active MTU in bytes), ``cpu_freq``, ``cuda`` (CUDA initialisation), ``setup`` (other set-up failures)."""

    run_index: int
    kind: str
    status: int | None
    status_text: str | None
    vendor_err: int | None
    side: str | None
    detail: str | None
    use_cuda: bool


# ----------------------------------------------------------------------------------------------------------------
# Patterns

# quote marks, OpenMPI --tag-output, srun -l, log prefixes ending in "[stdout] ", markdown backticks
_LEAD_RE = re.compile(r"^(?:\s*>)+\s?|^\[\d+,\d+\]<std(?:out|err)>:\s?|^\s{0,4}\d{1,6}: |^.*?\[std(?:out|err)\]\s?|^\s*`+")
_TOOLS = r"ib_(?:write|read|send|atomic)_(?:bw|lat)|raw_ethernet_(?:bw|lat|burst_lat|fs_rate)"
_CMD_RE = re.compile(
    r"^\s*(?:[$#%>+]\s*)?(?:(?:sudo|time|exec|command|nohup|timeout\s+\S+|taskset\s+(?:-c\s+)?\S+"
    r"|numactl(?:\s+-{1,2}[\w-]+(?:[= ]\S+)?)+|[A-Z_][A-Z0-9_]*=\S*|-\S+)\s+)*"
    r"(?:\S*/)?(?P<tool>" + _TOOLS + r")(?=\s|$)(?P<args>[^\n]*)$"
)
_TITLE_RE = re.compile(
    r"^\s*(?P<verb>RDMA_Write_imm|RDMA_Write|RDMA_Read|Send|Atomic(?: [A-Z_]+)?)\s+(?P<bidi>Bidirectional\s+)?"
    r"(?:Post List\s+)?(?P<kind>BW|Latency)\s+(?:forwarding\s+)?(?:Multicast\s+)?Test\s*$"
)
_FIELDS = {
    "device": re.compile(r"\bDevice\s*:\s*(\S+)"),
    "qps": re.compile(r"Number of qps\s*:\s*(\d{1,6})"),
    "transport": re.compile(r"Transport type\s*:\s*(\S+)"),
    "connection": re.compile(r"Connection type\s*:\s*(\S+)"),
    "mtu": re.compile(r"^\s*Mtu\s*:\s*(\d{2,6})\s*\[B\]"),
    "link_type": re.compile(r"Link type\s*:\s*(\S+)"),
    "gid_index": re.compile(r"^\s*GID index\s*:\s*(\d{1,4})"),
    "rdma_cm": re.compile(r"rdma_cm QPs\s*:\s*(ON|OFF)"),
    "data_exchange": re.compile(r"Data ex\. method\s*:\s*(\S+)"),
}
_HDR_KEY_RE = re.compile(r"^\s*(?:Dual-port|Number of qps|Connection type|Data ex\. method)\s*:")
_ADDR_RE = re.compile(r"^\s*(?:local|remote) address:\s*LID\s+(?:0x)?[0-9a-fA-F]+\s+QPN\s+0x[0-9a-fA-F]+")
_TABLE_BW_RE = re.compile(r"^\s*#bytes\s+(?:#sl\s+)?#iterations\s+BW peak\[(?P<unit>MB|MiB|Gb)/sec\]")
_TABLE_LAT_RE = re.compile(r"^\s*#bytes\s+#iterations\s+t_min\[usec\]")
_TABLE_LATDUR_RE = re.compile(r"^\s*#bytes\s+#iterations\s+t_avg\[usec\]\s+tps average")
_NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_ROW_RE = re.compile(r"^\s*(?P<bytes>\d{1,20})\s+(?P<rest>(?:" + _NUM + r"\s+){1,12}" + _NUM + r")\s*$")
_DASHES_RE = re.compile(r"^\s*-{40,}\s*$")
_WAIT_RE = re.compile(r"Waiting for client(?: rdma_cm QP)? to connect")

_CONNECT_RE = re.compile(r"Couldn't connect to (?P<host>\S+?):(?P<port>\d{1,5})\b")
_SOCKET_RE = re.compile(r"Unable to open file descriptor for socket connection")
_COMPL_RE = re.compile(r"Completion with error at (?P<side>client|server)")
_STATUS_RE = re.compile(
    r"Failed status(?:-(?P<txt>[^()\n]*?)\s*\((?P<st2>\d{1,3})\)|\s+(?P<st>\d{1,3}))\s*:"
    r"(?:\s*qp_num\s+\d+)?\s*wr_id\s+\d+\s+syndrom\s+0x(?P<syn>[0-9a-fA-F]{1,8})"
)
_MODIFY_RE = re.compile(r"Failed to modify QP(?:\s+\d+)?\s+to\s+(?P<state>RTR|RTS|INIT)")
_MR_RE = re.compile(
    r"Couldn't allocate MR(?: with error=(?P<err>\d+))?|ibv_reg_mr(?:_\w+)? failed|Failed to create MR|failed to create mr"
)
_MTU_LOW_RE = re.compile(r"Requested mtu is higher than active mtu")
_MTU_ACTIVE_RE = re.compile(r"Changing to active mtu\s*-\s*(?P<n>\d)")
_CPU_RE = re.compile(r"Conflicting CPU frequency values detected")
_CUDA_ERR_RE = re.compile(
    r"cuInit\(0\) returned|There are no available device\(s\) that support CUDA|No such device ID \(\d+\) exists"
    r"|Couldn't init GPU context|CUDA DMA-BUF cannot be used without CUDA"
)
_SETUP_RE = re.compile(
    r"Couldn't create IB resources|Couldn't get context for the device|Unable to perform rdma_(?:client|server) function"
    r"|Couldn't read remote address|Failed to complete run_iter_\w+ function successfully|Couldn't create QP"
    r"|Failed to initialize RDMA contexts|Unable to init the socket connection"
)
_CUDA_ON_RE = re.compile(r"^\s*(?:initializing CUDA|allocated GPU buffer|cuMemAlloc\(\) of a|using DMA-BUF for GPU buffer)")
_CUDA_PICK_RE = re.compile(r"Picking device No\.\s*(?P<n>\d{1,3})")
_USE_CUDA_ARG_RE = re.compile(r"--use_cuda(?:=(?P<n>\d{1,3}))?(?:\s|$)")

# perftest options that take no value (perftest_parameters.c long_options with has_arg 0 and the short flags
# without an argument); every other option takes the next token unless written --opt=value
_NO_ARG = frozenset({
    "-a", "-b", "-e", "-F", "-h", "-H", "-N", "-O", "-R", "-V", "-z", "-g", "-l", "-U", "-k",
    "--all", "--bidirectional", "--events", "--CPU-freq", "--help", "--report-both", "--noPeak", "--odp",
    "--rdma_cm", "--version", "--report_gbits", "--report_gbit", "--run_infinitely", "--use_cuda", "--use_cuda_dmabuf",
    "--use_rocm", "--use_data_direct", "--ipv6", "--ipv6-addr", "--perform_warm_up", "--disable_pcie_relaxed",
    "--use_old_post_send", "--use_hugepages", "--use-srq", "--mcg", "--reversed", "--cpu_util", "--report-per-port",
    "--dualport", "--ipv4", "--out_json", "--use_null_mr", "--dlid", "--use_enhanced_reorder",
})
_HOSTLIKE_RE = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]{3,}|[A-Za-z0-9][\w.\-]*)$")

_BW_FACTOR = {"MB": 1048576 * 8 / 1e9, "MiB": 1048576 * 8 / 1e9, "Gb": 1.0}
_VERBS = {"RDMA_Write": "write", "RDMA_Write_imm": "write", "RDMA_Read": "read", "Send": "send"}

# ----------------------------------------------------------------------------------------------------------------
# Sniff


def _strip(line: str) -> str:
    m = _LEAD_RE.match(line)
    return line[m.end():] if m else line


def sniff(head: str) -> int:
    score = 0
    title = header = addr = table = err = 0
    cuda = mr = wait = 0
    for raw in head.split("\n"):
        if len(raw) > 400:
            continue
        line = _strip(raw)
        s = line.strip()
        if not s:
            continue
        if _TITLE_RE.match(line):
            title = 1
        elif _HDR_KEY_RE.match(line):
            header += 1
        elif _ADDR_RE.match(line):
            addr = 1
        elif _TABLE_BW_RE.match(line) or _TABLE_LAT_RE.match(line) or _TABLE_LATDUR_RE.match(line):
            table = 1
        elif _COMPL_RE.search(line) or _STATUS_RE.search(line) or _SOCKET_RE.search(line):
            err += 1
        elif _CUDA_ON_RE.match(line) or _CUDA_PICK_RE.search(line):
            cuda = 1
        elif _MR_RE.search(line) or _CPU_RE.search(line):
            mr = 1
        elif s == "* Waiting for client to connect... *":
            wait = 1
    score = 2 * title + min(header, 3) + addr + 2 * table + 2 * min(err, 2) + 2 * (cuda and mr) + wait
    if score >= 4:
        return 95
    if score == 3:
        return 80
    if score == 2 and (title or table or err or (cuda and mr)):
        return 60
    return 0


# ----------------------------------------------------------------------------------------------------------------
# Parse


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, lambda t, s, h, r, p: _Parser(s, h, r, p).run(t), text, source, host)


def _peer(args: str) -> str | None:
    toks = args.split()
    skip = False
    for i, tok in enumerate(toks):
        if skip:
            skip = False
            continue
        if tok in ("|", ">", ">>", "&", "&&", ";", "2>&1") or tok.startswith((">", "|", "2>")):
            break
        if tok.startswith("-"):
            if "=" not in tok and tok not in _NO_ARG and not (tok.startswith("--use_cuda") or tok.startswith("--use_rocm")):
                skip = i + 1 < len(toks)
            continue
        if _HOSTLIKE_RE.match(tok) and not tok.isdigit():
            return tok
    return None


class _Parser:
    def __init__(self, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
        self.source, self.default_host, self.records, self.problems = source, host, records, problems
        self.host = host
        self.run_index = -1
        self._reset(None)

    def _reset(self, cmd: tuple[int, str, str, str] | None) -> None:
        self.cmd = cmd  # (line, text, tool, args)
        self.fields: dict[str, object] = {}
        self.title: tuple[int, str, re.Match[str]] | None = None
        self.use_cuda = bool(cmd and _USE_CUDA_ARG_RE.search(cmd[3]))
        m = _USE_CUDA_ARG_RE.search(cmd[3]) if cmd else None
        self.cuda_device: int | None = int(m["n"]) if m and m["n"] else None
        self.waiting = False
        self.first: tuple[int, str] | None = None
        self.rows: list[PerftestResult] = []
        self.errors: list[PerftestError] = []
        self.table: tuple[str, str | None, int] | None = None  # (kind, unit, header line)
        self.table_rows = 0
        self.pending_compl: tuple[int, str, str] | None = None
        self.pending_mtu: int | None = None
        self.run_host = self.host
        self.has_mr = False

    # one run ends: its record, then its rows and errors
    def _flush(self) -> None:
        if self.pending_compl is not None:
            n, text, side = self.pending_compl
            self._error(n, text, "completion", side=side)
            self.pending_compl = None
        if self.table is not None and self.table_rows == 0 and not self.errors:
            self.problems.append(f"truncated: result table without rows (line {self.table[2]})")
        if self.title is None and not self.rows and not self.errors:
            return
        ri = self.run_index
        test: str | None
        kind: str | None
        if self.title is not None:
            line, text, tm = self.title
            verb_raw = tm["verb"]
            test = f"{verb_raw} {'Bidirectional ' if tm['bidi'] else ''}{tm['kind']}"
            verb = _VERBS.get(verb_raw, "atomic" if verb_raw.startswith("Atomic") else None)
            kind = "bw" if tm["kind"] == "BW" else "lat"
            bidi = bool(tm["bidi"])
        else:
            line, text = (self.cmd[0], self.cmd[1]) if self.cmd else (self.first or (1, ""))
            test = verb = kind = None
            bidi = False
        tool = self.cmd[2] if self.cmd else None
        if tool and verb is None:
            verb = tool.split("_")[1] if tool.startswith("ib_") else None
            kind = tool.rsplit("_", 1)[-1]
        peer = _peer(self.cmd[3]) if self.cmd else None
        role = "client" if peer else ("server" if self.waiting or self.cmd else None)
        f = self.fields
        run = PerftestRun(
            source=self.source, line=line, text=clip(text), host=self.run_host, run_index=ri, tool=tool, test=test,
            verb=verb, kind=kind, bidirectional=bidi or bool(self.cmd and re.search(r"(?:^|\s)(?:-b|--bidirectional)(?:\s|$)",
                                                                                  self.cmd[3])),
            device=f.get("device"), transport=f.get("transport"), connection=f.get("connection"),  # type: ignore[arg-type]
            qps=f.get("qps"), mtu=f.get("mtu"), link_type=f.get("link_type"), gid_index=f.get("gid_index"),  # type: ignore[arg-type]
            rdma_cm=f.get("rdma_cm"), data_exchange=f.get("data_exchange"), use_cuda=self.use_cuda,  # type: ignore[arg-type]
            cuda_device=self.cuda_device, role=role, peer=peer, command=clip(self.cmd[1]) if self.cmd else None,
        )
        self.records.append(run)
        self.records.extend(self.rows)
        # errors seen before a CUDA line of the same run still belong to a CUDA run
        self.records.extend(e if e.use_cuda == self.use_cuda else _with_cuda(e, self.use_cuda) for e in self.errors)

    def _new_run(self, cmd: tuple[int, str, str, str] | None) -> None:
        self._flush()
        self.run_index += 1
        self._reset(cmd)

    def _error(self, n: int, text: str, kind: str, *, status: int | None = None, status_text: str | None = None,
               vendor_err: int | None = None, side: str | None = None, detail: str | None = None) -> None:
        self.errors.append(PerftestError(
            source=self.source, line=n, text=clip(text), host=self.run_host, run_index=self.run_index, kind=kind,
            status=status, status_text=status_text, vendor_err=vendor_err, side=side, detail=detail,
            use_cuda=self.use_cuda))

    def run(self, text: str) -> None:
        self.run_index = 0
        for n, raw in iter_lines(text):
            if len(raw) > 2000:
                continue
            line = _strip(raw)
            s = line.strip()
            if not s:
                continue
            p = shell_prompt(line)
            if p is not None:
                if p[0]:
                    self.host = p[0]
                m = _CMD_RE.match(p[1])
                if m:
                    self._start(n, raw, m)
                continue
            m = _CMD_RE.match(line)
            if m and not _TITLE_RE.match(line):
                self._start(n, raw, m)
                continue
            self._line(n, raw, line)
        self._flush()

    def _start(self, n: int, raw: str, m: re.Match[str]) -> None:
        if self.title is None and not self.rows and not self.errors and self.cmd is None and self.first is None:
            self._reset((n, raw.strip(), m["tool"], m["args"]))  # nothing of a run yet: this command opens run 0
        else:
            self._new_run((n, raw.strip(), m["tool"], m["args"]))
        self.run_host = self.host

    def _line(self, n: int, raw: str, line: str) -> None:
        tm = _TITLE_RE.match(line)
        if tm:
            if self.title is not None or self.rows:
                self._new_run(None)
            self.title = (n, raw, tm)
            self.table = None
            return
        if self.title is not None and self.table is None:
            for key, rx in _FIELDS.items():
                fm = rx.search(line)
                if fm and key not in self.fields:
                    v: object = fm.group(1)
                    if key in ("qps", "mtu", "gid_index"):
                        v = int(fm.group(1))
                    elif key == "rdma_cm":
                        v = fm.group(1) == "ON"
                    self.fields[key] = v
        bm = _TABLE_BW_RE.match(line)
        if bm:
            self.table, self.table_rows = ("bw", bm["unit"], n), 0
            self._qos = "#sl" in line
            return
        if _TABLE_LAT_RE.match(line):
            self.table, self.table_rows = ("lat", "usec", n), 0
            return
        if _TABLE_LATDUR_RE.match(line):
            self.table, self.table_rows = ("lat_dur", "usec", n), 0
            return
        if self.table is not None:
            rm = _ROW_RE.match(line)
            if rm:
                self._row(n, raw, rm)
                return
            if _DASHES_RE.match(line) and self.table_rows:
                self.table = None
                return
            if re.match(r"^\s*\d{1,20}\s+\d{1,20}\s*$", line):
                self.problems.append(f"truncated: result row cut short (line {n}: {s_clip(line)!r})")
                return
        self._message(n, raw, line)

    def _row(self, n: int, raw: str, rm: re.Match[str]) -> None:
        assert self.table is not None
        kind, unit, _ = self.table
        nums = rm["rest"].split()
        vals = [float(x) for x in nums]
        b = int(rm["bytes"])
        base: dict[str, Any] = dict(source=self.source, line=n, text=clip(raw), host=self.run_host, run_index=self.run_index, kind=kind,
                    bytes=b, unit=unit + "/sec" if kind == "bw" and unit else unit)
        empty: dict[str, Any] = dict(bw_peak_gbps=None, bw_avg_gbps=None, msg_rate_mpps=None, t_min_us=None, t_max_us=None,
                     t_typical_us=None, t_avg_us=None, t_stdev_us=None, p99_us=None, p999_us=None)
        if kind == "bw":
            if getattr(self, "_qos", False):
                vals = vals[1:]  # the #sl column
            if len(vals) < 3:
                self.problems.append(f"truncated: result row cut short (line {n}: {s_clip(raw)!r})")
                return
            f = _BW_FACTOR[unit or "MB"]
            rec = PerftestResult(**base, iterations=int(vals[0]), **{**empty, "bw_peak_gbps": round(vals[1] * f, 6),
                                 "bw_avg_gbps": round(vals[2] * f, 6),
                                 "msg_rate_mpps": vals[3] if len(vals) > 3 else None})
        elif kind == "lat":
            if len(vals) < 4:
                self.problems.append(f"truncated: result row cut short (line {n}: {s_clip(raw)!r})")
                return
            cols = ["t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us", "p999_us"]
            rec = PerftestResult(**base, iterations=int(vals[0]),
                                 **{**empty, **dict(zip(cols, vals[1:], strict=False))})
        else:
            rec = PerftestResult(**base, iterations=int(vals[0]),
                                 **{**empty, "t_avg_us": vals[1] if len(vals) > 1 else None})
        self.rows.append(rec)
        self.table_rows += 1

    def _message(self, n: int, raw: str, line: str) -> None:
        if self.first is None:
            self.first = (n, raw.strip())
        if _WAIT_RE.search(line):
            self.waiting = True
        if _CUDA_ON_RE.match(line):
            self.use_cuda = True
        cm = _CUDA_PICK_RE.search(line)
        if cm:
            self.use_cuda = True
            self.cuda_device = int(cm["n"])
        m = _COMPL_RE.search(line)
        if m:
            if self.pending_compl is not None:
                pn, ptext, pside = self.pending_compl
                self._error(pn, ptext, "completion", side=pside)
            self.pending_compl = (n, raw, m["side"])
        sm = _STATUS_RE.search(line)
        if sm:
            side = None
            if self.pending_compl is not None and n - self.pending_compl[0] <= 3:
                side = self.pending_compl[2]
                self.pending_compl = None
            st = int(sm["st"] or sm["st2"])
            txt = sm["txt"].strip() if sm["txt"] else None
            self._error(n, raw, "completion", status=st, status_text=txt, vendor_err=int(sm["syn"], 16), side=side)
            return
        if m:
            return
        if self.pending_compl is not None and n - self.pending_compl[0] > 3:
            pn, ptext, pside = self.pending_compl
            self._error(pn, ptext, "completion", side=pside)
            self.pending_compl = None
        cm2 = _CONNECT_RE.search(line)
        if cm2:
            self._error(n, raw, "connect", detail=f"{cm2['host']}:{cm2['port']}")
            return
        if _SOCKET_RE.search(line):
            self._error(n, raw, "socket")
            return
        mm = _MODIFY_RE.search(line)
        if mm:
            self._error(n, raw, "modify_qp", detail=mm["state"])
            return
        mr = _MR_RE.search(line)
        if mr:
            if not self.has_mr:
                self.has_mr = True
                self._error(n, raw, "mr", detail=mr["err"])
            return
        if _MTU_LOW_RE.search(line):
            self._error(n, raw, "mtu_lowered")
            self.pending_mtu = len(self.errors) - 1
            return
        am = _MTU_ACTIVE_RE.search(line)
        if am and self.pending_mtu is not None:
            e = self.errors[self.pending_mtu]
            self.errors[self.pending_mtu] = _replace_detail(e, str(256 << (int(am["n"]) - 1)))
            self.pending_mtu = None
            return
        if _CPU_RE.search(line):
            self._error(n, raw, "cpu_freq")
            return
        if _CUDA_ERR_RE.search(line):
            self._error(n, raw, "cuda")
            return
        if _SETUP_RE.search(line):
            self._error(n, raw, "setup")


def s_clip(s: str, n: int = 60) -> str:
    s = s.strip()
    return s if len(s) <= n else s[:n]


def _with_cuda(e: PerftestError, use_cuda: bool) -> PerftestError:
    return PerftestError(source=e.source, line=e.line, text=e.text, host=e.host, run_index=e.run_index, kind=e.kind,
                         status=e.status, status_text=e.status_text, vendor_err=e.vendor_err, side=e.side,
                         detail=e.detail, use_cuda=use_cuda)


def _replace_detail(e: PerftestError, detail: str) -> PerftestError:
    return PerftestError(source=e.source, line=e.line, text=e.text, host=e.host, run_index=e.run_index, kind=e.kind,
                         status=e.status, status_text=e.status_text, vendor_err=e.vendor_err, side=e.side,
                         detail=detail, use_cuda=e.use_cuda)
