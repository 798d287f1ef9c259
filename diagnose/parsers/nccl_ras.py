"""NCCL RAS reports (``ncclras``, ``echo verbose status | nc localhost 28028``): text, JSON (``-f json``, NCCL >= 2.28.7)
and monitor mode (``-m``, NCCL >= 2.29), as printed by NCCL ``src/ras/client_support.cc``.

Text shape::

    NCCL version 2.26.2 compiled with CUDA 12.6
    CUDA runtime version 12060, driver version 12060

    Job summary
    ===========

      Nodes  Processes         GPUs  Processes     GPUs
    (total)   per node  per process    (total)  (total)
          4          8            1         32       32

    Communicators... (0.00s)
    =============

    Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
        #  in group  per comm  per node  per comm  in group
        0         1         4         8        32        32   RUNNING  MISMATCH

    Errors
    ======

    INCOMPLETE
      Missing communicator data from 1 job process
      Process 3487984 on node 172.16.64.213 managing GPU 5

    Warnings
    ========

    #0-0 (fa93daea854b060b) MISMATCH
      Communicator ranks have different AllGather operation counts
      30 ranks have launched up to operation 640
      2 ranks have launched up to operation 641
      Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124

Tables are read by their header words, not by column positions (the widths changed between releases). Every
``Process ... on node ...`` / ``Rank ... -- GPU ... managed by process ... on node ...`` / ``The missing rank(s): ...``
line becomes a :class:`~diagnose.parsers._job.RasRank` whose ``status`` comes from its entry (``missing``, ``dead``)
or from the group line above it (``26 ranks have status UNKNOWN`` -> ``status UNKNOWN``, ``launched up to operation
641 (AllGather)``, ``async error: Remote process error``); each entry and table row also becomes a
:class:`~diagnose.parsers._job.RasSummary` (keys listed on that class).

JSON objects in the file (a status dump or monitor events) are decoded; the missing comma NCCL 2.28.7-2.28.9 print
after ``"nvml_dev"`` of a missing rank is repaired, a truncated object is closed and reported. Monitor text events
``[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1`` become ranks with the event
as status. Lines of other tools mixed into the capture are ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._job import RasRank, RasSummary, norm_comm_hash
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "nccl_ras"
MIXABLE = True

_VERSION_RE = re.compile(r"^\s*NCCL version (\S+) compiled with CUDA (\S+)")
_CUDA_RE = re.compile(r"^\s*CUDA runtime version (-?\d+), driver version (-?\d+)")
_JOBHDR_RE = re.compile(r"^\s*(?:(?:Nodes|Processes|GPUs)\s*)+$")
_NUMROW_RE = re.compile(r"^\s*\d+(?:\s+\d+)*\s*$")
_OUTLIER_HDR_RE = re.compile(r"^\s*The outlier nodes?:\s*$")
_OUTLIER_RE = re.compile(r"^\s*Node (\S+) running process(?:es)? ([\d,]+)")
_COMMS_RE = re.compile(r"^\s*Communicators\.\.\.(?:\s*\(\s*([\d.]+)\s*s\))?")
_COMMHDR_RE = re.compile(r"^\s*Group\s+Comms\s+Nodes\s+Ranks")
_COMMROW_RE = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z]+(?:,[A-Z]+)*)\s*$"
)
_ENTRY_COMM_RE = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) ([A-Z]+(?:,[A-Z]+)*)\s*$")
_ENTRY_JOB_RE = re.compile(r"^([A-Z][A-Z_]+)\s*$")
_PROCESS_RE = re.compile(r"^\s*Process (\d+) on node (\S+) managing GPUs? (\d+)")
_RANK_RE = re.compile(
    r"^\s*Rank (\d+)"
    r"(?: has status (?P<status>\S+)| has launched up to operation (?P<op>\d+)"
    r"| (?P<noop>has not launched any operations)| reported (?P<err>.+?))?"
    r" -- (?:GPU (?P<gpu>\d+)(?: \(NVML \d+\))? managed by process (?P<pid>\d+) on node (?P<node>\S+)"
    r"|\[process information not found\])\s*$"
)
_MISSING_RANKS_RE = re.compile(r"^\s*The missing ranks?: ([\d,\s]+)$")
_GRP_STATUS_RE = re.compile(r"^\s*\d+ ranks have status (\S+)")
_GRP_OP_RE = re.compile(r"^\s*\d+ ranks have launched up to operation (\d+)")
_GRP_NOOP_RE = re.compile(r"^\s*\d+ ranks have not launched any operations")
_GRP_ERR_RE = re.compile(r"^\s*\d+ ranks reported (.+?)\s*$")
_OPTYPE_RE = re.compile(r"^\s*Communicator ranks have different (\w+) operation counts")
_ERRCTX_RE = re.compile(r"^\s*(Initialization|Asynchronous) errors? on \d+ ranks?")
_MONITOR_BANNER_RE = re.compile(r"^\s*RAS Monitor Mode\b")
_EVENT_RE = re.compile(r"^\s*\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] ([A-Z][A-Z_]+): (.*)$")
_EVENT_PEER_RE = re.compile(r"^Process (\d+) on node (\S+) managing GPUs? (\d+)")
_EVENT_ADDR_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[\w.:-]+?)<(\d+)>")

_JOB_KEYS = {
    "Nodes (total)": "nodes",
    "Processes per node": "processes_per_node",
    "GPUs per process": "gpus_per_process",
    "Processes (total)": "processes",
    "GPUs (total)": "gpus",
}
_ENTRY_STATUS = {"INCOMPLETE": "missing", "DEAD": "dead"}


# ----------------------------------------------------------------------------------------------------- sniff

_SN_TEXT = (
    re.compile(r"^\s*Job summary\s*\n\s*={5,}", re.MULTILINE),
    re.compile(r"^\s*Communicators\.\.\.", re.MULTILINE),
    re.compile(r"^\s*Group\s+Comms\s+Nodes\s+Ranks\s+Ranks\s+Ranks\s+Status\s+Errors", re.MULTILINE),
    re.compile(r"^#\d+-\d+ \([0-9a-f]{16}\) (?:INCOMPLETE|MISMATCH|ERROR)", re.MULTILINE),
    re.compile(
        r"^\s*(?:Missing communicator data from \d+|\d+ job process(?:es are| is) considered dead)", re.MULTILINE
    ),
    re.compile(r"^\s*RAS Monitor Mode - watching", re.MULTILINE),
    re.compile(r"^\s*\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] PEER_[A-Z_]+: ", re.MULTILINE),
)
_SN_JSON = (
    re.compile(r'"communicators_count"\s*:'),
    re.compile(r'"missing_ranks(?:_count)?"\s*:'),
    re.compile(r'"collective_counts"\s*:'),
    re.compile(r'"event"\s*:\s*"PEER_[A-Z_]+"'),
)


def sniff(head: str) -> int:
    try:
        text_hits = sum(1 for r in _SN_TEXT if r.search(head))
        json_hits = sum(1 for r in _SN_JSON if r.search(head))
        if json_hits and '"nccl_version"' in head:
            json_hits += 1
        if '"group"' in head and re.search(r'"group"\s*:\s*"(?:LIFECYCLE|TRACE)"', head):
            json_hits += 1
        hits = text_hits + json_hits
        if hits >= 2:
            return 95 if hits >= 3 else 85
        if hits == 1:
            return 70
        return 0
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------- JSON


def _json_blocks(lines: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each top-level JSON object starting with ``{`` at the start of a line."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        n, line = lines[i]
        if not line.lstrip().startswith("{"):
            i += 1
            continue
        depth, in_str, esc = 0, False, False
        buf: list[str] = []
        j = i
        done = False
        while j < len(lines):
            seg = lines[j][1]
            buf.append(seg)
            for ch in seg:
                if in_str:
                    if esc:
                        esc = False
                    elif ch == "\\":
                        esc = True
                    elif ch == '"':
                        in_str = False
                elif ch == '"':
                    in_str = True
                elif ch in "{[":
                    depth += 1
                elif ch in "}]":
                    depth -= 1
            if depth <= 0:
                done = True
                break
            j += 1
        last = lines[min(j, len(lines) - 1)][0]
        out.append((n, last if done else lines[-1][0], "\n".join(buf)))
        i = j + 1
    return out


_MISSING_COMMA_RE = re.compile(r'([0-9"el\]}])([ \t]*\n[ \t]*")')


def _scan_json(text: str, stop: int | None = None) -> tuple[list[bool], list[str]]:
    """Whether each line ends inside a string, and the closers still open after line ``stop`` (or the last)."""
    ends_in_string: list[bool] = []
    stack: list[str] = []
    in_str = esc = False
    for k, line in enumerate(text.split("\n")):
        for ch in line:
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch in "{[":
                stack.append("}" if ch == "{" else "]")
            elif ch in "}]" and stack:
                stack.pop()
        ends_in_string.append(in_str)
        if stop is not None and k == stop:
            break
    return ends_in_string, stack


def _close_truncated(text: str) -> str:
    """Cut a truncated JSON text after its last complete line and close the brackets still open there."""
    lines = text.split("\n")
    inside, _stack = _scan_json(text)
    for k in range(len(lines) - 1, -1, -1):
        body = lines[k].rstrip()
        if inside[k] or not re.search(r'[0-9"el\]}\[{,]$', body):
            continue
        _inside, closers = _scan_json(text, stop=k)
        head = "\n".join(lines[:k] + [body]).rstrip().rstrip(",")
        return head + "".join(reversed(closers))
    return "{}"


def _load_json(text: str) -> tuple[Any, str | None]:
    """(object, note): note is None, 'repaired' (missing commas) or 'truncated'; object None when unusable."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError):
        pass
    fixed = _MISSING_COMMA_RE.sub(r"\1,\2", text)
    try:
        return json.loads(fixed), "repaired"
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(_close_truncated(fixed)), "truncated"
    except (ValueError, RecursionError):
        return None, None


