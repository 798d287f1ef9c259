"""nccl-tests stdout (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``, ``alltoall_perf``,
``broadcast_perf``, ``reduce_perf``, ``sendrecv_perf``, ...), possibly interleaved with NCCL INFO/WARN lines.

Layout (NVIDIA/nccl-tests ``src/util.cu``)::

    # nccl-tests version 2.17.6 nccl-headers=22803 nccl-library=22803      (newer releases)
    # Collective test starting: all_reduce_perf                             (newer releases)
    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ...
    # Using devices
    #  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3
    #       size    count   type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
               8        2  float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 70.742

Older releases omit ``Group``, the ``redop``/``root`` columns, and print ``#wrong`` as ``0e+00``; pasted
output often lost the leading ``#`` of the first lines. A run starts at the ``# nThread`` header; a ``Rank`` or
table-header line after a finished run (or with no run yet) starts an implicit run whose header fields are None.
Pure: no I/O, never raises.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip, positional_maker
from diagnose.parsers._dates import name_date, parse_date

FORMAT = "nccl_tests"
# Parsed whole, even when large (up to LoadLimits.max_file_bytes; beyond, its head and tail): a run's header,
# device lines and table must stay together, and runs are numbered within the text parsed. Cut into chunks, a
# chunk's first rows would make a run of their own and every chunk would number its runs from 0 again.
STREAMABLE = False
MIXABLE = True

# ----------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRun(Record):
    """One nccl-tests run (one ``# nThread`` header). ``when`` (ISO 8601) dates it: nccl-tests prints no date, so it
    is the last ``date`` line (``Tue Oct  6 15:00:01 UTC 2026``, ``Start: ...``, ``date -Is``) a job script printed
    before the run, else the file's first such line, else a date in the file name (``allreduce_2026-10-01.log``)."""

    collective: str | None
    nthread: int | None
    ngpus: int | None
    min_bytes: int | None
    max_bytes: int | None
    run_index: int
    when: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRank(Record):
    """A ``#  Rank r Group g Pid p on <host> device d [bus] <gpu>`` line."""

    run_index: int
    rank: int
    group: int | None
    pid: int | None
    device: int | None
    bus: str | None
    gpu_name: str | None


_make_rank = positional_maker(NcclTestsRank)


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRow(Record):
    """One message size: out-of-place and in-place time / algbw / busbw / #wrong."""

    run_index: int
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    oop_time_us: float | None
    oop_algbw: float | None
    oop_busbw: float | None
    oop_wrong: int | None
    ip_time_us: float | None
    ip_algbw: float | None
    ip_busbw: float | None
    ip_wrong: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsSummary(Record):
    """The run footer."""

    run_index: int
    avg_busbw: float | None
    out_of_bounds: int | None


COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
    "alltoallv",
)

# ----------------------------------------------------------------------------------------------------------------
# Patterns

