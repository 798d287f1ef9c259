"""``smpquery pkeys <lid|guid|dr> [<out port>]`` (infiniband-diags; op names ``pkeys``/``PKeyTable``): a P_Key table.

Shape (rdma-core ``infiniband-diags/smpquery.c`` ``pkey_table``: eight keys a row, the row's first index before
the colon, then the table size)::

       0: 0x7fff 0x8010 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000
       8: 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000
    64 pkeys capacity for this port

The table carries no address of its own: the prompt or ``# smpquery ...`` echo before it gives the host the
command ran on and the port queried (a LID, ``-G <guid>``, or ``-D 0`` for the local port, with ``-C <ca>`` /
``-P <port>``). A capture is usually a loop over the job's LIDs.

Records: one :class:`~diagnose.parsers._pkeys.PkeyEntry` per non-zero key (0x0000 is an empty slot), with its
index, ``full`` from bit 15 and the capacity of its table. A table without its ``capacity`` line (a cut paste) is
kept and reported as a problem; rows out of sequence start a new table. ``ibwarn``/``iberror`` lines become
:class:`~diagnose.parsers._ib.ToolError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import ToolError, norm_guid, tool_error
from diagnose.parsers._lines import command_line, iter_lines, prompt
from diagnose.parsers._pkeys import FULL_BIT, PkeyEntry
from diagnose.parsers.base import guarded_parse

FORMAT = "smpquery_pkeys"
MIXABLE = True
ROW_KEYS = 8

_ROW_RE = re.compile(r"^\s*(?P<idx>\d{1,5}):\s+(?P<keys>0x[0-9A-Fa-f]{4}(?:\s+0x[0-9A-Fa-f]{4}){0,7})\s*$")
_CAP_RE = re.compile(r"^\s*(?P<n>\d{1,5}) pkeys capacity for this port\s*$")
_OP_RE = re.compile(r"(?:^|\s)(?:pkeys?|pkeytable)(?:\s+(?P<rest>.*))?$", re.IGNORECASE)
_OPT_VAL = re.compile(r"(?:^|\s)(?P<opt>-C|--Ca|-P|--Port)[\s=](?P<val>\S+)")
_TOOLS = ("smpquery",)

_SNIFF_ROW = re.compile(r"^[ \t]*\d{1,5}:[ \t]+0x[0-9A-Fa-f]{4}(?:[ \t]+0x[0-9A-Fa-f]{4}){3,7}[ \t]*$", re.MULTILINE)
_SNIFF_CAP = re.compile(r"^[ \t]*\d{1,5} pkeys capacity for this port[ \t]*$", re.MULTILINE)
_SNIFF_ZERO = re.compile(r"^[ \t]*0:[ \t]+0x[0-9A-Fa-f]{4}", re.MULTILINE)


def sniff(head: str) -> int:
    if "0x" not in head:
        return 0
    rows = len(_SNIFF_ROW.findall(head))
    caps = len(_SNIFF_CAP.findall(head))
    if rows and caps:
        return 95
    if rows >= 2 and _SNIFF_ZERO.search(head):
        return 70  # the capacity line was cut off
    if caps:
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


@dataclass
class _Target:
    """The port the next table belongs to, from the last command line."""

    host: str | None
    lid: int | None = None
    guid: str | None = None
    device: str | None = None
    port: int | None = None
    remote: bool = False


@dataclass
class _Table:
    target: _Target
    next_idx: int = 0
    entries: list[tuple[int, str, int, int]] = field(default_factory=list)  # (line, text, index, pkey)


def target_of(cmd: str, host: str | None) -> _Target | None:
    """The port a ``smpquery pkeys`` command line queries; None when ``cmd`` is not one."""
    words = cmd.split()
    if not words or not any(w.rsplit("/", 1)[-1] == "smpquery" for w in words[:3]):
        return None
    m = _OP_RE.search(cmd)
    if m is None:
        return None
    t = _Target(host=host)
    opts = {o.group("opt"): o.group("val") for o in _OPT_VAL.finditer(cmd)}
    t.device = opts.get("-C") or opts.get("--Ca")
    port_opt = opts.get("-P") or opts.get("--Port")
    t.port = int(port_opt) if port_opt and port_opt.isdigit() else None
    direct = bool(re.search(r"(?:^|\s)(?:-D|--Direct)(?:\s|$)", cmd))
    by_guid = bool(re.search(r"(?:^|\s)(?:-G|--Guid)(?:\s|$)", cmd))
    rest = _OPT_VAL.sub(" ", " " + (m.group("rest") or ""))  # '-C mlx5_0 -P 1' are not the address
    args = [a for a in rest.split() if not a.startswith("-")]
    addr = args[0] if args else None
    if len(args) > 1 and args[1].isdigit():
        t.port = int(args[1])  # the switch port whose table is asked for
    if addr is None or (direct and addr == "0"):
        return t  # the local port
    if by_guid:
        t.guid = norm_guid(addr if addr.lower().startswith("0x") else "0x" + addr)
        t.remote = True
    elif not direct:
        try:
            t.lid = int(addr, 0)
            t.remote = True
        except ValueError:
            pass
    else:
        t.remote = True  # a directed route to another node: nothing names it here
    return t


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    target = _Target(host=host)
    table: _Table | None = None

    def close(capacity: int | None, at: int) -> None:
        nonlocal table
        if table is None:
            return
        if capacity is None:
            problems.append(f"line {at}: P_Key table without its 'pkeys capacity' line (cut off?)")
        t = table.target
        for n, raw, idx, key in table.entries:
            if capacity is not None and idx >= capacity:
                continue  # printed to fill the row, beyond the table
            records.append(PkeyEntry(source=source, line=n, text=clip(raw), host=t.host, device=t.device,
                                     port=t.port, lid=t.lid, guid=t.guid, index=idx, pkey=key,
                                     full=bool(key & FULL_BIT), remote=t.remote, capacity=capacity))
        table = None

    last = 0
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        last = n
        m = _ROW_RE.match(line)
        if m:
            idx = int(m.group("idx"))
            keys = [int(k, 16) for k in m.group("keys").split()]
            if table is not None and idx != table.next_idx:
                close(None, n)
            if table is None:
                if idx != 0:
                    problems.append(f"line {n}: P_Key rows start at index {idx} (the top of the table was cut off)")
                table = _Table(target=target, next_idx=idx)
            for i, key in enumerate(keys):
                if key & 0x7FFF:
                    table.entries.append((n, line, idx + i, key))
            table.next_idx = idx + ROW_KEYS
            if len(keys) < ROW_KEYS:
                table.next_idx = idx + len(keys)
            continue
        m = _CAP_RE.match(line)
        if m:
            if table is None:
                continue  # 'N pkeys capacity' of an empty (or unprinted) table: nothing to record
            close(int(m.group("n")), n)
            continue
        err = tool_error(line)
        if err is not None:
            records.append(ToolError(source=source, line=n, text=clip(line), host=target.host, tool="smpquery",
                                     message=err))
            continue
        p = prompt(line)
        cmd = p[1] if p is not None else command_line(line, _TOOLS)
        if p is not None or cmd is not None:
            if table is not None:
                close(None, n)
            cur_host = (p[0] if p is not None and p[0] else None) or target.host
            t = target_of(cmd or "", cur_host)
            target = t if t is not None else _Target(host=cur_host)
            continue
        if table is not None:
            close(None, n)  # another tool's output
    if table is not None:
        close(None, last)
