"""``show_gids`` (Mellanox mlnx-tools ``sbin/show_gids``, shipped with MLNX_OFED / DOCA-OFED): the RoCE GID table.

The script (Mellanox/mlnx-tools@adaec78 ``sbin/show_gids``; the same body since ``ofed_scripts/show_gids`` of 2017)
reads ``/sys/class/infiniband/<dev>/ports/<p>/gids/<i>`` with ``gid_attrs/types/<i>`` and ``gid_attrs/ndevs/<i>``,
skips the all-zero GIDs (and an all-zero ``fe80::`` one) and prints, with tabs::

    DEV<tab>PORT<tab>INDEX<tab>GID<tab><tab><tab><tab><tab>IPv4  <tab><tab>VER<tab>DEV
    ---<tab>----<tab>-----<tab>---<tab><tab><tab><tab><tab>------------  <tab>---<tab>---
    mlx5_0<tab>1<tab>0<tab>fe80:0000:0000:0000:0ac0:ebff:fe21:03da<tab><tab><tab>v1<tab>rdma0
    mlx5_0<tab>1<tab>3<tab>0000:0000:0000:0000:0000:ffff:c0a8:d3f2<tab>192.168.211.242  <tab>v2<tab>rdma0
    n_gids_found=4

``VER`` is what ``grep -o "[Vv].*"`` keeps of the type file (``RoCE v2`` -> ``v2``, ``IB/RoCE v1`` -> ``v1``), so an
InfiniBand port prints ``v1`` and no netdev; the IPv4 column is filled for every GID whose first group is ``0000``.
Pastes come with the tabs expanded to spaces, indented, behind a ``$``/``user@host:~#`` prompt (``show_gids``,
``show_gids mlx5_0``, ``show_gids --dev=mlx5_0``, ``tools/show_gids``), in a markdown table (``|``-separated), behind
``#``/``*`` comment markers, cut anywhere; the header may lack the IPv4/VER/DEV columns (copies of the script that
print less). Rows need not be in index order: before 2023 the script listed ``gids/`` with plain ``ls`` (``0 1 10
11 ... 2``), and ``--slim`` stops at the second all-zero entry.

Records:

* :class:`~diagnose.parsers._ib.GidEntry` per row (``gid`` lowercased as printed; ``gid_type`` ``RoCE v1`` /
  ``RoCE v2`` for ``v1``/``v2``, ``IB`` for the ``v1`` rows of a port none of whose rows has a netdev or a ``v2``
  (what the script prints for an InfiniBand port), None when ``VER`` is empty). The IPv4 column is not kept: it is
  the GID's own low 32 bits (``::ffff:a.b.c.d``), which the extractors read from the GID.
* :class:`~diagnose.parsers._host.DevNetMap` per distinct (device, port, netdev) of a table, as the sysfs parser
  emits for ``gid_attrs/ndevs`` (``up`` None).
* :class:`GidTable` per table (one per ``show_gids`` run): whether it ended (``n_gids_found=``) or was cut, and then
  which device/port it was cut in, so a consumer does not read a cut device's missing rows as absent entries.

A prompt names the host (``localhost`` names none: the bundle's hint is kept). A row cut inside its GID is a
problem, as is an ``n_gids_found`` that differs from the rows shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import DevNetMap, shell_prompt
from diagnose.parsers._ib import GidEntry
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "show_gids"


@dataclass(frozen=True, slots=True, kw_only=True)
class GidTable(Record):
    """One ``show_gids`` run, cited at its header line (its first row when the header was not pasted).

    ``device_filter`` is the device its command named (``show_gids mlx5_0``, ``--dev=mlx5_0``), None for all
    devices or without a command line. ``rows`` counts the GID rows shown; ``found`` is the script's own
    ``n_gids_found=`` (None when the paste ends before it). ``cut_device``/``cut_port`` name the last device port
    shown when ``found`` is None: its table may continue past the paste.
    """

    device_filter: str | None
    rows: int
    found: int | None
    cut_device: str | None
    cut_port: int | None


_GID = r"[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){7}"
_ROW_RE = re.compile(
    rf"^(?P<dev>[A-Za-z][\w.\-]*)\s+(?P<port>\d{{1,3}})\s+(?P<idx>\d{{1,5}})\s+(?P<gid>{_GID})"
    r"(?:\s+(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3}))?(?:\s+(?P<ver>[vV][12]))?(?:\s+(?P<ndev>[\w.\-@]{1,32}))?\s*$"
)
_CUT_ROW_RE = re.compile(r"^(?P<dev>[A-Za-z][\w.\-]*)\s+\d{1,3}(?:\s+\d{1,5}(?:\s+[0-9A-Fa-f:]{0,38})?)?$")
_HEADER_RE = re.compile(r"^DEV\s+PORT\s+INDEX\s+GID(?:\s+IPv4)?(?:\s+VER)?(?:\s+DEV)?\s*$")
_RULE_RE = re.compile(r"^-{3}\s+-{4}\s+-{3,5}\s+-{3}(?:\s+-+)*\s*$")
_FOUND_RE = re.compile(r"^n_gids_found=(?P<n>\d+)\s*$")
_MARK_RE = re.compile(r"^\s*(?:[#*>]\s*)?")
_CMD_DEV_RE = re.compile(r"(?:^|\s)(?:--dev=|-d\s+)?(?P<dev>[A-Za-z][\w.\-]*_\w+|rocep\w+|bnxt_re\d+|irdma\d+)\b")
_ECHO_RE = re.compile(r"^\s*[$#]\s*(?P<cmd>\S.*)$")
_NO_HOST = frozenset({"localhost", "localhost.localdomain"})

_SNIFF_HEADER = re.compile(r"^[ \t|#*>]*DEV[ \t|]+PORT[ \t|]+INDEX[ \t|]+GID\b", re.MULTILINE)
_SNIFF_ROW = re.compile(
    rf"^[ \t|#*>]*[A-Za-z][\w.\-]*[ \t|]+\d{{1,3}}[ \t|]+\d{{1,5}}[ \t|]+{_GID}\b", re.MULTILINE)
_SNIFF_FOUND = re.compile(r"^[ \t#*>]*n_gids_found=\d+[ \t]*$", re.MULTILINE)


def sniff(head: str) -> int:
    header = _SNIFF_HEADER.search(head) is not None
    found = _SNIFF_FOUND.search(head) is not None
    rows = 0
    for _ in _SNIFF_ROW.finditer(head):
        rows += 1
        if rows >= 3:
            break
    if header and (rows or found):
        return 95
    if header or (found and rows):
        return 80
    if rows >= 3:
        return 60  # rows whose header was cut off the paste
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


@dataclass
class _Row:
    line: int
    text: str
    dev: str
    port: int
    idx: int
    gid: str
    ver: str | None
    ndev: str | None


class _Table:
    def __init__(self, line: int, text: str, host: str | None, device_filter: str | None) -> None:
        self.line, self.text, self.host, self.device_filter = line, text, host, device_filter
        self.rows: list[_Row] = []
        self.found: int | None = None
        self.headed = False


def _unmarked(line: str) -> str:
    """The line without a markdown table's pipes or a leading ``#``/``*``/``>`` comment or quote marker."""
    if line.count("|") >= 3:
        line = line.replace("|", " ")
    return _MARK_RE.sub("", line, count=1).strip()