def _json_rank_status(status: dict[str, Any], missing: bool) -> str:
    if missing:
        if status.get("considered_dead"):
            return "dead"
        if status.get("unresponsive"):
            return "not responding"
        return "missing"
    if status.get("abort_flag"):
        return "abort"
    init = status.get("init_state", 0)
    asyn = status.get("async_error", 0)
    if isinstance(asyn, int) and asyn not in (0, 7):
        return f"async error {asyn}"
    if isinstance(init, int) and init not in (0, 7):
        return f"init error {init}"
    if status.get("finalize_called") or status.get("destroy_flag"):
        return "finalize"
    if init == 7:
        return "init in progress"
    return "running"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _as_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _json_records(obj: Any, start: int, block: str, source: str, host: str | None, records: list[Record]) -> None:
    lines = block.split("\n")

    def line_of(pattern: re.Pattern[str], after: int = 0) -> int:
        for k in range(after, len(lines)):
            if pattern.search(lines[k]):
                return k
        return after

    def summ(key: str, value: Any, k: int) -> None:
        raw = re.search(rf'"{re.escape(key.rsplit(".", 1)[-1])}"\s*:\s*(-?[\d.]+)\s*,?\s*$', lines[k])
        text_value = raw.group(1) if raw and isinstance(value, (int, float)) else str(value)
        records.append(
            RasSummary(source=source, line=start + k, text=clip(lines[k]), host=host, key=key, value=text_value)
        )

    if not isinstance(obj, dict):
        return
    if "event" in obj:
        peer = _dict(obj.get("peer"))
        devs = _list(peer.get("cuda_devs"))
        node = peer.get("host")
        if node is None and isinstance(peer.get("addr"), str):
            m = _EVENT_ADDR_RE.match(peer["addr"])
            node = m.group(1).strip("[]") if m else peer["addr"]
        k = line_of(re.compile(r'"event"\s*:'))
        records.append(
            RasRank(
                source=source,
                line=start + k,
                text=clip(lines[k]),
                host=node if isinstance(node, str) else host,
                rank=None,
                comm=None,
                gpu=_as_int(devs[0]) if len(devs) == 1 else None,
                pid=_as_int(peer.get("pid")),
                status=str(obj.get("event")),
            )
        )
        return
    for key in ("nccl_version", "cuda_runtime_version", "cuda_driver_version", "timestamp", "communicators_count"):
        if key in obj:
            summ(key, obj[key], line_of(re.compile(rf'"{key}"\s*:')))
    ras = _dict(obj.get("ras"))
    for key in ("collection_time_sec", "timeouts_count"):
        if key in ras:
            summ(key, ras[key], line_of(re.compile(rf'"{key}"\s*:')))
    rank_lines = [k for k, ln in enumerate(lines) if re.search(r'"rank"\s*:', ln)]
    ri = 0
    pos = 0
    comms = _list(obj.get("communicators"))
    for comm in comms:
        if not isinstance(comm, dict):
            continue
        h = norm_comm_hash(str(comm.get("hash", ""))) or str(comm.get("hash"))
        pos = line_of(re.compile(r'"hash"\s*:'), pos)
        for key in ("secondary_hash", "size", "ranks_count", "missing_ranks_count"):
            if key in comm:
                summ(f"comm.{h}.{key}", comm[key], line_of(re.compile(rf'"{key}"\s*:'), pos))
        pos += 1
        for missing, lst in ((False, comm.get("ranks")), (True, comm.get("missing_ranks"))):
            for r in _list(lst):
                if not isinstance(r, dict):
                    continue
                k = rank_lines[ri] if ri < len(rank_lines) else pos
                ri += 1
                status = _dict(r.get("status"))
                counts = _dict(r.get("collective_counts"))
                records.append(
                    RasRank(
                        source=source,
                        line=start + k,
                        text=clip(lines[k]),
                        host=r["host"] if isinstance(r.get("host"), str) else host,
                        rank=_as_int(r.get("rank")),
                        comm=h,
                        gpu=_as_int(r.get("cuda_dev")),
                        pid=_as_int(r.get("pid")),
                        status=_json_rank_status(status, missing),
                        collective_counts=tuple((str(op), c) for op, c in counts.items() if _as_int(c) is not None),
                    )
                )


