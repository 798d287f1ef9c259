"""Communication-stack environment settings from ``env``/``printenv`` dumps, ``export`` lines, sbatch scripts and
launch lines.

Recognised spellings (only variables accepted by :func:`diagnose.parsers._common.is_comm_env` are kept):

* ``NAME=value`` lines of an ``env``/``printenv`` dump and ``declare -x NAME="value"`` (``export -p``) -> ``env_dump``
* ``export NAME=value [NAME2=value2 ...]``, csh ``setenv NAME value``, Dockerfile ``ENV NAME=value``, a bare
  ``NAME=value`` assignment line inside a script -> ``export``
* ``mpirun ... -x NAME=value``, ``srun``/``sbatch`` ``--export=ALL,NAME=value``, docker/enroot ``-e NAME=value`` /
  ``--env NAME=value``, ``NAME=value cmd ...`` and ``env NAME=value cmd`` command prefixes -> ``launch_arg``
* ``#SBATCH --export=ALL,NAME=value`` directives -> ``sbatch``

Commented-out lines are ignored (except ``#SBATCH`` directives); quotes around values are stripped; ``-x NAME``
without a value (pass-through) yields nothing. NCCL's own ``NCCL_X set by environment to Y`` log lines are the
NCCL log parser's business and are not read here. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re
import shlex

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._common import ENV_PREFIXES, EnvSetting, is_comm_env
from diagnose.parsers._host import root_prompts

FORMAT = "env"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk
MIXABLE = True

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# cheap pre-filter: the line names a comm variable (OMPI_MCA_ parameters are lower case, so not ENV_NAME_RE)
_COMM_HINT_RE = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in ENV_PREFIXES) + r")\w")
# flag-style launch settings: mpirun -x, docker -e/--env, srun --export, mpiexec -genv
_FLAG_RE = re.compile(
    r"(?:^|\s)(?:-x|-e|--env|-genv)[\s=]+['\"]?(?:"
    + "|".join(re.escape(p) for p in ENV_PREFIXES)
    + r")|--export[=\s]"
)
_ASSIGN_RE = re.compile(r"^(" + _NAME + r")=(.*)$", re.DOTALL)
_DUMP_LINE_RE = re.compile(r"^(" + _NAME + r")=(.*)$")
_DECLARE_RE = re.compile(r"^\s*declare\s+-[a-zA-Z]*x[a-zA-Z]*\s+(" + _NAME + r")(?:=(.*))?$")
_SBATCH_RE = re.compile(r"^\s*#SBATCH\s+(.*)$")
_COMMENT_RE = re.compile(r"^\s*#")
_NCCL_LOG_RE = re.compile(r" NCCL (?:INFO|WARN|TRACE|CALL)\b|\bset by environment to\b")
_SHEBANG_RE = re.compile(r"^#!\s*/\S*(?:sh|bash|zsh|ksh|csh|tcsh)\b")
_PREFIX_BREAKERS = {
    "&&",
    "||",
    ";",
    "|",
    "&",
    "(",
    ")",
    "then",
    "do",
    "else",
    "exec",
    "env",
    "nohup",
    "time",
    "command",
    "sudo",
    "-E",
    "{",
    "!",
}


def _strip_quotes(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    # an unbalanced quote (line cut mid-value or broken quoting): drop the dangling quote
    if v[:1] in ("'", '"') and v.count(v[0]) == 1:
        return v[1:]
    if v[-1:] in ("'", '"') and v.count(v[-1]) == 1:
        return v[:-1]
    return v


def _tokens(line: str) -> list[str]:
    """Shell-split ``line``; fall back to whitespace split when quoting is broken."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        return list(lex)
    except ValueError:
        return [_strip_quotes(t) for t in line.split()]