_LEAD = r"^(?:\[\d+,\d+\]<std(?:out|err)>:\s?|\s{0,4}\d{1,6}: )?"  # OpenMPI --tag-output, srun -l
_VERSION_RE = re.compile(_LEAD + r"\s*(?:#\s*)?nccl-tests version\b")
_STARTING_RE = re.compile(_LEAD + r"\s*(?:#\s*)?Collective test starting:\s*(?P<prog>\S+)")
_CONCLUDED_RE = re.compile(_LEAD + r"\s*(?:#\s*)?Collective test concluded:\s*(?P<prog>\S+)")
_NTHREAD_RE = re.compile(
    _LEAD + r"\s*(?:#\s*)?nThread\s+(?P<nthread>\d{1,9})\s+nGpus\s+(?P<ngpus>\d{1,9})"
    r"(?:\s+minBytes\s+(?P<min>\d{1,20}))?(?:\s+maxBytes\s+(?P<max>\d{1,20}))?"
)
_RANK_RE = re.compile(
    _LEAD + r"\s*(?:#\s*)?Rank\s+(?P<rank>\d{1,9})(?:\s+Group\s+(?P<group>\d{1,9}))?\s+Pid\s+(?P<pid>\d{1,10})"
    r"\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d{1,6})(?:\s+\[(?P<bus>[^\]]{0,40})\])?\s*(?P<gpu>.*)$"
)
_HEADER_RE = re.compile(_LEAD + r"\s*#\s*size\s+count\s+type\b(?P<rest>.*)$")
_UNITS_RE = re.compile(_LEAD + r"\s*#\s*\(B\)\s+\(elements\)")
_OOB_RE = re.compile(_LEAD + r"\s*#\s*Out of bounds values\s*:\s*(?P<n>\d{1,18})")
_AVG_RE = re.compile(_LEAD + r"\s*#\s*Avg bus bandwidth\s*:\s*(?P<bw>\S+)")
_ROW_START_RE = re.compile(_LEAD + r"\s*(?P<size>\d{1,20})\s+(?P<count>\d{1,20})\s+(?P<rest>.*)$")
_PROG_RE = re.compile(r"\b(?P<coll>" + "|".join(sorted(COLLECTIVES, key=len, reverse=True)) + r")_perf\w*\b")
_IDENT_RE = re.compile(r"^[A-Za-z_]\w*$")
_NUM_ONLY_RE = re.compile(_LEAD + r"\s*\d{1,20}\s*$")
_NCCL_LINE_RE = re.compile(r" NCCL (?:INFO|WARN|TRACE|CALL)\b")
# a job script's `date` output, bare or labelled ("Start: ...", "# Date: ...", "+ date" then its output)
_DATE_LINE_RE = re.compile(
    _LEAD + r"\s*(?:[#+]\s*)?(?:(?:date|start(?:ed)?(?: at| time| date)?|begin|run (?:date|started)|time(?:stamp)?"
    r"|end(?:ed)?(?: at| time)?|finish(?:ed)?(?: at)?)\s*[:=]?\s*)?"
    r"(?P<d>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b.*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*)$", re.I)

_DTYPES = {
    "int8",
    "uint8",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "half",
    "float",
    "double",
    "bfloat16",
    "f8e4m3",
    "f8e5m2",
    "fp8_e4m3",
    "fp8_e5m2",
    "char",
    "int",
    "float16",
    "float32",
    "float64",
    "bf16",
    "fp16",
}
_TIME_COLS = ("time", "cputime")


def _int(s: str | None) -> int | None:
    if s is None:
        return None
    s = s.strip()
    if not s or len(s) > 20:
        return None
    try:
        return int(s)
    except ValueError:
        return None


def _float(s: str | None) -> float | None:
    if s is None:
        return None
    s = s.strip()
    if not s or len(s) > 40:
        return None
    try:
        f = float(s)
    except ValueError:
        return None
    return f if math.isfinite(f) else None  # inf or nan measures nothing (and no rule may compare with it)


_CELLS = ("out-of-place time", "out-of-place algbw", "out-of-place busbw", "out-of-place #wrong", "in-place time",
          "in-place algbw", "in-place busbw", "in-place #wrong")


def _not_finite(s: str) -> bool:
    """``inf``, ``nan`` or a number beyond a float (``1e999``): a number, but none a measurement can be."""
    try:
        return not math.isfinite(float(s))
    except ValueError:
        return False


def _wrong(s: str | None) -> int | None:
    """``#wrong``: an int, ``%6g`` float (``0e+00``) or ``N/A`` (validation off) -> None."""
    if s is None or s.upper() == "N/A":
        return None
    v = _int(s)
    if v is not None:
        return v
    f = _float(s)
    if f is None or not math.isfinite(f):
        return None
    return int(f)


def _collective(prog: str) -> str | None:
    m = _PROG_RE.search(prog)
    return m.group("coll") if m else None


# ----------------------------------------------------------------------------------------------------------------
# Sniff