# ----------------------------------------------------------------------------------------------------- text


@dataclass
class _Entry:
    section: str  # error | warning
    kind: str
    comm: str | None
    line: int
    text: str
    details: list[str] = field(default_factory=list)
    ctx: str | None = None
    optype: str | None = None
    errctx: str | None = None


def _entry_status(e: _Entry, explicit: str | None) -> str:
    if explicit is not None:
        return explicit
    if e.ctx is not None:
        return e.ctx
    return _ENTRY_STATUS.get(e.kind.split(",")[0], e.kind.lower())


def _op_status(e: _Entry, base: str) -> str:
    return f"{base} ({e.optype})" if e.optype else base


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    lines = list(iter_lines(text))
    json_lines: set[int] = set()
    for first, last, block in _json_blocks(lines):
        obj, note = _load_json(block)
        if obj is None:
            if re.search(r'"(?:communicators|nccl_version|missing_ranks)"\s*:', block):
                problems.append(f"line {first}: unparseable JSON report")
            continue  # otherwise not JSON after all (e.g. a brace in prose)
        if not isinstance(obj, dict) or not (
            {"communicators", "communicators_count", "nccl_version", "event"} & obj.keys()
        ):
            continue
        json_lines.update(range(first, last + 1))
        if note == "truncated":
            problems.append(f"truncated: JSON report starting at line {first} ends early (closed for parsing)")
        _json_records(obj, first, block, source, host, records)

    def summ(n: int, line: str, key: str, value: str) -> None:
        records.append(RasSummary(source=source, line=n, text=clip(line), host=host, key=key, value=value))

    section: str | None = None
    entry: _Entry | None = None
    seen: set[str] = set()
    idx = 0

    def close_entry() -> None:
        nonlocal entry
        if entry is not None:
            key = f"{entry.section}.{entry.kind}" + (f".{entry.comm}" if entry.comm else "")
            summ(entry.line, entry.text, key, "; ".join(entry.details))
        entry = None

    while idx < len(lines):
        n, line = lines[idx]
        idx += 1
        if n in json_lines or not line.strip():
            continue
        s = line.strip()
        m = _VERSION_RE.match(line)
        if m:
            summ(n, line, "nccl_version", m.group(1))
            summ(n, line, "cuda_compiled_version", m.group(2))
            continue
        m = _CUDA_RE.match(line)
        if m:
            summ(n, line, "cuda_runtime_version", m.group(1))
            summ(n, line, "cuda_driver_version", m.group(2))
            continue
        if s == "Job summary":
            close_entry()
            section = "job"
            seen.add("job")
            continue
        if _MONITOR_BANNER_RE.match(line):
            summ(n, line, "monitor", s)
            continue
        m = _EVENT_RE.match(line)
        if m:
            rest = m.group(3)
            pm = _EVENT_PEER_RE.match(rest)
            am = _EVENT_ADDR_RE.match(rest)
            node = pm.group(2) if pm else (am.group(1).strip("[]") if am else None)
            records.append(
                RasRank(
                    source=source,
                    line=n,
                    text=clip(line),
                    host=node or host,
                    rank=None,
                    comm=None,
                    gpu=int(pm.group(3)) if pm else None,
                    pid=int(pm.group(1)) if pm else None,
                    status=m.group(2),
                )
            )
            continue
        m = _COMMS_RE.match(line)
        if m:
            close_entry()
            section = "comms"
            seen.add("comms")
            if m.group(1):
                summ(n, line, "collection_time_sec", m.group(1))
            continue
        if s == "No communicator data collected!":
            summ(n, line, "communicators", "none collected")
            seen.add("table")
            continue
        if s in ("Errors", "Warnings") and (idx >= len(lines) or set(lines[idx][1].strip()) <= {"="}):
            close_entry()
            section = "error" if s == "Errors" else "warning"
            seen.add(section)
            continue
        if set(s) == {"="}:
            continue
        if section == "job":
            if _JOBHDR_RE.match(line) and idx < len(lines):
                h1 = s.split()
                h2 = re.findall(r"\(total\)|per \w+", lines[idx][1])
                idx += 1
                if len(h2) == len(h1):
                    cols = [f"{w} {lab}" for w, lab in zip(h1, h2, strict=True)]
                    layout = None
                else:
                    cols = [f"{w} {lab}" for w, lab in zip(h1[1:], h2, strict=False)]
                    layout = "layout.nodes" if h1[0] == "Nodes" else "layout.processes"
                while idx < len(lines) and _NUMROW_RE.match(lines[idx][1]):
                    rn, row = lines[idx]
                    idx += 1
                    vals = row.split()
                    if layout is None:
                        for col, v in zip(cols, vals, strict=False):
                            summ(rn, row, _JOB_KEYS.get(col, col.lower().replace(" ", "_")), v)
                    else:
                        parts = [
                            f"{_JOB_KEYS.get(col, col.lower().replace(' ', '_'))}={v}"
                            for col, v in zip(cols, vals[1:], strict=False)
                        ]
                        summ(rn, row, layout, f"{vals[0]}: " + ", ".join(parts))
                continue
            if _OUTLIER_HDR_RE.match(line):
                continue
            m = _OUTLIER_RE.match(line)
            if m:
                summ(n, line, "outlier_node", f"{m.group(1)}: {m.group(2)}")
            continue
        if _COMMHDR_RE.match(line) and section != "comms":
            close_entry()
            section = "comms"
            seen.add("comms")
        if section == "comms" and not line[:1].isspace() and _ENTRY_COMM_RE.match(s):
            section = None  # an entry right after the table: the section headers were cut out ("[...]")
        if section == "comms":
            if _COMMHDR_RE.match(line):
                seen.add("table")
                if idx < len(lines) and lines[idx][1].strip().startswith("#"):
                    idx += 1
                continue
            m = _COMMROW_RE.match(line)
            if m:
                g = m.group(1)
                group_cols = (
                    "comms",
                    "nodes_per_comm",
                    "ranks_per_node",
                    "ranks_per_comm",
                    "ranks_in_group",
                    "status",
                    "errors",
                )
                for col, v in zip(group_cols, m.groups()[1:], strict=True):
                    summ(n, line, f"group.{g}.{col}", v)
            continue
        if section in ("error", "warning"):
            if not line[:1].isspace():
                m = _ENTRY_COMM_RE.match(s)
                mj = _ENTRY_JOB_RE.match(s)
                if m:
                    close_entry()
                    seen.add("entry")
                    entry = _Entry(section, m.group(4), norm_comm_hash(m.group(3)), n, line)
                elif mj:
                    close_entry()
                    entry = _Entry(section, mj.group(1), None, n, line)
                continue
            if entry is None:
                continue
            _entry_line(entry, n, line, source, host, records)
            continue
        # lines outside any section (a capture that starts mid-report): entry headers still start entries
        m = _ENTRY_COMM_RE.match(s)
        if m and not line[:1].isspace():
            close_entry()
            seen.add("entry")
            section = "warning" if "MISMATCH" in m.group(4) and "INCOMPLETE" not in m.group(4) else "error"
            entry = _Entry(section, m.group(4), norm_comm_hash(m.group(3)), n, line)
    close_entry()
    records.sort(key=lambda r: r.line)
    if "job" in seen and not ({"nodes", "layout.nodes"} & {r.key for r in records if isinstance(r, RasSummary)}):
        problems.append("truncated: the Job summary has no numbers")
    if "comms" in seen and "table" not in seen:
        problems.append("truncated: report ends before the communicator table")
    elif "table" in seen and not ({"error", "entry"} & seen):
        problems.append("truncated: report ends before the Errors section")
    elif "error" in seen and "warning" not in seen:
        problems.append("truncated: report ends before the Warnings section")