def _split_export_list(spec: str) -> list[tuple[str, str]]:
    """``ALL,NCCL_IB_HCA=mlx5_0,mlx5_1,NCCL_DEBUG=INFO`` -> [(NCCL_IB_HCA, mlx5_0,mlx5_1), (NCCL_DEBUG, INFO)]."""
    out: list[tuple[str, str]] = []
    for part in spec.split(","):
        m = _ASSIGN_RE.match(part.strip())
        if m:
            out.append((m.group(1), _strip_quotes(m.group(2))))
        elif (
            out
            and part
            and part.upper() not in ("ALL", "NONE", "NIL")
            and not re.fullmatch(r"[A-Z_][A-Z0-9_]*", part)
        ):
            # slurm splits on commas: a value such as mlx5_0,mlx5_1 continues the previous assignment
            name, value = out[-1]
            out[-1] = (name, value + "," + part)
    return out


def _settings_from_line(line: str, script: bool, dump: bool) -> list[tuple[str, str, str]]:
    """(name, value, origin) for every setting on one line, comm and non-comm alike."""
    stripped = line.strip()
    if not stripped:
        return []
    if dump:
        m = _DUMP_LINE_RE.match(stripped)
        if m:
            return [(m.group(1), m.group(2), "env_dump")]
    m = _DECLARE_RE.match(stripped)
    if m:
        return [(m.group(1), _strip_quotes(m.group(2) or ""), "env_dump")] if m.group(2) is not None else []
    m = _SBATCH_RE.match(stripped)
    if m:  # a batch directive: the job's environment, below the launch line's own arguments
        return [(n, v, "sbatch") for n, v, _o in _launch_settings(_tokens(m.group(1)))]
    if _COMMENT_RE.match(stripped):
        return []
    continued = stripped.endswith("\\")
    if continued:
        stripped = stripped[:-1].rstrip()
    toks = _tokens(stripped)
    if not toks:
        return []
    out: list[tuple[str, str, str]] = []
    first = toks[0]
    if first in ("export", "ENV"):
        rest = toks[1:]
        if first == "ENV" and len(rest) == 2 and "=" not in rest[0]:
            return [(rest[0], rest[1], "export")]
        for t in rest:
            m = _ASSIGN_RE.match(t)
            if m:
                out.append((m.group(1), m.group(2), "export"))
        return out
    if first == "setenv" and len(toks) >= 2:
        return [(toks[1], " ".join(toks[2:]), "export")]
    # leading NAME=value tokens: a command prefix when a command follows, else plain assignments
    lead: list[tuple[str, str]] = []
    k = 0
    while k < len(toks):
        m = _ASSIGN_RE.match(toks[k])
        if not m:
            break
        lead.append((m.group(1), m.group(2)))
        k += 1
    if lead:
        if (
            k < len(toks)
            and toks[k] not in _PREFIX_BREAKERS - {"env", "nohup", "time", "exec", "command", "sudo"}
            or continued
        ):
            out.extend((n, v, "launch_arg") for n, v in lead)
        else:
            origin = "export" if script else "env_dump"
            out.extend((n, v, origin) for n, v in lead)
    out.extend(_launch_settings(toks[k:]))
    return out


