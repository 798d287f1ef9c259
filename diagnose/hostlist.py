"""Slurm hostlist expressions: ``gpu-a[001-004,010],gpu-b7`` -> ``['gpu-a001', ..., 'gpu-a010', 'gpu-b7']``.

Follows Slurm's own parser (``src/common/hostlist.c``, ``_hostlist_create_bracketed``) and the syntax documented in
``slurm.conf(5)`` / ``scontrol(1)``:

* hosts are separated by ``,`` or whitespace; a comma inside ``[...]`` does not separate hosts;
* a bracket holds comma-separated numbers and ``lo-hi`` ranges (``linux[0-64,128]``, ``lx[15,18,32-33]``);
* leading zeros fix the width of the number (``linux[0000-1023]`` -> ``linux0000`` ...); the width is that of ``lo``;
* several bracket groups in one name multiply out, the last group varying fastest
  (``rack[0-1]_blade[0-1]`` -> ``rack0_blade0, rack0_blade1, rack1_blade0, rack1_blade1``);
* text after the last ``]`` is a suffix (``node[1-2]-ib`` -> ``node1-ib, node2-ib``);
* order and duplicates are preserved (Slurm's ``hostlist`` does not sort: ``tux[2,1-2]`` = ``tux2,tux1,tux2``).

Errors Slurm also rejects (``lo > hi``, a non-numeric range, ``[`` without ``]``, nested brackets, an empty range)
raise :class:`HostlistError`, as does an expansion larger than ``limit`` hosts (Slurm caps a range at 64K hosts).
Pure: no I/O.
"""

from __future__ import annotations

import re

MAX_HOSTS = 65536

_SEPARATORS = " ,\t\n\r"
_RANGE_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


class HostlistError(ValueError):
    """A malformed hostlist expression (or one that expands to too many hosts)."""


def _tokens(expr: str) -> list[str]:
    """Split on separators, but keep ``prefix[1,3-4]suffix`` together (Slurm ``_next_tok``)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        if depth == 0 and ch in _SEPARATORS:
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _numbers(body: str, token: str) -> list[str]:
    """``001-003,010`` -> ['001', '002', '003', '010'] (each range padded to the width of its ``lo``)."""
    values: list[str] = []
    for part in body.split(","):
        m = _RANGE_RE.match(part)
        if not m:
            raise HostlistError(f"invalid range {part!r} in {token!r}")
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if lo > hi:
            raise HostlistError(f"invalid range {part!r} in {token!r} (start after end)")
        if hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(f"too many hosts in range {part!r}")
        width = len(lo_s)
        values.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
    return values


def _expand_token(token: str, limit: int) -> list[str]:
    """Expand one host token: literal text and ``[...]`` groups, cartesian product, last group fastest."""
    parts: list[list[str]] = []
    i = 0
    literal: list[str] = []
    while i < len(token):
        ch = token[i]
        if ch == "[":
            close = token.find("]", i + 1)
            if close < 0:
                raise HostlistError(f"missing ']' in {token!r}")
            body = token[i + 1 : close]
            if "[" in body:
                raise HostlistError(f"nested '[' in {token!r}")
            parts.append(["".join(literal)])
            literal = []
            parts.append(_numbers(body, token))
            i = close + 1
            continue
        literal.append(ch)  # a stray ']' is literal text, as in Slurm
        i += 1
    parts.append(["".join(literal)])
    total = 1
    for p in parts:
        total *= len(p)
        if total > limit:
            raise HostlistError(f"{token!r} expands to more than {limit} hosts")
    names = [""]
    for p in parts:
        names = [n + v for n in names for v in p]
    return names


def expand_hostlist(expr: str, *, limit: int = MAX_HOSTS) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in order (see the module docstring).

    ``""`` -> ``[]``. Raises :class:`HostlistError` on malformed input or more than ``limit`` hosts.
    """
    hosts: list[str] = []
    for tok in _tokens(expr or ""):
        names = _expand_token(tok, limit - len(hosts))
        hosts.extend(names)
        if len(hosts) > limit:
            raise HostlistError(f"hostlist expands to more than {limit} hosts")
    return hosts


def is_hostlist(expr: str) -> bool:
    """True when ``expr`` expands without error to at least one host."""
    try:
        return bool(expand_hostlist(expr))
    except HostlistError:
        return False
