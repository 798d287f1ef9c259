"""Slurm job and node state: ``scontrol show job|node`` (multi-line and ``-o`` one-liners), ``sacct`` tables
(``-p``/``-P`` ``--parsable2`` with or without header, default fixed-width with a dash ruler) and ``squeue`` tables.

Shapes (Slurm ``src/scontrol/info_job.c``, ``src/api/node_info.c``, ``sacct(1)``, ``squeue(1)``)::

    JobId=2398617 ArrayJobId=2398463 ArrayTaskId=150 JobName=parallel.sh
       JobState=COMPLETED Reason=None Dependency=(null)
       ...ExitCode=0:0
       NodeList=node-[63-65]
       BatchHost=node-63
       NumNodes=3 NumCPUs=8 NumTasks=8 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
         Nodes=node-63 CPU_IDs=22-23 Mem=1000 GRES_IDX=          (scontrol -d detail lines, ignored)

    NodeName=oxygen-04 Arch=x86_64 CoresPerSocket=12
       Gres=(null)
       State=IDLE+DRAIN ThreadsPerCore=2 ...
       Reason=memory issues? [root@2019-01-29T10:42:12]        (free text with spaces, may follow a blank line)

    JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode    (sacct -P; -p adds a trailing '|')
    89|mesh0-0|all|root|8|CANCELLED by 2166|0:0

    JOBID PARTITION  NAME  USER ST  TIME NODES NODELIST(REASON)  (squeue)
    65648     batch  math  phil PD  0:00     6 (Resources)

``Key=Value`` pairs are split at whitespace followed by a capitalised ``Key=``; a value runs to the next key, so
``Command=/x.sh --export ALL,name=Jeff`` and ``Reason=Not responding [slurm@...]`` keep their spaces. Old layouts
(``Name=`` instead of ``JobName=``, ``StartTime=06/02-15:27:11``) and newer keys are accepted alike. Shell prompts,
``scontrol:`` interactive prompts and command echo lines end the current block; ``scontrol show partition`` /
reservation blocks and ``sinfo`` tables are skipped. A headerless ``sacct --parsable2`` table takes its column names
from a preceding ``sacct ... --format=`` command line when there is one, otherwise the job id, state, exit code and
node list are recognised by their shape. Host lists are expanded with :func:`diagnose.hostlist.expand_hostlist`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.hostlist import HostlistError, expand_hostlist
from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._job import JobInfo, NodeInfo
from diagnose.parsers._lines import iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "slurm"

_UNSET = frozenset({"", "(null)", "none", "n/a", "unknown", "none assigned", "(none)"})
_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "COMPLETING",
        "CONFIGURING",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "REVOKED",
        "SIGNALING",
        "SPECIAL_EXIT",
        "STAGE_OUT",
        "STOPPED",
    }
)
_SQUEUE_CODES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "S": "SUSPENDED",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "CF": "CONFIGURING",
    "CA": "CANCELLED",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "OOM": "OUT_OF_MEMORY",
    "RD": "RESV_DEL_HOLD",
    "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD",
    "RQ": "REQUEUED",
    "RS": "RESIZING",
    "RV": "REVOKED",
    "SI": "SIGNALING",
    "SE": "SPECIAL_EXIT",
    "SO": "STAGE_OUT",
    "ST": "STOPPED",
}

_KEY_RE = re.compile(r"(?:(?<=\s)|^)([A-Z][A-Za-z0-9_:/.()+*-]*)=")
_BLOCK_RE = re.compile(r"^(JobId|NodeName|PartitionName|ReservationName)=(\S*)")
_SLURM_CMDS = r"(?:scontrol|sacct|squeue|sinfo|sbatch|srun|salloc|scancel|sshare|sprio|sstat)"
# "$ sacct", "# scontrol show job", "adev0: squeue", "[athena][u@login01 ~]$ sacct", "(venv) user@h:~$ squeue"
_CMD_LINE_RE = re.compile(r"^(?:[^=|\n]{0,80}?[\$#%>:]\s+|\s*)(?:sudo\s+)?(" + _SLURM_CMDS + r")(?:\s(.*))?$")
# interactive "scontrol: show job 71701" / "scontrol: update ..."
_INTERACTIVE_RE = re.compile(r"^scontrol:\s+(show|update|create|delete|hold|release|requeue|\w+)\b")
_DASHES_RE = re.compile(r"^\s*-{2,}(?:\s+-{2,})+\s*$")
_JOBID_RE = re.compile(r"^\d+(?:[_+]\d+|_\[[\d,%-]+\])?(?:\.(?:batch|extern|interactive|\d+))?$")
_EXIT_RE = re.compile(r"^\d+:\d+$")
_ISO_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
_HOSTLIKE_RE = re.compile(r"^[A-Za-z][\w.-]*(?:\[[\d,\-]+\][\w.-]*)*(?:,[A-Za-z][\w.-]*(?:\[[\d,\-]+\][\w.-]*)*)*$")

# column name (lower case, squeue/sacct spellings) -> JobInfo field
_COLUMNS = {
    "jobid": "job_id",
    "job_id": "job_id",
    "jobidraw": "job_id_raw",
    "jobname": "name",
    "name": "name",
    "state": "state",
    "st": "state",
    "exitcode": "exit_code",
    "reason": "reason",
    "nodelist": "nodes",
    "nodelist(reason)": "nodes_or_reason",
    "nnodes": "num_nodes",
    "nodes": "num_nodes",
    "ntasks": "num_tasks",
    "tasks": "num_tasks",
    "start": "start_time",
    "start_time": "start_time",
    "end": "end_time",
    "end_time": "end_time",
    "batchhost": "batch_host",
    "exec_host": "batch_host",
}


# ----------------------------------------------------------------------------------------------------- helpers


def _unset(value: str | None) -> bool:
    return value is None or value.strip().lower() in _UNSET


def _opt(value: str | None) -> str | None:
    return None if _unset(value) else value.strip()  # type: ignore[union-attr]


def _int(value: str | None) -> int | None:
    if _unset(value):
        return None
    v = value.strip()  # type: ignore[union-attr]
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", v)
    if not m:
        return None
    if m.group(2) is not None and m.group(2) != m.group(1):
        return None  # a min-max range of a pending job
    return int(m.group(1))


def _nodes(value: str | None, where: str, problems: list[str]) -> tuple[str, ...]:
    if _unset(value):
        return ()
    v = value.strip()  # type: ignore[union-attr]
    if v.startswith("("):
        return ()  # squeue NODELIST(REASON) shows the pending reason
    try:
        return tuple(expand_hostlist(v))
    except HostlistError as exc:
        problems.append(f"{where}: unparseable node list {v!r} ({exc})")
        return ()


def kv_pairs(line: str) -> list[tuple[str, str]]:
    """``Key=Value`` pairs of one scontrol line (values may hold spaces and ``=``)."""
    s = line.strip()
    starts = [(m.start(1), m.end(), m.group(1)) for m in _KEY_RE.finditer(s)]
    out: list[tuple[str, str]] = []
    for i, (_ks, ve, key) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(s)
        out.append((key, s[ve:end].strip()))
    return out


def _command(line: str) -> tuple[str, str] | None:
    """(command, args) when ``line`` is a prompt/echo line running a Slurm command, else None."""
    p = prompt(line)
    body = p[1] if p is not None else line
    m = _INTERACTIVE_RE.match(body.strip())
    if m:
        return "scontrol", body.strip()[len("scontrol:") :].strip()
    m = _CMD_LINE_RE.match(body)
    if m and "=" not in body.split(m.group(1), 1)[0]:
        return m.group(1), (m.group(2) or "").strip()
    if p is not None:
        return "", p[1]
    return None


def _sacct_format(args: str) -> list[str] | None:
    """Column names of ``sacct -o/--format a,b,c`` (only when the output has no header: -n/--noheader)."""
    toks = args.split()
    if not any(
        t in ("-n", "--noheader") or (t.startswith("-") and not t.startswith("--") and "n" in t[1:]) for t in toks
    ):
        return None
    for i, t in enumerate(toks):
        val = None
        if t in ("-o", "--format") and i + 1 < len(toks):
            val = toks[i + 1]
        elif t.startswith("--format="):
            val = t[len("--format=") :]
        elif t.startswith("-o") and len(t) > 2:
            val = t[2:]
        if val:
            return [c.split("%")[0].strip().lower() for c in val.strip("'\"").split(",") if c.strip()]
    return None


# ----------------------------------------------------------------------------------------------------- sniff

_SN_JOB = re.compile(r"^\s*JobId=\d+\S*\s", re.MULTILINE)
_SN_JOBKEYS = re.compile(r"(?:^|\s)(?:JobState|NodeList|BatchHost|NumNodes|ExitCode|JobName)=", re.MULTILINE)
_SN_NODE = re.compile(r"^\s*NodeName=\S+", re.MULTILINE)
_SN_NODEKEYS = re.compile(
    r"(?:^|\s)(?:CPUTot|CPUAlloc|CfgTRES|RealMemory|ThreadsPerCore|CoresPerSocket)=", re.MULTILINE
)
_SN_STATE = re.compile(r"(?:^|\s)State=[A-Z]", re.MULTILINE)
_SN_SQUEUE = re.compile(r"^\s*JOBID\s+(?:\S+\s+)*?(?:ST|STATE)\s+.*NODELIST", re.MULTILINE)


def _sniff_tables(lines: list[str]) -> int:
    score = 0
    headerless = 0
    for i, ln in enumerate(lines[:4000]):
        if "|" in ln:
            cells = [c.strip().lower() for c in ln.split("|")]
            if "jobid" in cells and ("state" in cells or "exitcode" in cells or "nodelist" in cells):
                score = max(score, 90)
            elif len(cells) >= 4 and _headerless_row(ln.split("|")) is not None:
                headerless += 1
        elif i + 1 < len(lines) and _DASHES_RE.match(lines[i + 1]):
            toks = [t.lower() for t in ln.split()]
            if "jobid" in toks and ("state" in toks or "exitcode" in toks):
                score = max(score, 90)
    if headerless:
        score = max(score, 65 if headerless >= 2 else 45)
    return score


def sniff(head: str) -> int:
    try:
        score = 0
        jobs = len(_SN_JOB.findall(head))
        if jobs and len(_SN_JOBKEYS.findall(head)) >= 2:
            score = 95
        nodes = len(_SN_NODE.findall(head))
        if nodes and _SN_STATE.search(head) and _SN_NODEKEYS.search(head):
            score = max(score, 90)
        if _SN_SQUEUE.search(head):
            score = max(score, 85)
        if score < 90:
            score = max(score, _sniff_tables(head.split("\n")))
        return score
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------- blocks


@dataclass
class _Block:
    kind: str  # JobId / NodeName / PartitionName / ReservationName
    line: int
    text: str
    fields: dict[str, str] = field(default_factory=dict)
    last_key: str | None = None

    def add(self, line: str) -> None:
        pairs = kv_pairs(line)
        if not pairs:
            if self.last_key == "Reason" and line.strip():
                self.fields["Reason"] = (self.fields.get("Reason", "") + " " + line.strip()).strip()
            return
        if line.startswith("     ") and pairs[0][0] == "Nodes" and self.kind == "JobId":
            return  # scontrol -d per-node detail line
        for k, v in pairs:
            self.fields.setdefault(k, v)
            self.last_key = k


def _job_from_block(b: _Block, source: str, host: str | None, problems: list[str], at_eof: bool) -> JobInfo:
    f = b.fields
    where = f"line {b.line}"
    if at_eof and not {"JobState", "NodeList"} <= f.keys():
        problems.append(f"truncated: job {f.get('JobId', '?')} block at line {b.line} ends early")
    return JobInfo(
        source=source,
        line=b.line,
        text=clip(b.text),
        host=host,
        job_id=f.get("JobId", ""),
        name=_opt(f.get("JobName", f.get("Name"))),
        state=_opt(f.get("JobState")),
        exit_code=_opt(f.get("ExitCode")),
        reason=_opt(f.get("Reason")),
        nodes=_nodes(f.get("NodeList"), where, problems),
        num_nodes=_int(f.get("NumNodes")),
        num_tasks=_int(f.get("NumTasks")),
        batch_host=_opt(f.get("BatchHost")),
        start_time=_opt(f.get("StartTime")),
        end_time=_opt(f.get("EndTime")),
    )


def _node_from_block(b: _Block, source: str, host: str | None, problems: list[str], at_eof: bool) -> NodeInfo:
    f = b.fields
    if at_eof and "State" not in f:
        problems.append(f"truncated: node {f.get('NodeName', '?')} block at line {b.line} ends early")
    return NodeInfo(
        source=source,
        line=b.line,
        text=clip(b.text),
        host=host,
        node=f.get("NodeName", ""),
        state=_opt(f.get("State")),
        reason=_opt(f.get("Reason")),
        gres=_opt(f.get("Gres")),
    )


# ----------------------------------------------------------------------------------------------------- tables


@dataclass
class _Table:
    kind: str  # "pipe" | "fixed" | "squeue" | "headerless"
    columns: list[str]
    spans: list[tuple[int, int]] = field(default_factory=list)


def _headerless_row(cells: list[str]) -> dict[str, str] | None:
    """Guess job id / state / exit code / node list of a headerless ``sacct -P`` row by shape."""
    cells = [c.strip() for c in cells]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    if len(cells) < 4:
        return None
    job = next((c for c in cells[:3] if _JOBID_RE.match(c)), None)
    state = next((c for c in cells if c.split(" ")[0] in _STATES), None)
    if job is None or state is None:
        return None
    row = {"job_id": job, "state": state}
    ex = next((c for c in cells if _EXIT_RE.match(c)), None)
    if ex:
        row["exit_code"] = ex
    isos = [c for c in cells if _ISO_RE.match(c)]
    if len(isos) >= 2:
        row["start_time"], row["end_time"] = isos[-2], isos[-1]
    last = cells[-1]
    if _HOSTLIKE_RE.match(last) and any(ch.isdigit() for ch in last) and last.split(" ")[0] not in _STATES:
        row["nodes"] = last
    return row


def _row_to_fields(columns: list[str], cells: list[str]) -> dict[str, str]:
    row: dict[str, str] = {}
    for name, val in zip(columns, cells, strict=False):
        key = _COLUMNS.get(name)
        if key and key not in row:
            row[key] = val.strip()
    return row


def _fixed_cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """Assign whitespace tokens to the dash-ruler column they overlap most (tolerates misaligned rows)."""
    cells = [""] * len(spans)
    for m in re.finditer(r"\S+", line):
        s, e = m.start(), m.end()
        best, best_ov = None, 0
        for i, (a, b) in enumerate(spans):
            ov = min(e, b) - max(s, a)
            if ov > best_ov:
                best, best_ov = i, ov
        if best is None:  # in a gap: nearest column to the left
            best = max((i for i, (a, _b) in enumerate(spans) if a <= s), default=0)
        cells[best] = (cells[best] + " " + m.group(0)).strip()
    return cells


def _job_from_row(
    row: dict[str, str], n: int, line: str, source: str, host: str | None, problems: list[str]
) -> JobInfo | None:
    job_id = row.get("job_id") or row.get("job_id_raw")
    if not job_id:
        return None
    state = row.get("state")
    if state:
        state = _SQUEUE_CODES.get(state, state)
    nodes_raw = row.get("nodes")
    reason = row.get("reason")
    both = row.get("nodes_or_reason")
    if both is not None:
        if both.startswith("("):
            reason = reason or both.strip("()")
        else:
            nodes_raw = both
    return JobInfo(
        source=source,
        line=n,
        text=clip(line),
        host=host,
        job_id=job_id,
        name=_opt(row.get("name")),
        state=_opt(state),
        exit_code=_opt(row.get("exit_code")),
        reason=_opt(reason),
        nodes=_nodes(nodes_raw, f"line {n}", problems),
        num_nodes=_int(row.get("num_nodes")),
        num_tasks=_int(row.get("num_tasks")),
        batch_host=_opt(row.get("batch_host")),
        start_time=_opt(row.get("start_time")),
        end_time=_opt(row.get("end_time")),
    )


# ----------------------------------------------------------------------------------------------------- parse


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    lines = list(iter_lines(text))
    block: _Block | None = None
    table: _Table | None = None
    sacct_cols: list[str] | None = None  # from a preceding `sacct -n -P -o a,b,c` command
    blank_pending = False

    def close_block(at_eof: bool = False) -> None:
        nonlocal block
        if block is not None:
            if block.kind == "JobId":
                records.append(_job_from_block(block, source, host, problems, at_eof))
            elif block.kind == "NodeName":
                records.append(_node_from_block(block, source, host, problems, at_eof))
        block = None

    idx = 0
    while idx < len(lines):
        n, line = lines[idx]
        idx += 1
        if not line.strip():
            if block is not None:
                blank_pending = True
            table = None if table is not None and table.kind != "headerless" else table
            continue
        if blank_pending:
            blank_pending = False
            if block is not None and not (line[:1].isspace() and not _BLOCK_RE.match(line.strip())):
                close_block()
        cmd = _command(line) if not line[:1].isspace() else None
        if cmd is not None:
            close_block()
            table = None
            sacct_cols = _sacct_format(cmd[1]) if cmd[0] == "sacct" else None
            if sacct_cols:
                table = _Table("headerless", sacct_cols)
            continue
        m = _BLOCK_RE.match(line)
        if m:
            close_block()
            table = None
            block = _Block(kind=m.group(1), line=n, text=line)
            block.add(line)
            continue
        if block is not None and line[:1].isspace():
            block.add(line)
            continue
        close_block()
        # ---- tables
        nxt = lines[idx][1] if idx < len(lines) else ""
        if "|" in line:
            cells = line.split("|")
            low = [c.strip().lower() for c in cells]
            if "jobid" in low or "jobidraw" in low:
                if low and low[-1] == "":
                    low = low[:-1]
                table = _Table("pipe", low)
                continue
            if table is not None and table.kind in ("pipe", "headerless"):
                if cells and cells[-1].strip() == "" and len(cells) == len(table.columns) + 1:
                    cells = cells[:-1]
                if table.kind == "headerless" and sacct_cols is None:
                    row = _headerless_row(cells) or {}
                else:
                    if len(cells) < len(table.columns) and idx >= len(lines) - 1:
                        problems.append(f"truncated: line {n} has {len(cells)} of {len(table.columns)} columns")
                    row = _row_to_fields(table.columns, cells)
                job = _job_from_row(row, n, line, source, host, problems)
                if job is not None:
                    records.append(job)
                continue
            guessed = _headerless_row(cells)
            if guessed is not None:
                table = _Table("headerless", [])
                job = _job_from_row(guessed, n, line, source, host, problems)
                if job is not None:
                    records.append(job)
            continue
        if _DASHES_RE.match(nxt):
            toks = [t.lower() for t in line.split()]
            if "jobid" in toks:
                spans = [(mm.start(), mm.end()) for mm in re.finditer(r"-+", nxt)]
                table = _Table("fixed", toks, spans)
                idx += 1  # skip the ruler
            continue
        if re.match(r"^\s*JOBID\s", line):
            toks = [t.lower() for t in line.split()]
            table = _Table("squeue", toks)
            continue
        if table is not None and table.kind == "fixed":
            cells = _fixed_cells(line, table.spans) if len(table.spans) == len(table.columns) else line.split()
            job = _job_from_row(_row_to_fields(table.columns, cells), n, line, source, host, problems)
            if job is not None:
                records.append(job)
            continue
        if table is not None and table.kind == "squeue":
            toks = line.split()
            ncol = len(table.columns)
            if len(toks) > ncol:
                toks = toks[: ncol - 1] + [" ".join(toks[ncol - 1 :])]
            if len(toks) < ncol and idx >= len(lines) - 1:
                problems.append(f"truncated: squeue row at line {n} has {len(toks)} of {ncol} columns")
            row = _row_to_fields(table.columns, toks)
            if row.get("job_id") and not _JOBID_RE.match(row["job_id"]):
                table = None
                continue
            job = _job_from_row(row, n, line, source, host, problems)
            if job is not None:
                records.append(job)
            continue
    close_block(at_eof=True)