_SNIFF_HEADER_RE = re.compile(
    r"^\s*#\s*size\s+count\s+type\s+(?:redop\s+)?(?:root\s+)?(?:cpu)?time\s+algbw\s+busbw", re.MULTILINE
)
_SNIFF_NTHREAD_RE = re.compile(r"^\s*(?:#\s*)?nThread\s+\d+\s+nGpus\s+\d+\s+minBytes\s+\d+", re.MULTILINE)
_SNIFF_RANK_RE = re.compile(
    r"^\s*#\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S+\s+device\s+\d+", re.MULTILINE
)
_SNIFF_FOOTER_RE = re.compile(r"^\s*#\s*(?:Avg bus bandwidth|Out of bounds values)\s*:", re.MULTILINE)


def sniff(head: str) -> int:
    try:
        if _SNIFF_HEADER_RE.search(head):
            return 95
        if _SNIFF_NTHREAD_RE.search(head):
            return 90
        score = 0
        if _SNIFF_RANK_RE.search(head):
            score = 60
        if _SNIFF_FOOTER_RE.search(head):
            score = 75 if score else 60
        return score
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------------------
# Parse


@dataclass(slots=True)
class _Run:
    index: int
    line: int
    raw: str
    collective: str | None
    nthread: int | None
    ngpus: int | None
    min_bytes: int | None
    max_bytes: int | None
    slot: int  # position of the run record in the output list
    closed: bool = False
    has_header: bool = False
    n_rows: int = 0
    n_pre: int | None = None  # columns before the first time column (5 = size count type redop root)
    layout: list[str] = field(default_factory=list)
    summary_pending: tuple[int, str, int | None] | None = None
    has_summary: bool = False


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        _parse_into(text, source, host, records, problems)
    except Exception as exc:  # pragma: no cover - never raise: keep what was parsed, report it
        problems.append(f"nccl_tests parser stopped early: {type(exc).__name__}: {exc}")
        records[:] = [r for r in records if isinstance(r, Record)]
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _parse_into(text: str, source: str, host: str | None, records: list, problems: list[str]) -> None:
    raw_lines = text.split("\n")
    ends_with_newline = bool(raw_lines) and raw_lines[-1] == ""
    if ends_with_newline:
        raw_lines.pop()
    runs: list[_Run] = []
    run: _Run | None = None
    pending_collective: str | None = None
    dates: list[tuple[int, str]] = []  # (line, ISO date) of the job script's `date` lines

    def finish(r: _Run | None) -> None:
        if r is None:
            return
        flush_summary(r)
        records[r.slot] = NcclTestsRun(
            source=source,
            line=r.line,
            text=clip(r.raw),
            host=host,
            collective=r.collective,
            nthread=r.nthread,
            ngpus=r.ngpus,
            min_bytes=r.min_bytes,
            max_bytes=r.max_bytes,
            run_index=r.index,
        )

    def flush_summary(
        r: _Run, avg: float | None = None, line: int | None = None, raw: str | None = None
    ) -> None:
        if r.summary_pending is None and line is None:
            return
        oob = None
        if r.summary_pending is not None:
            pl, praw, oob = r.summary_pending
            if line is None:
                line, raw = pl, praw
        r.summary_pending = None
        r.has_summary = True
        r.closed = True
        records.append(
            NcclTestsSummary(
                source=source,
                line=line or 0,
                text=clip(raw or ""),
                host=host,
                run_index=r.index,
                avg_busbw=avg,
                out_of_bounds=oob,
            )
        )

    def start_run(line_no: int, raw: str, **kw: int | None) -> _Run:
        nonlocal run, pending_collective
        finish(run)
        r = _Run(
            index=len(runs),
            line=line_no,
            raw=raw,
            collective=pending_collective,
            slot=len(records),
            nthread=kw.get("nthread"),
            ngpus=kw.get("ngpus"),
            min_bytes=kw.get("min_bytes"),
            max_bytes=kw.get("max_bytes"),
        )
        records.append(None)  # placeholder, filled by finish()
        runs.append(r)
        run = r
        pending_collective = None
        return r

    for idx, raw in enumerate(raw_lines):
        line_no = idx + 1
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if _NCCL_LINE_RE.search(line):
            continue  # interleaved NCCL INFO/WARN output belongs to the NCCL log parser

        # a device line first: thousands of them at scale (one per rank), and no other shape starts with "Rank"
        m = _RANK_RE.match(line) if "Rank" in line else None
        if m:
            if run is None or run.closed:
                start_run(line_no, raw)
            assert run is not None
            rank_s, group_s, pid_s, host_s, dev_s, bus, gpu = m.group("rank", "group", "pid", "host", "dev", "bus", "gpu")
            # (the fields in order: source, line, text, host, run_index, rank, group, pid, device, bus, gpu_name;
            # the groups are runs of at most 10 digits, which int() reads as _int() would)
            records.append(_make_rank(
                source, line_no, clip(raw), host_s or host, run.index, int(rank_s) or 0,
                int(group_s) if group_s else None, int(pid_s), int(dev_s), bus or None, gpu.strip() or None,
            ))
            continue
        m = _STARTING_RE.match(line)
        if m:
            if run is not None and not run.closed:
                _finish_open(run, problems)
            finish(run)
            run = None
            pending_collective = _collective(m.group("prog"))
            continue
        if _VERSION_RE.match(line):
            continue
        m = _CONCLUDED_RE.match(line)
        if m:
            if run is not None and run.collective is None:
                run.collective = _collective(m.group("prog"))
            continue
        m = _NTHREAD_RE.match(line)
        if m:
            if run is not None and not run.closed:
                _finish_open(run, problems)
            start_run(
                line_no,
                raw,
                nthread=_int(m.group("nthread")),
                ngpus=_int(m.group("ngpus")),
                min_bytes=_int(m.group("min")),
                max_bytes=_int(m.group("max")),
            )
            continue
        m = _HEADER_RE.match(line)
        if m:
            if run is None or run.closed:
                start_run(line_no, raw)
            assert run is not None
            cols = ["size", "count", "type"] + m.group("rest").split()
            run.layout = cols
            run.has_header = True
            run.n_pre = next((k for k, c in enumerate(cols) if c in _TIME_COLS), None)
            continue
        if _UNITS_RE.match(line):
            continue
        m = _OOB_RE.match(line)
        if m:
            if run is None:
                problems.append(f"line {line_no}: summary line outside any nccl-tests run")
                continue
            run.summary_pending = (line_no, raw, _int(m.group("n")))
            continue
        m = _AVG_RE.match(line)
        if m:
            if run is None:
                problems.append(f"line {line_no}: summary line outside any nccl-tests run")
                continue
            flush_summary(run, _float(m.group("bw")), line_no, raw)
            continue
        m = _ROW_START_RE.match(line)
        if m:
            tokens = m.group("rest").split()
            if run is None or run.closed:
                if not tokens or tokens[0] not in _DTYPES:
                    continue  # a line that merely starts with two numbers
                start_run(line_no, raw)
            assert run is not None
            if not tokens or not _IDENT_RE.match(tokens[0]):
                if run.has_header:
                    problems.append(f"line {line_no}: truncated nccl-tests row: {line.strip()[:80]}")
                continue
            _row(
                run,
                m,
                line_no,
                raw,
                source,
                host,
                records,
                problems,
                maybe_cut=(idx == len(raw_lines) - 1 and not ends_with_newline),
            )
            continue
        if run is not None and run.has_header and not run.closed and _NUM_ONLY_RE.match(line):
            problems.append(f"line {line_no}: truncated nccl-tests row: {line.strip()[:80]}")
            continue
        if len(line) <= 90:
            dm = _DATE_LINE_RE.match(line)
            if dm:
                iso = parse_date(dm["d"])
                if iso:
                    dates.append((line_no, iso))
                    continue
        m = _PROG_RE.search(line)
        if m and not line.lstrip().startswith("#"):
            # a command line naming the test binary: remember it for the next run
            if run is None or run.closed:
                pending_collective = m.group("coll")
            elif run.collective is None and not run.n_rows:
                run.collective = m.group("coll")
    if run is not None and not run.closed:
        _finish_open(run, problems)
    finish(run)
    records[:] = [r for r in records if r is not None]
    _date_runs(records, dates, source)