def _device_filter(command: str) -> str | None:
    parts = command.split(None, 1)
    if not parts or "show_gid" not in parts[0]:
        return None
    m = _CMD_DEV_RE.search(parts[1]) if len(parts) > 1 else None
    return m.group("dev") if m else None


def _close(t: _Table | None, source: str, records: list[Record], problems: list[str]) -> None:
    if t is None or not (t.rows or t.headed or t.found is not None):
        return
    ports_ib: dict[tuple[str, int], bool] = {}
    for r in t.rows:
        key = (r.dev, r.port)
        ib = ports_ib.get(key, True)
        ports_ib[key] = ib and r.ndev is None and (r.ver or "").lower() != "v2"
    netdevs: set[tuple[str, int, str]] = set()
    for r in t.rows:
        ver = (r.ver or "").lower()
        if ver == "v1" and ports_ib[(r.dev, r.port)]:
            gtype: str | None = "IB"
        elif ver in ("v1", "v2"):
            gtype = f"RoCE {ver}"
        else:
            gtype = None
        records.append(GidEntry(source=source, line=r.line, text=clip(r.text), host=t.host, device=r.dev,
                                port=r.port, index=r.idx, gid=r.gid.lower(), gid_type=gtype))
        if r.ndev and (r.dev, r.port, r.ndev) not in netdevs:
            netdevs.add((r.dev, r.port, r.ndev))
            records.append(DevNetMap(source=source, line=r.line, text=clip(r.text), host=t.host, device=r.dev,
                                     port=r.port, netdev=r.ndev, up=None))
    last = t.rows[-1] if t.rows else None
    cut = t.found is None and last is not None
    if t.found is not None and t.found != len(t.rows):
        problems.append(f"line {t.line}: n_gids_found={t.found} but {len(t.rows)} GID row(s) shown")
    line, text = (t.line, t.text) if t.headed or last is None else (t.rows[0].line, t.rows[0].text)
    records.append(GidTable(source=source, line=line, text=clip(text), host=t.host,
                            device_filter=t.device_filter, rows=len(t.rows), found=t.found,
                            cut_device=last.dev if cut and last else None,
                            cut_port=last.port if cut and last else None))


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    table: _Table | None = None
    pending_filter: str | None = None
    for n, raw in iter_lines(text):
        if not raw.strip():
            continue
        p = shell_prompt(raw)
        if p is not None:
            _close(table, source, records, problems)
            table = None
            name, command = p
            cur_host = name if name and name.lower() not in _NO_HOST else host
            pending_filter = _device_filter(command)
            continue
        line = _unmarked(raw)
        if _HEADER_RE.match(line):
            _close(table, source, records, problems)
            table = _Table(n, raw, cur_host, pending_filter)
            table.headed = True
            pending_filter = None
            continue
        if _RULE_RE.match(line):
            continue
        m = _FOUND_RE.match(line)
        if m:
            if table is None:
                table = _Table(n, raw, cur_host, pending_filter)
            table.found = int(m.group("n"))
            _close(table, source, records, problems)
            table, pending_filter = None, None
            continue
        m = _ROW_RE.match(line)
        if m:
            if table is None:
                table = _Table(n, raw, cur_host, pending_filter)
                pending_filter = None
            table.rows.append(_Row(line=n, text=raw, dev=m.group("dev"), port=int(m.group("port")),
                                   idx=int(m.group("idx")), gid=m.group("gid"), ver=m.group("ver"),
                                   ndev=m.group("ndev")))
            continue
        if table is not None and _CUT_ROW_RE.match(line):
            problems.append(f"line {n}: GID row cut short ({line[:60]!r})")
            continue
        m = _ECHO_RE.match(raw)
        if m and (raw.lstrip().startswith("$") or "show_gid" in m.group("cmd").split()[0]):
            # `$ show_gids mlx5_0` (a prompt without user@host), or `# show_gids` as root: a new run begins
            _close(table, source, records, problems)
            table = None
            pending_filter = _device_filter(m.group("cmd"))
    _close(table, source, records, problems)
