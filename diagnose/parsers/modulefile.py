"""Environment modulefiles: Lmod Lua and Tcl (Environment Modules), as files or as ``module show`` prints them.

Recognised (only variables accepted by :func:`diagnose.parsers._common.is_comm_env` are kept, as ``modulefile``
:class:`~diagnose.parsers._common.EnvSetting` records)::

    setenv("NCCL_IB_SL","1")            pushenv("UCX_NET_DEVICES", "mlx5_0:1")         (Lmod Lua)
    #%Module1.0                         set root /opt/nccl                                (Tcl; ``set`` variables
    setenv NCCL_IB_HCA mlx5_0           setenv NCCL_HOME $root   setenv X ${root}/lib     are substituted)
    setenv          NCCL_IB_SL 1                                                          (``module show``, Tcl)

``prepend_path``/``append_path``/``prepend-path`` (paths, not settings), ``whatis``/``module-whatis``, ``help([[
... ]])`` blocks, ``proc ModulesHelp { } { ... }`` bodies and comments (``--`` in Lua, ``#`` in Tcl) are ignored;
quotes and braces around values are stripped; a Lua value that is not a string literal (``os.getenv(...)``) is
skipped. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._common import EnvSetting, is_comm_env
from diagnose.parsers.base import guarded_parse

FORMAT = "modulefile"

_LUA_SET = re.compile(r"""^\s*(?:setenv|pushenv)\s*\(\s*(["'])(?P<name>[A-Za-z_]\w*)\1\s*,\s*(?P<val>.*?)\s*\)\s*(?:--.*)?$""")
_LUA_STR = re.compile(r"""^(["'])(?P<v>.*?)\1\s*(?:,\s*(?:true|false))?$""")
_LUA_CALL = re.compile(r"^\s*(?:setenv|pushenv|prepend_path|append_path|remove_path|whatis|help|load|family|"
                       r"depends_on|conflict|prereq|always_load|unsetenv)\s*\(")
_LUA_HELP_OPEN = re.compile(r"^\s*help\s*\(\s*\[(=*)\[")
_TCL_COOKIE = re.compile(r"^\s*#%Module")
_TCL_SETENV = re.compile(r"^\s*setenv\s+(?P<name>[A-Za-z_]\w*)\s+(?P<val>\S.*?)\s*$")
_TCL_SET = re.compile(r"^\s*set\s+(?P<name>[A-Za-z_]\w*)\s+(?P<val>\S.*?)\s*$")
_TCL_CMD = re.compile(r"^\s*(?:setenv|prepend-path|append-path|module-whatis|set|conflict|prereq|module)\s+\S")
_TCL_PROC = re.compile(r"^\s*proc\s+\S+\s*\{[^}]*\}\s*\{\s*$")
_SHOW_RULE = re.compile(r"^-{20,}\s*$")
_SHOW_PATH = re.compile(r"^\s*/\S+:\s*$")
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and ((v[0] == v[-1] and v[0] in "'\"") or (v[0] == "{" and v[-1] == "}")):
        return v[1:-1]
    return v


def sniff(head: str) -> int:
    try:
        lines = [ln for ln in head.split("\n") if ln.strip()]
        if not lines:
            return 0
        if _TCL_COOKIE.match(lines[0]):
            return 95 if any(_TCL_SETENV.match(ln) for ln in lines) else 85
        lua = sum(1 for ln in lines[:400] if _LUA_CALL.match(ln))
        lua_set = sum(1 for ln in lines[:400] if _LUA_SET.match(ln))
        if lua_set and lua >= 2:
            return 90
        if lua_set:
            return 60
        # `module show` of a Tcl modulefile: a dashed rule, the file's path with a colon, then Tcl commands
        if any(_SHOW_RULE.match(ln) for ln in lines[:5]) and any(_SHOW_PATH.match(ln) for ln in lines[:6]):
            tcl = sum(1 for ln in lines[:400] if _TCL_CMD.match(ln))
            if tcl >= 2 and any(_TCL_SETENV.match(ln) for ln in lines):
                return 85
        return 0
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, lambda t, s, h, r, p: _parse(t, s, h, r), text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record]) -> None:
    tcl_vars: dict[str, str] = {}
    help_close: str | None = None  # the closing bracket of an open Lua help([[ ... ]]) block
    proc_depth = 0  # inside a Tcl proc body

    def emit(idx: int, raw: str, name: str, value: str) -> None:
        if is_comm_env(name):
            records.append(EnvSetting(source=source, line=idx, text=clip(raw), host=host, name=name, value=value,
                                      origin="modulefile"))

    for idx, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if help_close is not None:
            if help_close in line:
                help_close = None
            continue
        if proc_depth:
            proc_depth += line.count("{") - line.count("}")
            proc_depth = max(proc_depth, 0)
            continue
        s = line.strip()
        if not s or s.startswith("--"):
            continue
        m = _LUA_HELP_OPEN.match(line)
        if m:
            close = "]" + m.group(1) + "]"
            if close not in line[m.end():]:
                help_close = close
            continue
        m = _LUA_SET.match(line)
        if m:
            v = _LUA_STR.match(m.group("val"))
            if v:
                emit(idx, raw, m.group("name"), v.group("v"))
            continue
        if s.startswith("#"):
            continue
        if _TCL_PROC.match(line):
            proc_depth = 1
            continue
        m = _TCL_SET.match(line)
        if m:
            tcl_vars[m.group("name")] = _subst(_unquote(m.group("val")), tcl_vars)
            continue
        m = _TCL_SETENV.match(line)
        if m:
            val = m.group("val")
            val = re.sub(r"\s+#.*$", "", val) if not val.startswith(("{", '"')) else val
            emit(idx, raw, m.group("name"), _subst(_unquote(val), tcl_vars))


def _subst(value: str, tcl_vars: dict[str, str]) -> str:
    return _VAR.sub(lambda m: tcl_vars.get(m.group(1) or m.group(2), m.group(0)), value)