def _date_runs(records: list, dates: list[tuple[int, str]], source: str) -> None:
    """Stamp each run with its date (see :class:`NcclTestsRun`)."""
    fallback = dates[0][1] if dates else name_date(source)
    if fallback is None:
        return
    for k, r in enumerate(records):
        if isinstance(r, NcclTestsRun):
            before = [iso for ln, iso in dates if ln < r.line]
            records[k] = dataclasses.replace(r, when=before[-1] if before else fallback)


def _finish_open(run: _Run, problems: list[str]) -> None:
    if run.summary_pending is None and not run.has_summary and (run.n_rows or run.has_header):
        problems.append(
            f"run {run.index}: no '# Avg bus bandwidth' footer (output truncated or the test aborted)"
        )


def _row(
    run: _Run,
    m: re.Match[str],
    line_no: int,
    raw: str,
    source: str,
    host: str | None,
    records: list,
    problems: list[str],
    maybe_cut: bool,
) -> None:
    size = _int(m.group("size"))
    count = _int(m.group("count"))
    tokens = m.group("rest").split()
    if size is None or count is None or not tokens:
        problems.append(f"line {line_no}: truncated nccl-tests row")
        return
    dtype = tokens[0]
    rest = tokens[1:]
    # columns between type and the first time column: redop and/or root (from the header, else guessed)
    if run.n_pre is not None:
        n_extra = max(0, run.n_pre - 3)
        extra_names = run.layout[3 : run.n_pre]
    else:
        extra_names = []
        if rest and _float(rest[0]) is None and rest[0].upper() != "N/A":
            extra_names.append("redop")
            if len(rest) > 1 and _int(rest[1]) is not None:
                extra_names.append("root")
        n_extra = len(extra_names)
    redop: str | None = None
    root: int | None = None
    for name, tok in zip(extra_names, rest[:n_extra], strict=False):
        if name == "redop":
            redop = tok
        elif name == "root":
            root = _int(tok)
    vals = rest[n_extra:]
    truncated = len(vals) < 8
    if truncated and maybe_cut and vals:
        vals = vals[:-1]  # the last cell of a line cut mid-way may itself be incomplete
    # a row glued to other output (stdout/stderr interleaving) has non-numeric garbage in its cells
    nums = [_wrong(v) if k in (3, 7) else _float(v) for k, v in enumerate(vals[:8])]
    for k, v in enumerate(vals[:8]):
        if _not_finite(v):  # one cell left out, not the rest of the row
            shown = v if len(v) <= 24 else f"{v[:12]}...({len(v)} characters)"
            problems.append(f"line {line_no}: {_CELLS[k]} {shown!r} is not a finite number: not read")
            vals[k] = "N/A"
    if any(v is None and vals[k].upper() != "N/A" for k, v in enumerate(nums)):
        truncated = True
        for k, v in enumerate(nums):
            if v is None and vals[k].upper() != "N/A":
                nums = nums[:k]
                break
    nums = nums + [None] * (8 - len(nums))
    if truncated:
        problems.append(f"line {line_no}: truncated nccl-tests row (size {size}); parsed the cells present")
    records.append(
        NcclTestsRow(
            source=source,
            line=line_no,
            text=clip(raw),
            host=host,
            run_index=run.index,
            size_bytes=size,
            count=count,
            dtype=dtype,
            redop=redop,
            root=root,
            oop_time_us=nums[0],
            oop_algbw=nums[1],
            oop_busbw=nums[2],
            oop_wrong=_as_int(nums[3]),
            ip_time_us=nums[4],
            ip_algbw=nums[5],
            ip_busbw=nums[6],
            ip_wrong=_as_int(nums[7]),
        )
    )
    run.n_rows += 1


def _as_int(v: float | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except (ValueError, OverflowError):
        return None
