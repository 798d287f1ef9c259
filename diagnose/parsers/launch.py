"""Job shape from launch command lines, ``#SBATCH`` directives and hostfiles: which hosts, how many ranks per host.

Recognised (each becomes one :class:`~diagnose.parsers._job.LaunchSpec`, cited at the line where it starts)::

    mpirun -np 16 -H gpu-a01:8,gpu-a02:8 -x NCCL_DEBUG=INFO ./all_reduce_perf -b 8 -e 8G   (Open MPI, MPICH/Hydra
    mpirun --hostfile hosts -N 8 ...    mpiexec -f hosts -n 4 -ppn 2 ...                        and Intel MPI options)
    srun -N 4 --ntasks-per-node=8 -w gpu-a[001-004] ...      sbatch -n4 -w "adev[9-10]" my.script
    #SBATCH --nodes=8 / #SBATCH -N 4 ...        (all directives of a file -> one ``sbatch`` spec, cited at the first
                                                  directive; only when they give a shape: -N/-n/--ntasks-per-node/-w)
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv_endpoint host:29500 train.py
    python -u -m torch.distributed.run --nproc_per_node=8 --nnodes 4 ...
    gpu-a01 slots=8 / donner:2 / bare host lines              (Open MPI, DeepSpeed and MPICH hostfiles)

Only the launcher's own options are read: parsing stops at the program (``all_reduce_perf -n 30`` is not ``-n``).
Nested launchers are found too (``srun ... python -m torch.distributed.run ...``, ``mpirun ... bash -c "torchrun
..."``, a launcher held in a shell variable ``LAUNCHER="python -u -m torch.distributed.run ..."``). Simple
``NAME=value`` assignments earlier in the same file resolve ``$NAME`` in options (``--nproc_per_node
$GPUS_PER_NODE``); what cannot be resolved (``$SLURM_NNODES``) leaves the field ``None``. Backslash continuations are
joined; shell prompts (``[u@h ~]$``, ``shell$``, ``adev0:``), ``$``/``>``/``+`` echo markers, markdown backticks and
``VAR=value``/``env``/``exec``/``sudo`` prefixes are skipped. A launcher word followed only by plain words
(``srun is the Slurm launcher``) is prose, not a command. Hostfile lines are only taken in a run that has explicit
slot counts, follows a ``cat <hostfile>`` command, or makes up the whole file. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.hostlist import HostlistError, expand_hostlist
from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import root_prompts
from diagnose.parsers._job import LaunchSpec
from diagnose.parsers._lines import iter_lines, prompt
from diagnose.parsers.base import guarded_parse

FORMAT = "launch"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk
MIXABLE = True

_MPI_NAMES = frozenset({"mpirun", "mpiexec", "mpiexec.hydra", "orterun", "prterun", "oshrun", "mpirun.openmpi"})
_MAX_DEPTH = 4

# ------------------------------------------------------------------------------------------------ option tables

_MPI_ARG2 = frozenset({"-mca", "--mca", "-gmca", "--gmca", "--prtemca", "-prtemca", "--pmixmca", "-pmixmca"})
_MPI_ENV2 = frozenset({"-genv", "-env"})  # -genv NAME value | -genv NAME=value
_MPI_ARG1 = frozenset(
    """-np -n --np --n -c -H --host -host --hosts -hosts --hostfile -hostfile --machinefile -machinefile
    -machine --default-hostfile -f -N -npernode --npernode -npersocket --npersocket -ppn -perhost -x --map-by
    -map-by --bind-to -bind-to --rank-by -rank-by --prefix -prefix --wdir -wdir -wd --output-filename
    -output-filename --output --cpus-per-proc -cpus-per-proc --cpus-per-rank --cpu-set -cpu-set --rankfile -rf
    --app -app -am --am --tune --stdin --path -path --preload-files --launch-agent --personality --max-restarts
    --runtime-options --forward-signals -genvlist -envlist -launcher -launcher-exec -rmk -iface -outfile-pattern
    -errfile-pattern -configfile -demux -ckpointlib -ckpoint-prefix -ckpoint-num -ckpoint-interval -gpus-per-proc
    -bootstrap -bootstrap-exec -usize -nameserver --timeout -timeout --display --report-child-jobs-separately
    --mca-param -s --set-sid -bind-to-core""".split()
)
_MPI_NPROCS = frozenset({"-np", "-n", "--np", "--n", "-c"})
_MPI_HOSTS = frozenset({"-H", "--host", "-host", "--hosts", "-hosts"})
_MPI_PPN = frozenset({"-N", "-npernode", "--npernode", "-ppn", "-perhost"})

_SLURM_SHORT_ARG = frozenset("AabBcCdDeFGiJLmMnNopqrStTwWx")
_SLURM_LONG_ARG = frozenset(
    """account array begin chdir cpus-per-task constraint dependency error export gres gpus gpus-per-node
    gpus-per-task gpus-per-socket input job-name licenses mem mem-per-cpu mem-per-gpu nodes ntasks ntasks-per-node
    tasks-per-node ntasks-per-socket ntasks-per-core ntasks-per-gpu nodelist nodefile exclude output partition qos
    time time-min wait distribution cpu-bind mpi jobid reservation mail-type mail-user container-image
    container-mounts container-name container-workdir container-env container-save segment switches signal comment
    wckey network clusters gpu-bind cpus-per-gpu threads-per-core sockets-per-node cores-per-socket hint open-mode
    het-group prolog epilog task-prolog task-epilog uid gid tmp priority mcs-label burst-buffer bb bbf acctg-freq
    profile power cpu-freq deadline delay-boot extra tres-per-task tres-bind gpu-freq core-spec thread-spec
    extra-node-info mincpus cluster-constraint export-file""".split()
)

_TORCH_ARG = frozenset(
    """nnodes nproc_per_node nproc-per-node rdzv_backend rdzv-backend rdzv_endpoint rdzv-endpoint rdzv_id rdzv-id
    rdzv_conf rdzv-conf max_restarts max-restarts monitor_interval monitor-interval start_method start-method role
    node_rank node-rank master_addr master-addr master_port master-port local_addr local-addr log_dir log-dir
    redirects tee local_ranks_filter local-ranks-filter logs_specs logs-specs numa-binding numa_binding
    event_log_handler event-log-handler signals_to_handle signals-to-handle""".split()
)
_TORCH_SHORT_ARG = frozenset({"-r", "-t"})

# ------------------------------------------------------------------------------------------------ tokenizer

_OPERATORS = frozenset({";", "|", "||", "&&", "&"})
_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
_ASSIGN_RE = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.DOTALL)


def _tokenize(s: str) -> list[str]:
    """Shell-like split: quotes removed, ``$(...)``/backticks kept whole, ``; | || && &`` as separate tokens."""
    toks: list[str] = []
    cur: list[str] = []
    has = False
    i, n = 0, len(s)

    def flush() -> None:
        nonlocal cur, has
        if has:
            toks.append("".join(cur))
        cur, has = [], False

    while i < n:
        ch = s[i]
        if ch in " \t\r\n":
            flush()
            i += 1
        elif ch == "'":
            j = s.find("'", i + 1)
            j = n if j < 0 else j
            cur.append(s[i + 1 : j])
            has = True
            i = j + 1
        elif ch == '"':
            j = i + 1
            buf: list[str] = []
            while j < n and s[j] != '"':
                if s[j] == "\\" and j + 1 < n and s[j + 1] in '"\\$`':
                    buf.append(s[j + 1])
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            cur.append("".join(buf))
            has = True
            i = j + 1
        elif ch == "\\" and i + 1 < n:
            cur.append(s[i + 1])
            has = True
            i += 2
        elif ch == "$" and i + 1 < n and s[i + 1] in "({":
            close = ")" if s[i + 1] == "(" else "}"
            depth, j = 0, i + 1
            while j < n:
                if s[j] == s[i + 1]:
                    depth += 1
                elif s[j] == close:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            cur.append(s[i : j + 1])
            has = True
            i = j + 1
        elif ch == "`":
            j = s.find("`", i + 1)
            j = n if j < 0 else j
            cur.append(s[i : j + 1])
            has = True
            i = j + 1
        elif ch in ";|&" and not (ch == "&" and cur and cur[-1].endswith(">")):
            flush()
            op = s[i : i + 2] if s[i : i + 2] in ("||", "&&") else ch
            toks.append(op)
            i += len(op)
        else:
            cur.append(ch)
            has = True
            i += 1
    flush()
    return toks


def _segments(toks: list[str]) -> list[list[str]]:
    segs: list[list[str]] = [[]]
    for t in toks:
        if t in _OPERATORS:
            segs.append([])
        else:
            segs[-1].append(t)
    return [s for s in segs if s]


# ------------------------------------------------------------------------------------------------ variables


class _Vars:
    """Shell variables assigned earlier in the file (raw text), resolved on use."""

    def __init__(self) -> None:
        self.raw: dict[str, str] = {}

    def resolve(self, text: str, depth: int = 0) -> str:
        if depth > 5 or "$" not in text:
            return text

        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            val = self.raw.get(name)
            if val is None:
                return m.group(0)
            res = self.resolve(val, depth + 1)
            if "$(" in res or "`" in res or _has_launcher_text(res):
                return m.group(0)  # keep command substitutions / launcher-bearing variables unexpanded
            return res

        return _VAR_RE.sub(sub, text)

    def expand(self, toks: list[str]) -> list[str]:
        out: list[str] = []
        for t in toks:
            m = re.fullmatch(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))", t)
            if m:
                r = self.resolve(t)
                if r != t:
                    out.extend(_tokenize(r))
                    continue
            out.append(self.resolve(t))
        return out


_LAUNCHER_TEXT_RE = re.compile(
    r"(?:^|[\s;&|(\"'`/])(?:mpirun|mpiexec|srun|sbatch|salloc|torchrun|orterun|prterun)(?=\s|$)"
    r"|-m\s+torch\.distributed\.(?:run|launch)\b"
)


def _has_launcher_text(s: str) -> bool:
    return bool(_LAUNCHER_TEXT_RE.search(s))


# ------------------------------------------------------------------------------------------------ helpers


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    v = v.strip()
    return int(v) if v.isdigit() else None


def _range_int(v: str | None, sep: str) -> int | None:
    """``4`` -> 4, ``4-4``/``4:4`` -> 4, ``2-4`` -> None (a range is not a node count)."""
    if v is None:
        return None
    parts = v.strip().split(sep)
    if len(parts) == 2 and parts[0].isdigit() and parts[0] == parts[1]:
        return int(parts[0])
    return _int(v)


@dataclass
class _Spec:
    launcher: str
    hosts: list[str] = field(default_factory=list)
    slots: int | None = None
    nprocs: int | None = None
    nnodes: int | None = None
    rdzv: str | None = None
    host_slots: list[int | None] = field(default_factory=list)


def _finish(spec: _Spec) -> _Spec:
    if spec.hosts and spec.nnodes is None:
        spec.nnodes = len(dict.fromkeys(spec.hosts))
    if spec.slots is None and spec.host_slots and all(s is not None for s in spec.host_slots):
        if len(set(spec.host_slots)) == 1:
            spec.slots = spec.host_slots[0]
    if spec.nprocs is None and spec.host_slots and all(s is not None for s in spec.host_slots):
        spec.nprocs = sum(s for s in spec.host_slots if s is not None)
    if spec.nprocs is None and spec.nnodes is not None and spec.slots is not None:
        spec.nprocs = spec.nnodes * spec.slots
    if spec.nnodes is None and spec.nprocs and spec.slots and spec.nprocs % spec.slots == 0:
        spec.nnodes = spec.nprocs // spec.slots
    return spec


def _add_hosts(spec: _Spec, value: str) -> None:
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith("$"):
            continue
        host, _, n = item.partition(":")
        spec.hosts.append(host)
        spec.host_slots.append(_int(n) if n else None)


# ------------------------------------------------------------------------------------------------ launchers


def _parse_mpirun(args: list[str]) -> tuple[_Spec, int]:
    """Options of mpirun/mpiexec; MPMD contexts (``... : -n 1 --host b prog2``) add up their process counts."""
    spec = _Spec("mpirun")
    counts: list[int | None] = [None]
    i, n = 0, len(args)
    prog = n
    while i < n:
        t = args[i]
        if t == ":":
            counts.append(None)
            i += 1
            continue
        if not t.startswith("-") or t == "-":
            if t.startswith("$"):
                i += 1  # an unresolved variable in option position (may hold options)
                continue
            prog = min(prog, i)
            j = i + 1
            while j < n and args[j] != ":":
                j += 1  # the program and its own arguments, up to the next MPMD context
            i = j
            continue
        opt, eq, val = t.partition("=") if t.startswith("--") else (t, "", "")
        if opt in _MPI_ARG2:
            i += 3
            continue
        if opt in _MPI_ENV2:
            i += 2 if (i + 1 < n and "=" in args[i + 1]) else 3
            continue
        if opt not in _MPI_ARG1:
            i += 1  # a flag (or an option this table does not know: assumed to take no argument)
            continue
        if eq:
            i += 1
        else:
            val = args[i + 1] if i + 1 < n else ""
            i += 2
        if opt in _MPI_NPROCS and _int(val) is not None:
            counts[-1] = _int(val)
        elif opt in _MPI_HOSTS:
            _add_hosts(spec, val)
        elif opt in _MPI_PPN and _int(val) is not None:
            spec.slots = _int(val)
        elif opt in ("--map-by", "-map-by"):
            m = re.match(r"ppr:(\d+):node", val, re.IGNORECASE)
            if m:
                spec.slots = int(m.group(1))
    if all(c is not None for c in counts):
        spec.nprocs = sum(c for c in counts if c is not None)
    elif len(counts) == 1:
        spec.nprocs = counts[0]
    return _finish(spec), prog


def _slurm_opts(args: list[str], spec: _Spec, problems: list[str], where: str, stop_at_program: bool) -> int:
    """Apply srun/sbatch options to ``spec``; return the index of the program (len(args) if none)."""
    i, n = 0, len(args)
    ntasks: int | None = None
    while i < n:
        t = args[i]
        if not t.startswith("-") or t == "-":
            if stop_at_program and not t.startswith("$"):
                break
            i += 1  # an unresolved $VAR (may hold options), or a non-option word inside #SBATCH directives
            continue
        name: str | None = None
        val: str | None = None
        if t.startswith("--"):
            opt, eq, v = t[2:].partition("=")
            if eq:
                name, val = opt, v
                i += 1
            elif opt in _SLURM_LONG_ARG:
                name, val = opt, (args[i + 1] if i + 1 < n else None)
                i += 2
            else:
                i += 1
                continue
        else:
            letter = t[1:2]
            if letter in _SLURM_SHORT_ARG:
                if len(t) > 2:
                    name, val = letter, t[2:].lstrip("=")
                    i += 1
                else:
                    name, val = letter, (args[i + 1] if i + 1 < n else None)
                    i += 2
            else:
                i += 1
                continue
        if val is None:
            continue
        if name in ("N", "nodes"):
            spec.nnodes = _range_int(val, "-")
        elif name in ("n", "ntasks"):
            ntasks = _int(val)
        elif name in ("ntasks-per-node", "tasks-per-node"):
            spec.slots = _int(val)
        elif name in ("w", "nodelist"):
            if "/" in val or val.startswith("$"):
                continue  # a node file, or unresolved
            try:
                spec.hosts = expand_hostlist(val)
            except HostlistError as exc:
                problems.append(f"{where}: unparseable node list {val!r} ({exc})")
    if ntasks is not None:
        spec.nprocs = ntasks
    return i


def _parse_slurm(kind: str, args: list[str], problems: list[str], where: str) -> tuple[_Spec, int]:
    spec = _Spec(kind)
    prog = _slurm_opts(args, spec, problems, where, stop_at_program=True)
    return _finish(spec), prog


def _parse_torchrun(args: list[str]) -> tuple[_Spec, int]:
    spec = _Spec("torchrun")
    opts: dict[str, str] = {}
    standalone = False
    i, n = 0, len(args)
    prog = n
    while i < n:
        t = args[i]
        if not t.startswith("-"):
            if t.startswith("$"):
                i += 1
                continue
            prog = i
            break
        if t.startswith("--"):
            opt, eq, v = t[2:].partition("=")
            key = opt.replace("-", "_")
            if eq:
                opts.setdefault(key, v)
                i += 1
            elif opt in _TORCH_ARG:
                if i + 1 < n:
                    opts.setdefault(key, args[i + 1])
                i += 2
            else:
                standalone = standalone or opt == "standalone"
                i += 1
        elif t in _TORCH_SHORT_ARG:
            i += 2
        else:
            i += 1
    spec.nnodes = _range_int(opts.get("nnodes"), ":")
    if spec.nnodes is None and standalone:
        spec.nnodes = 1
    spec.slots = _int(opts.get("nproc_per_node"))
    rdzv = opts.get("rdzv_endpoint")
    if rdzv is None and opts.get("master_addr"):
        rdzv = opts["master_addr"] + (":" + opts["master_port"] if opts.get("master_port") else "")
    spec.rdzv = rdzv or None
    return _finish(spec), prog


_PREFIX_WORDS = frozenset({"exec", "time", "nohup", "command", "builtin", "stdbuf", "nice", "ionice"})


def _strip_prefixes(toks: list[str]) -> list[str]:
    i = 0
    while i < len(toks):
        t = toks[i]
        if _ASSIGN_RE.match(t):
            i += 1
        elif t == "env":
            i += 1
            while i < len(toks) and (toks[i].startswith("-") or _ASSIGN_RE.match(toks[i])):
                i += 2 if toks[i] in ("-u", "--unset", "-C", "--chdir") else 1
        elif t == "sudo":
            i += 1
            while i < len(toks) and toks[i].startswith("-"):
                i += 2 if toks[i] in ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U") else 1
        elif t in _PREFIX_WORDS:
            i += 1
            while i < len(toks) and toks[i].startswith("-"):
                i += 1
        else:
            break
    return toks[i:]


def _python_module(toks: list[str]) -> int | None:
    """Index after ``-m torch.distributed.run|launch`` when ``toks`` is a python invocation of it."""
    base = toks[0].rsplit("/", 1)[-1]
    if not re.fullmatch(r"python[\d.]*", base):
        return None
    i = 1
    while i < len(toks) and toks[i].startswith("-"):
        if toks[i] == "-m" and i + 1 < len(toks):
            return i + 2 if toks[i + 1] in ("torch.distributed.run", "torch.distributed.launch") else None
        if toks[i].startswith("-m") and len(toks[i]) > 2:
            return i + 1 if toks[i][2:] in ("torch.distributed.run", "torch.distributed.launch") else None
        i += 2 if toks[i] in ("-X", "-W", "-c") else 1
    return None


def _prose(spec: _Spec, args: list[str]) -> bool:
    """No option, path, variable or assignment after the launcher word and nothing learnt: a sentence."""
    if spec.hosts or spec.slots or spec.nprocs or spec.nnodes or spec.rdzv:
        return False
    return not any(
        t.startswith("-") or any(c in t for c in "/$=_") or re.search(r"\w\.\w", t) is not None for t in args
    )


def _analyze(toks: list[str], vars_: _Vars, problems: list[str], where: str, depth: int = 0) -> list[_Spec]:
    """Launch specs in one token list (a logical line or a nested command string)."""
    out: list[_Spec] = []
    if depth > _MAX_DEPTH:
        return out
    for seg in _segments(toks):
        seg = _strip_prefixes(vars_.expand(seg))
        if not seg:
            continue
        head = seg[0]
        if re.search(r"\s", head):  # a quoted command string in command position (YAML args, "mpirun ...")
            out.extend(_analyze(_tokenize(head) + seg[1:], vars_, problems, where, depth + 1))
            continue
        base = head.rsplit("/", 1)[-1]
        spec: _Spec | None = None
        rest: list[str] = []
        if base in _MPI_NAMES:
            spec, prog = _parse_mpirun(seg[1:])
            rest = seg[1 + prog :]
        elif base == "srun":
            spec, prog = _parse_slurm("srun", seg[1:], problems, where)
            rest = seg[1 + prog :]
        elif base in ("sbatch", "salloc"):
            spec, prog = _parse_slurm("sbatch", seg[1:], problems, where)
            rest = seg[1 + prog :]
        elif base == "torchrun":
            spec, prog = _parse_torchrun(seg[1:])
            rest = seg[1 + prog :]
        else:
            k = _python_module(seg)
            if k is not None:
                spec, prog = _parse_torchrun(seg[k:])
                rest = seg[k + prog :]
            elif base in ("bash", "sh", "zsh", "ksh") and "-c" in seg[1:3]:
                c = seg.index("-c")
                if c + 1 < len(seg):
                    out.extend(_analyze(_tokenize(seg[c + 1]), vars_, problems, where, depth + 1))
                continue
        if spec is None:
            continue
        if _prose(spec, seg[1:]):
            continue  # "srun is the Slurm launcher": a sentence, not a command
        out.append(spec)
        if rest:
            # the program may itself be a launcher (srun ... python -m torch.distributed.run) or run a shell string
            nested = _analyze(rest, vars_, problems, where, depth + 1)
            if not nested:
                for t in rest:
                    if re.search(r"\s", t) and _has_launcher_text(t):
                        nested.extend(_analyze(_tokenize(t), vars_, problems, where, depth + 1))
            out.extend(nested)
    return out


# ------------------------------------------------------------------------------------------------ lines

_SBATCH_RE = re.compile(r"^\s*#SBATCH\s+(.*)$")
_SHAPE_OPT_RE = re.compile(
    r"(?:^|\s)(?:-N\s*\S|--nodes[=\s]|-n\s*\d|--ntasks[=\s]|--ntasks-per-node[=\s]|--tasks-per-node[=\s]"
    r"|-w\s*\S|--nodelist[=\s])"
)
_PROMPT_GENERIC_RE = re.compile(r"^(?:\([^()\s]*\)\s*)?[\w.@~:/\[\]-]*[$%]\s+(?P<cmd>\S.*)$")
_HOST_PROMPT_RE = re.compile(r"^(?P<host>[A-Za-z][\w.-]*\d[\w.-]*):\s+(?P<cmd>\S.*)$")  # "adev0: srun ..."
_CONT_RE = re.compile(r"\\\s*$")


@dataclass
class _Logical:
    line: int
    first: str
    text: str
    truncated: bool


def _logical_lines(text: str) -> list[_Logical]:
    """Join backslash continuations (a markdown ``>`` quote prefix is removed from continued lines)."""
    out: list[_Logical] = []
    cur: _Logical | None = None
    quoted = False
    lines = list(iter_lines(text))
    if lines and lines[-1][1] == "":
        lines.pop()  # the empty string after the final newline is not a line
    for n, raw in lines:
        if cur is not None:
            body = re.sub(r"^\s*>+\s?", "", raw) if quoted else raw
            if _CONT_RE.search(body):
                cur.text += " " + _CONT_RE.sub("", body)
                continue
            cur.text += " " + body
            out.append(cur)
            cur = None
            continue
        if _CONT_RE.search(raw) and not raw.lstrip().startswith("#"):
            quoted = raw.lstrip().startswith(">")
            cur = _Logical(n, raw, _CONT_RE.sub("", raw), False)
            continue
        out.append(_Logical(n, raw, raw, False))
    if cur is not None:
        cur.truncated = True
        out.append(cur)
    return out


def _command_candidates(line: str) -> list[tuple[str | None, str]]:
    """(prompt host, command text) readings of one logical line, most specific first."""
    s = line.strip()
    if not s or s.startswith("#"):
        return []
    out: list[tuple[str | None, str]] = []
    p = prompt(s)
    if p is not None:
        return [(p[0], p[1])]
    s = re.sub(r"^(?:>\s*)+", "", s)  # markdown quote
    s = re.sub(r"^\++\s+", "", s)  # set -x trace
    if s.startswith("`"):
        s = s.strip().strip("`").strip()
    m = _PROMPT_GENERIC_RE.match(s)
    if m:
        out.append((None, m.group("cmd")))
    m = _HOST_PROMPT_RE.match(s)
    if m:
        out.append((m.group("host"), m.group("cmd")))
    out.append((None, s))
    return out


_LAUNCH_START_RE = re.compile(
    r"^(?:[\"'`]?\s*)?(?:(?:[A-Za-z_]\w*=\S*|env|exec|time|nohup|sudo(?:\s+-\w+)*)\s+)*"
    r"(?:\S*/)?(?:mpirun|mpiexec|mpiexec\.hydra|orterun|prterun|srun|sbatch|salloc|torchrun|python[\d.]*)(?:\s|$)"
)


_LAUNCHER = re.compile(r"mpirun|mpiexec|orterun|prterun|srun|sbatch|salloc|torchrun|python")  # _LAUNCH_START_RE's


def _launch_specs_for_line(lg: _Logical, vars_: _Vars, problems: list[str]) -> tuple[list[_Spec], str | None]:
    where = f"line {lg.line}"
    for host, cmd in _command_candidates(lg.text):
        if not _LAUNCH_START_RE.match(cmd):
            continue
        specs = _analyze(_tokenize(cmd), vars_, problems, where)
        if specs:
            return specs, host
    return [], None


def _record_assignment(lg: _Logical, vars_: _Vars) -> list[str] | None:
    """Store ``NAME=value`` / ``export NAME=value`` lines; return the raw values assigned (None if not one)."""
    s = lg.text.strip()
    if not s or s.startswith("#") or "=" not in s:  # (every token must be NAME=value: no '=', no assignment)
        return None
    toks = _tokenize(s)
    if toks and toks[0] in ("export", "local", "readonly", "declare", "typeset"):
        toks = [t for t in toks[1:] if not t.startswith("-")]
    if not toks or not all(_ASSIGN_RE.match(t) for t in toks):
        return None
    values = []
    for t in toks:
        m = _ASSIGN_RE.match(t)
        if m:
            vars_.raw[m.group(1)] = m.group(2)
            values.append(m.group(2))
    return values


# ------------------------------------------------------------------------------------------------ hostfiles

_HF_OMPI_RE = re.compile(
    r"^\s*(?P<host>[A-Za-z0-9][\w.-]*)\s+(?P<kv>(?:(?:slots|max_slots|max-slots|user|cpu|gpu)=\S+\s*)+)(?:#.*)?$"
)
_HF_MPICH_RE = re.compile(r"^\s*(?P<host>[A-Za-z0-9][\w.-]*):(?P<n>\d+)(?:\s+user=\S+)?\s*(?:#.*)?$")
_HF_BARE_RE = re.compile(r"^\s*(?P<host>[A-Za-z0-9][\w.-]*)(?:\s+user=\S+)?\s*(?:#.*)?$")
_CAT_HOSTFILE_RE = re.compile(r"(?:^|\s)cat\s+\S*(?:host|machine|node)\S*\s*$", re.IGNORECASE)


def _hostfile_line(line: str) -> tuple[str, int | None, bool] | None:
    """(host, slots, explicit) for a hostfile line; None otherwise."""
    m = _HF_OMPI_RE.match(line)
    if m:
        slots = re.search(r"(?:^|\s)slots=(\d+)", m.group("kv"))
        return m.group("host"), (int(slots.group(1)) if slots else None), slots is not None
    m = _HF_MPICH_RE.match(line)
    if m:
        return m.group("host"), int(m.group("n")), True
    m = _HF_BARE_RE.match(line)
    if m and (any(c.isalpha() for c in m.group("host")) or re.fullmatch(r"\d+(?:\.\d+){3}", m.group("host"))):
        return m.group("host"), None, False
    return None


@dataclass
class _HostRun:
    start: int
    first: str
    hosts: list[tuple[str, int | None, bool]] = field(default_factory=list)
    after_cat: bool = False


def _hostfile_runs(lines: list[tuple[int, str]]) -> tuple[list[_HostRun], bool]:
    """Runs of hostfile lines (comments/blank lines inside allowed) and whether they make up the whole file."""
    runs: list[_HostRun] = []
    cur: _HostRun | None = None
    after_cat = False
    whole = True
    for n, line in lines:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        hf = _hostfile_line(line)
        if hf is not None and not _LAUNCH_START_RE.match(s):
            if cur is None:
                cur = _HostRun(n, line, after_cat=after_cat)
                runs.append(cur)
            cur.hosts.append(hf)
            continue
        whole = False
        cur = None
        after_cat = bool(_CAT_HOSTFILE_RE.search(s))
    return runs, whole and bool(runs)


def _accept_run(run: _HostRun, whole: bool) -> bool:
    explicit = sum(1 for _h, _s, e in run.hosts if e)
    return run.after_cat or whole or explicit >= 2


# ------------------------------------------------------------------------------------------------ sniff


def sniff(head: str) -> int:
    head = root_prompts(head)
    try:
        launch = 0
        sbatch = 0
        vars_ = _Vars()
        sink: list[str] = []
        logical = _logical_lines(head)
        launchers = _LAUNCHER.search(head) is not None
        for lg in logical[:20000]:
            m = _SBATCH_RE.match(lg.text)
            if m:
                if _SHAPE_OPT_RE.search(" " + m.group(1)):
                    sbatch += 1
                continue
            values = _record_assignment(lg, vars_)
            if values is not None:
                launch += sum(1 for v in values if _has_launcher_text(v) and _analyze(_tokenize(v), vars_, sink, ""))
                continue
            if not (launchers and _LAUNCHER.search(lg.text)) or \
                    not any(_LAUNCH_START_RE.match(c) for _h, c in _command_candidates(lg.text)):
                continue  # (a command _LAUNCH_START_RE takes names one of them: a line without any is none)
            specs, _host = _launch_specs_for_line(lg, vars_, sink)
            if specs:
                launch += 1
        score = 0
        if launch or sbatch:
            score = 75 if launch + sbatch >= 2 else 65
        runs, whole = _hostfile_runs([(i, ln) for i, ln in enumerate(head.split("\n"), 1)])
        accepted = [r for r in runs if _accept_run(r, whole) and any(e for _h, _s, e in r.hosts)]
        if accepted:
            score = max(score, 80)
        elif whole and sum(len(r.hosts) for r in runs) >= 2:
            score = max(score, 35)  # a bare list of host names: a hostfile only by its name
        return score
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ------------------------------------------------------------------------------------------------ parse


def _to_record(spec: _Spec, source: str, line: int, text: str, host: str | None) -> LaunchSpec:
    return LaunchSpec(
        source=source,
        line=line,
        text=clip(text),
        host=host,
        launcher=spec.launcher,
        hosts=tuple(spec.hosts),
        slots_per_host=spec.slots,
        nprocs=spec.nprocs,
        nnodes=spec.nnodes,
        rdzv_endpoint=spec.rdzv,
    )


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    text = root_prompts(text)
    vars_ = _Vars()
    found: list[tuple[int, Record]] = []
    sbatch_toks: list[str] = []
    sbatch_first: tuple[int, str] | None = None
    sbatch_shape = False
    for lg in _logical_lines(text):
        m = _SBATCH_RE.match(lg.text)
        if m:
            body = re.sub(r"\s+#.*$", "", m.group(1))
            sbatch_toks.extend(_tokenize(body))
            sbatch_shape = sbatch_shape or bool(_SHAPE_OPT_RE.search(" " + body))
            if sbatch_first is None:
                sbatch_first = (lg.line, lg.first)
            continue
        values = _record_assignment(lg, vars_)
        if values is not None:
            for v in values:
                if _has_launcher_text(v):
                    for spec in _analyze(_tokenize(v), vars_, problems, f"line {lg.line}"):
                        found.append((lg.line, _to_record(spec, source, lg.line, lg.first, host)))
            continue
        specs, phost = _launch_specs_for_line(lg, vars_, problems)
        if lg.truncated and specs:
            problems.append(f"truncated: launch line {lg.line} ends with a line continuation")
        for spec in specs:
            found.append((lg.line, _to_record(spec, source, lg.line, lg.first, phost or host)))
    if sbatch_first is not None and sbatch_shape:
        spec = _Spec("sbatch")
        _slurm_opts(sbatch_toks, spec, problems, f"line {sbatch_first[0]}", stop_at_program=False)
        found.append((sbatch_first[0], _to_record(_finish(spec), source, sbatch_first[0], sbatch_first[1], host)))
    runs, whole = _hostfile_runs(list(iter_lines(text)))
    for run in runs:
        if not _accept_run(run, whole):
            continue
        spec = _Spec("hostfile")
        for h, s, _e in run.hosts:
            spec.hosts.append(h)
            spec.host_slots.append(s)
        found.append((run.start, _to_record(_finish(spec), source, run.start, run.first, host)))
    found.sort(key=lambda t: t[0])
    records.extend(r for _n, r in found)