def _entry_line(e: _Entry, n: int, line: str, source: str, host: str | None, records: list[Record]) -> None:
    s = line.strip()

    def rank(rank_no: int | None, gpu: int | None, pid: int | None, node: str | None, status: str) -> None:
        records.append(
            RasRank(
                source=source,
                line=n,
                text=clip(line),
                host=node or host,
                rank=rank_no,
                comm=e.comm,
                gpu=gpu,
                pid=pid,
                status=status,
            )
        )

    m = _PROCESS_RE.match(line)
    if m:
        rank(None, int(m.group(3)), int(m.group(1)), m.group(2), _entry_status(e, None))
        return
    m = _RANK_RE.match(line)
    if m:
        explicit: str | None = None
        if m.group("status"):
            explicit = f"status {m.group('status')}"
        elif m.group("op"):
            explicit = _op_status(e, f"launched up to operation {m.group('op')}")
        elif m.group("noop"):
            explicit = _op_status(e, "not launched any operations")
        elif m.group("err"):
            explicit = f"{e.errctx or 'error'}: {m.group('err')}"
        gpu = int(m.group("gpu")) if m.group("gpu") else None
        pid = int(m.group("pid")) if m.group("pid") else None
        rank(int(m.group(1)), gpu, pid, m.group("node"), _entry_status(e, explicit))
        return
    m = _MISSING_RANKS_RE.match(line)
    if m:
        for r in re.findall(r"\d+", m.group(1)):
            rank(int(r), None, None, None, "missing")
        e.details.append(s)
        return
    e.details.append(s)
    m = _GRP_STATUS_RE.match(line)
    if m:
        e.ctx = f"status {m.group(1)}"
        return
    m = _GRP_OP_RE.match(line)
    if m:
        e.ctx = _op_status(e, f"launched up to operation {m.group(1)}")
        return
    if _GRP_NOOP_RE.match(line):
        e.ctx = _op_status(e, "not launched any operations")
        return
    m = _GRP_ERR_RE.match(line)
    if m:
        e.ctx = f"{e.errctx or 'error'}: {m.group(1)}"
        return
    m = _OPTYPE_RE.match(line)
    if m and m.group(1) != "collective":
        e.optype = m.group(1)
        return
    m = _ERRCTX_RE.match(line)
    if m:
        e.errctx = "init error" if m.group(1) == "Initialization" else "async error"
        e.ctx = None
