"""``rdma statistic show`` (iproute2 ``rdma`` tool): per-port RDMA provider (hw) counters.

Shapes (iproute2 ``rdma/stat.c`` ``res_get_hwcounters`` + ``rdma/res.c`` ``print_link``/``res_print_u64``)::

    link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 ... np_cnp_sent 0          # default: one line per port
    link mlx5_0/1                                                                    # -p: one counter per line
        rx_write_requests 0
    [{"ifindex":0,"ifname":"mlx5_0","port":1,"rx_write_requests":0, ...}]             # -j / -jp

One :class:`~diagnose.parsers._host.RdmaHwCounter` per counter (names as the kernel prints them, the same as
sysfs ``hw_counters/``); ``link mlx5_0/-`` (no port) gives ``port=None``. A port's counters may continue on
following lines (``-p``, or a wrapped terminal/e-mail copy of the one-line form): tokens are paired in order
until the next ``link`` line, blank line or prompt. ``rdma statistic qp show`` lines (``cntn``/``qp-type``/
``LQPN``: per-QP counter sets, not port totals) and ``rdma statistic mode`` lines are skipped. ``error:`` lines
become :class:`~diagnose.parsers._ib.ToolError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import RdmaHwCounter, shell_prompt
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines

FORMAT = "rdma_statistic"

_LINK_RE = re.compile(r"^\s*link\s+(?P<dev>[A-Za-z][\w.\-]*)/(?P<port>\d+|-)(?P<rest>(?:\s.*)?)$")
_NAME_RE = re.compile(r"^[A-Za-z_][\w.\-]*$")
_ERR_RE = re.compile(r"^\s*(?:error|Error|rdma):?\s.*$")
_QP_KEYS = frozenset({"cntn", "qp-type", "lqpn", "pid", "comm", "qp", "mr", "mode", "auto", "optional-counters"})
_JSON_KEYS = frozenset({"ifindex", "ifname", "port", "cntn", "qp-type", "pid", "comm", "lqpn", "mode"})

_SNIFF_LINK = re.compile(
    r"^[ \t]*link[ \t]+[A-Za-z][\w.\-]*/(?:\d+|-)(?:[ \t]+[A-Za-z_][\w.\-]*[ \t]+\d+)+", re.MULTILINE
)
_SNIFF_LINK_ALONE = re.compile(
    r"^[ \t]*link[ \t]+[A-Za-z][\w.\-]*/(?:\d+|-)[ \t]*\n[ \t]+[a-z_][\w.\-]*[ \t]+\d+", re.MULTILINE
)
_SNIFF_JSON = re.compile(
    r'"ifname"\s*:\s*"[^"]+".*?"(?:rx_write_requests|out_of_sequence|np_cnp_sent|rp_cnp_handled|'
    r'local_ack_timeout_err|packet_seq_err|out_of_buffer|duplicate_request)"\s*:\s*\d',
    re.DOTALL,
)


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    full = len(_SNIFF_LINK.findall(head))
    alone = len(_SNIFF_LINK_ALONE.findall(head))
    if full + alone >= 1:
        if "cntn" in head and full + alone <= head.count("cntn"):
            return 45  # only `rdma statistic qp show` lines
        return 95
    if _SNIFF_JSON.search(head[:65536]):
        return 85
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        if text.lstrip().startswith(("[", "{")) and '"ifname"' in text:
            _parse_json(text, source, host, records, problems)
        else:
            _parse(text, source, host, records, problems)
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


@dataclass
class _Link:
    device: str
    port: int | None
    line: int
    host: str | None
    skip: bool
    tokens: list[tuple[str, int, str]] = field(default_factory=list)  # (token, line no, line text)


def _flush(link: _Link | None, source: str, records: list[Record], problems: list[str], at_eof: bool) -> None:
    if link is None or link.skip:
        return
    toks = link.tokens
    i = 0
    while i + 1 < len(toks):
        name, n, text = toks[i]
        val = toks[i + 1][0]
        if not _NAME_RE.match(name) or not val.isdigit():
            if name.lower() in _QP_KEYS:
                return
            problems.append(f"line {n}: unexpected token {name!r} {val!r} in counters of {link.device}")
            i += 1
            continue
        records.append(
            RdmaHwCounter(
                source=source,
                line=n,
                text=clip(text),
                host=link.host,
                device=link.device,
                port=link.port,
                counter=name,
                value=int(val),
            )
        )
        i += 2
    if i < len(toks):
        name, n, _ = toks[i]
        where = "truncated: " if at_eof else f"line {n}: "
        problems.append(f"{where}counter {name!r} of {link.device} has no value")


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    link: _Link | None = None
    blank = False
    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            blank = True  # ends the port's block; flushed when more text follows (else at EOF, as truncation)
            continue
        if blank:
            _flush(link, source, records, problems, False)
            link = None
            blank = False
        p = shell_prompt(line)
        if p is not None:
            _flush(link, source, records, problems, False)
            link = None
            if p[0]:
                cur_host = p[0]
            continue
        m = _LINK_RE.match(line)
        if m:
            _flush(link, source, records, problems, False)
            rest = m.group("rest").split()
            port = None if m.group("port") == "-" else int(m.group("port"))
            skip = bool(rest) and rest[0].lower() in _QP_KEYS  # `qp show` counter sets, `qp mode` lines
            link = _Link(device=m.group("dev"), port=port, line=n, host=cur_host, skip=skip)
            link.tokens.extend((t, n, line) for t in rest)
            continue
        if _ERR_RE.match(line) and link is None:
            records.append(
                ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="rdma", message=stripped)
            )
            continue
        if link is not None:
            toks = stripped.split()
            if all(re.fullmatch(r"[\w.\-:<>,]+", t) for t in toks):
                if any(t.startswith("LQPN") for t in toks):
                    link.skip = True
                link.tokens.extend((t, n, line) for t in toks)
                continue
            _flush(link, source, records, problems, False)
            link = None
    _flush(link, source, records, problems, True)


def _parse_json(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"truncated or invalid rdma statistic JSON: {exc}")
        return
    items = doc if isinstance(doc, list) else [doc]
    line_of = _line_finder(text)
    for item in items:
        if not isinstance(item, dict) or "ifname" not in item or "cntn" in item or "lqpn" in item:
            continue
        dev = str(item.get("ifname"))
        port_v = item.get("port")
        port = port_v if isinstance(port_v, int) else None
        for k, v in item.items():
            if k in _JSON_KEYS or not isinstance(v, int) or isinstance(v, bool) or v < 0:
                continue
            n, ltext = line_of(k)
            records.append(
                RdmaHwCounter(
                    source=source, line=n, text=clip(ltext), host=host, device=dev, port=port, counter=k, value=v
                )
            )


def _line_finder(text: str) -> Callable[[str], tuple[int, str]]:
    """Maps a JSON key to the line it first appears on after the previous match (pretty ``-jp`` output);
    one-line JSON cites line 1."""
    lines = text.split("\n")
    pos = {"i": 0}

    def find(key: str) -> tuple[int, str]:
        needle = f'"{key}"'
        for i in range(pos["i"], len(lines)):
            if needle in lines[i]:
                pos["i"] = i + 1 if len(lines) > 1 else 0
                return i + 1, lines[i]
        for i in range(len(lines)):
            if needle in lines[i]:
                return i + 1, lines[i]
        return 1, lines[0] if lines else ""

    return find
