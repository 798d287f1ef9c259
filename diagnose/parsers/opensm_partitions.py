"""OpenSM ``partitions.conf``: which ports are members of which partition (P_Key), full or limited.

Syntax (linux-rdma/opensm ``doc/partition-config.txt``, opensm(8) "PARTITION CONFIGURATION", parsed by
``opensm/osm_prtn_config.c``)::

    # comment
    Default=0x7fff, ipoib : ALL=full ;
    tenantA=0x8001, ipoib, defmember=full : 0x0002c903000a1234, 0x0002c903000a1240=limited ;
    storage=0x0030 :
            0x0002c903000a1250=full,
            ALL_CAS=limited ;

A definition is ``[Name][=PKey][,flag]* : <port list> ;``; it may be wrapped after ``:`` and between port
specifiers, and a PKey may be split over several definitions (merged by OpenSM). Only the low 15 bits of the PKey
are used. A port specifier is ``<PortGUID>[=full|limited|both]`` (a prefix of the word is enough; anything else,
and no flag, is the ``defmember`` of the definition, itself ``limited`` by default) or a keyword: ``ALL``,
``ALL_CAS``, ``ALL_SWITCHES``, ``ALL_ROUTERS``, ``SELF`` (the SM's own port). ``mgid=...`` lines declare multicast
groups and are skipped. Comments run from ``#`` to the end of the line.

Records: one :class:`~diagnose.parsers._pkeys.PartitionMember` per port specifier (GUIDs normalised), cited at the
line it is on. A prompt (``cat /etc/opensm/partitions.conf``) names the host. A definition without its closing
``;`` at the end of the text (a cut paste) is kept and reported; lines that are not partition syntax are problems.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers._pkeys import KEY_MASK, PartitionMember
from diagnose.parsers.base import guarded_parse

FORMAT = "opensm_partitions"
GROUPS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")

_SNIFF_DEF = re.compile(
    r"^[ \t]*[A-Za-z_][\w.\-]*[ \t]*=[ \t]*0x[0-9A-Fa-f]{1,4}[ \t]*(?:,[^:\n#]*)?:", re.MULTILINE)
_SNIFF_MEMBER = re.compile(
    r"(?:^|[\s,:])(?:ALL|ALL_CAS|ALL_SWITCHES|ALL_ROUTERS|SELF|0x[0-9A-Fa-f]{1,16})[ \t]*=[ \t]*(?:full|limited|both)\b")


def sniff(head: str) -> int:
    if ":" not in head:
        return 0
    text = "\n".join(line.split("#", 1)[0] for line in head.split("\n"))
    defs = len(_SNIFF_DEF.findall(text))
    members = len(_SNIFF_MEMBER.findall(text))
    if defs and (members or ";" in text):
        return 95 if members else 80
    if members >= 2 and ";" in text:
        return 70
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


@dataclass
class _Def:
    name: str
    pkey: int | None
    defmember: str
    ipoib: bool
    line: int


def _prefix_of(word: str, full: str) -> bool:
    return bool(word) and full.startswith(word)


def _membership(flag: str | None, default: str) -> str:
    if flag is None:
        return default
    f = flag.strip()
    if _prefix_of(f, "full"):
        return "full"
    if _prefix_of(f, "both"):
        return "both"
    return "limited"  # OpenSM: 'unrecognized port flag ... Assume limited'


def _member(name: str) -> str | None:
    """A group keyword or a normalised GUID (OpenSM ``strtoull(name, 0)``); None when neither."""
    n = name.strip()
    for g in GROUPS:  # OpenSM's order; it compares strlen(name) characters, so a prefix names the keyword
        if _prefix_of(n, g):
            return g
    try:
        v = int(n, 16) if n.lower().startswith("0x") else int(n, 10)
    except ValueError:
        return None
    return f"0x{v:016x}" if 0 < v < 1 << 64 else None


def _header(text: str, line: int, problems: list[str]) -> _Def | None:
    parts = [p.strip() for p in text.split(",")]
    first = parts[0]
    name, _, pk = first.partition("=")
    pkey: int | None = None
    if pk.strip():
        try:
            pkey = int(pk.strip(), 0) & KEY_MASK
        except ValueError:
            problems.append(f"line {line}: bad partition P_Key {pk.strip()!r}")
            return None
    d = _Def(name=name.strip(), pkey=pkey, defmember="limited", ipoib=False, line=line)
    for flag in parts[1:]:
        key, _, val = flag.partition("=")
        key = key.strip()
        if _prefix_of(key, "ipoib"):
            d.ipoib = True
        elif _prefix_of(key, "defmember"):
            v = val.strip()
            d.defmember = "full" if _prefix_of(v, "full") else "both" if _prefix_of(v, "both") else "limited"
    return d


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    cur: _Def | None = None
    for n, raw in iter_lines(text):
        p = shell_prompt(raw)
        if p is not None:
            if p[0]:
                cur_host = p[0]
            continue
        body = raw.split("#", 1)[0]
        while body.strip():
            if cur is None:
                head, colon, rest = body.partition(":")
                if not colon:
                    problems.append(f"line {n}: no partition definition found: {body.strip()[:80]!r}")
                    break
                cur = _header(head, n, problems)
                if cur is None:
                    break
                body = rest
                continue
            part, semi, rest = body.partition(";")
            if not part.strip().startswith("mgid"):  # a multicast group line is the group's, not ports
                for tok in part.split(","):
                    tok = tok.strip()
                    if not tok:
                        continue
                    name, eq, flag = tok.partition("=")
                    if name.strip().upper().startswith("NONE"):
                        continue
                    member = _member(name)
                    if member is None:
                        problems.append(f"line {n}: bad PortGUID {name.strip()[:40]!r}")
                        continue
                    records.append(PartitionMember(
                        source=source, line=n, text=clip(raw), host=cur_host, partition=cur.name, pkey=cur.pkey,
                        member=member, membership=_membership(flag if eq else None, cur.defmember),
                        ipoib=cur.ipoib,
                    ))
            if semi:
                cur = None
                body = rest
            else:
                break
    if cur is not None:
        problems.append(f"truncated: partition '{cur.name}' (line {cur.line}) has no closing ';'")
