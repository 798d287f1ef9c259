"""NCCL configuration files: ``/etc/nccl.conf``, ``~/.nccl.conf`` and the file ``NCCL_CONF_FILE`` names.

NCCL's environment-variables page: "Environment variables can also be set statically in /etc/nccl.conf (for an
administrator to set system-wide values) or in ${NCCL_CONF_FILE} (since 2.23)", before 2.23 "or in ~/.nccl.conf (for
users)", with the example ``NCCL_DEBUG=WARN`` / ``NCCL_SOCKET_IFNAME==ens1f0``. NCCL reads them as
``src/misc/param.cc`` ``setEnvFile`` does: one ``NAME=value`` per line, a line whose first character is ``#`` is a
comment, a line without ``=`` is skipped, the name is everything before the first ``=`` (not trimmed) and the value
everything after it (not unquoted: ``==ens1f0`` is the value ``=ens1f0``). Each pair is set with no overwrite, so
a variable the environment already has keeps its value (hence origin rank 0 in
:data:`~diagnose.parsers._common.ORIGIN_PRECEDENCE`) and, within one file, the first line setting a name is the
one NCCL keeps: a later repeat is reported as a problem, not a record.

Records: :class:`~diagnose.parsers._common.EnvSetting` with origin ``nccl_conf`` for communication variables
(:func:`~diagnose.parsers._common.is_comm_env`). A name with blanks around it is not the variable NCCL looks up: a
problem, not a record. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._common import EnvSetting, is_comm_env

FORMAT = "nccl_conf"

_LINE = re.compile(r"^(?P<name>[A-Z][A-Za-z0-9_]*)=(?P<val>.*)$")
_NAME_ANY = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*=")
_COMMAND_AFTER = re.compile(r"\s(?:[A-Za-z_]\w*=|--?[A-Za-z])")


def sniff(head: str) -> int:
    """An nccl.conf holds NCCL's own settings and comments only. An ``env`` dump names PATH, HOME, SHELL...; a
    script has a shebang, ``export`` or commands. All lines ``NAME=value`` of communication variables, most of them
    ``NCCL_``: 95 with a ``#`` comment line (no env dump has one), else 92 (just above an env dump of the same
    lines, which only a file name hinting ``env`` tips back)."""
    try:
        lines = [ln.rstrip("\r") for ln in head.split("\n")]
        if lines and len(head) >= 64 * 1024:
            lines = lines[:-1]  # a cut last line
        settings = nccl = comments = 0
        for ln in lines:
            if not ln.strip():
                continue
            if ln.lstrip().startswith("#"):
                if ln.startswith("#!"):
                    return 0
                comments += 1
                continue
            m = _LINE.match(ln) or _NAME_ANY.match(ln)  # `NAME = value`: a slip NCCL ignores, still its file
            if not m or not is_comm_env(m.group("name")):
                return 0
            if _COMMAND_AFTER.search(ln.split("=", 1)[1]):
                return 0  # `NCCL_DEBUG=INFO NCCL_X=1 torchrun --nnodes 2 ...`: a launch line's prefix
            settings += 1
            nccl += m.group("name").startswith("NCCL_")
        if settings == 0 or nccl * 2 < settings:
            return 0
        return 95 if comments else 92
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        seen: dict[str, int] = {}
        for idx, raw in enumerate(text.split("\n"), 1):
            line = raw.rstrip("\r")
            if not line or line[0] == "#" or "=" not in line:
                continue
            m = _LINE.match(line)
            if not m:
                loose = _NAME_ANY.match(line)
                if loose and is_comm_env(loose.group("name")):
                    problems.append(f"line {idx}: {loose.group('name')} has blanks around its name; NCCL reads the"
                                    " name up to '=' as it is, so it does not set that variable")
                continue
            name, value = m.group("name"), m.group("val")
            if not is_comm_env(name):
                continue
            if name in seen:
                problems.append(f"line {idx}: {name} set again; NCCL keeps the first setting (line {seen[name]})")
                continue
            seen[name] = idx
            records.append(EnvSetting(source=source, line=idx, text=clip(raw), host=host, name=name, value=value,
                                      origin="nccl_conf"))
    except Exception as exc:  # noqa: BLE001 - a parser reports, never raises
        problems.append(f"nccl_conf parser stopped early: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)