def _launch_settings(toks: list[str]) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    prev: str | None = None
    k = 0
    while k < len(toks):
        t = toks[k]
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if t in ("-x", "-e", "--env", "--export", "-genv") and nxt is not None:
            if t == "--export":
                out.extend((n, v, "launch_arg") for n, v in _split_export_list(nxt))
            elif t == "-genv":
                m = _ASSIGN_RE.match(nxt)
                if m:
                    out.append((m.group(1), m.group(2), "launch_arg"))
                elif k + 2 < len(toks):
                    out.append((nxt, toks[k + 2], "launch_arg"))
                    k += 1
            else:
                m = _ASSIGN_RE.match(nxt)
                if m:
                    out.append((m.group(1), m.group(2), "launch_arg"))
            k += 2
            prev = None
            continue
        if t.startswith("--export="):
            out.extend((n, v, "launch_arg") for n, v in _split_export_list(t[len("--export=") :]))
        elif t.startswith("--env="):
            m = _ASSIGN_RE.match(t[len("--env=") :])
            if m:
                out.append((m.group(1), m.group(2), "launch_arg"))
        elif (prev is None or prev in _PREFIX_BREAKERS) and _ASSIGN_RE.match(t):
            # NAME=value after `env`, `&&`, `;`...: a command prefix
            j = k
            lead: list[tuple[str, str]] = []
            while j < len(toks):
                m = _ASSIGN_RE.match(toks[j])
                if not m:
                    break
                lead.append((m.group(1), m.group(2)))
                j += 1
            if j < len(toks) or prev == "env":
                out.extend((n, v, "launch_arg") for n, v in lead)
            k = j
            prev = toks[j - 1] if j > 0 else None
            continue
        prev = t
        k += 1
    return out


def _is_dump(lines: list[str]) -> bool:
    nonempty = [ln for ln in lines if ln.strip()]
    if len(nonempty) < 2:
        return False
    hits = sum(1 for ln in nonempty if _DUMP_LINE_RE.match(ln) and not ln.startswith((" ", "\t")))
    return hits / len(nonempty) >= 0.6


def _is_script(lines: list[str]) -> bool:
    if lines and _SHEBANG_RE.match(lines[0]):
        return True
    for ln in lines[:400]:
        s = ln.lstrip()
        if s.startswith(("#SBATCH", "#PBS", "#BSUB")):
            return True
    return False


# ----------------------------------------------------------------------------------------------------------------
# Sniff


def sniff(head: str) -> int:
    try:
        lines = root_prompts(head).split("\n")
        nonempty = [ln for ln in lines if ln.strip()]
        n = len(nonempty)
        if n == 0 or nonempty[0].lstrip().startswith("#%Module") or (
            re.match(r"-{20,}\s*$", nonempty[0]) and n > 1 and re.match(r"\s*/\S+:\s*$", nonempty[1])
        ):
            return 0  # a Tcl modulefile or `module show` of one (its setenv lines are the modulefile parser's)
        dump = _is_dump(lines)
        script = _is_script(lines)
        setting_lines = 0
        flag_lines = 0
        nccl_log = 0
        for ln in nonempty:
            if _NCCL_LOG_RE.search(ln):
                nccl_log += 1
                continue
            if not _COMM_HINT_RE.search(ln):
                continue
            if any(is_comm_env(name) for name, _v, _o in _settings_from_line(ln, script, dump)):
                setting_lines += 1
                if _FLAG_RE.search(ln):
                    flag_lines += 1
        if setting_lines == 0:
            return 0
        if nccl_log * 3 >= n:
            return min(30, 10 * setting_lines)
        density = setting_lines / n
        if dump:
            return 90
        if script:
            return min(95, 70 + 5 * setting_lines)
        if density >= 0.25:
            return 75
        if flag_lines >= 3:
            return 65
        if density >= 0.1 and setting_lines >= 3:
            return 60
        return min(30, 10 * setting_lines)
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------------------
# Parse


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        lines = root_prompts(text).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        dump = _is_dump(lines)
        script = _is_script(lines)
        for idx, raw in enumerate(lines):
            line = raw.rstrip("\r")
            if _NCCL_LOG_RE.search(line) or not _COMM_HINT_RE.search(line):
                continue
            for name, value, origin in _settings_from_line(line, script, dump):
                if not is_comm_env(name):
                    continue
                records.append(
                    EnvSetting(
                        source=source,
                        line=idx + 1,
                        text=clip(raw),
                        host=host,
                        name=name,
                        value=_strip_quotes(value),
                        origin=origin,
                    )
                )
    except Exception as exc:  # pragma: no cover - never raise: keep what was parsed, report it
        problems.append(f"env parser stopped early: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)
