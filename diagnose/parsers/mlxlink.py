"""``mlxlink`` / ``mstlink`` (NVIDIA MFT / mstflint): link state, FEC, BER, cable module and eye info.

Shape (Mellanox/mstflint ``mlxlink/modules/mlxlink_commander.cpp`` setPrintTitle / setPrintVal)::

    $ sudo mlxlink -d /dev/mst/mt41692_pciconf0 -p 1 -m -c

    Operational Info
    ----------------
    State                              : Active
    Physical state                     : LinkUp
    Speed                              : 100G
    Width                              : 4x
    FEC                                : Standard RS-FEC - RS(528,514)
    ...
    Troubleshooting Info
    --------------------
    Status Opcode                      : 0
    Recommendation                     : No issue was observed
    ...
    Physical Counters and BER Info
    ------------------------------
    Effective Physical Errors          : 0
    Effective Physical BER             : 15E-255
    Raw Physical Errors Per Lane       : 0,0,0,0
    Link Down Counter                  : 0

One :class:`~diagnose.parsers._host.MlxlinkInfo` per run. A run starts at an ``mlxlink``/``mstlink`` command
echo or, without one, at the first section title; a second ``Operational Info`` section starts a new run.
Labels are matched case-insensitively with the ``[unit]`` suffix dropped (``Temperature [C]``), so column
padding (MFT pads to 32 or 35), forum-collapsed spacing and label order (older MFT prints ``Raw Physical BER``
before the per-lane errors) do not matter. ``--json`` output (``{"result": {"output": {"Operational Info":
{...}}}}``) is read too. ``-E-`` error lines become :class:`~diagnose.parsers._ib.ToolError`. A run whose last
section has a title but no values, or whose last line is a label without a value, is reported as truncated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import MlxlinkInfo, norm_bdf, shell_prompt
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines

FORMAT = "mlxlink"

_SECTIONS = (
    "Operational Info",
    "Supported Info",
    "Troubleshooting Info",
    "Tool Information",
    "Module Info",
    "Physical Counters and BER Info",
    "EYE Opening Info",
    "Eye Opening Info",
    "FEC Capability Info",
    "Test Mode Info",
    "Transmitter Info",
    "Device Info",
    "BER Monitor Info",
    "External PHY Info",
    "Histogram of FEC Errors",
    "Port Info",
    "PCIe Operational (Enabled) Info",
    "Management Info",
    "Link Up Info",
)
_TITLE_RE = re.compile(r"^\s*(?P<title>[A-Z][A-Za-z0-9/()&\-. ]{2,60}?)\s*$")
_DASH_RE = re.compile(r"^\s*-{4,}\s*$")
_KV_RE = re.compile(r"^\s*(?P<label>[A-Za-z][^:]*?)\s*:\s?(?P<val>.*?)\s*$")
_CMD_RE = re.compile(r"(?:^|[\s/;|&(])(?:mlxlink|mstlink)(?:\s|$)")
_DEV_ARG_RE = re.compile(r"(?:^|\s)(?:-d|--device)(?:\s+|=)(?P<dev>\S+)")
_ERR_RE = re.compile(r"^\s*-E-\s*(?P<msg>.*)$")
_BER_RE = re.compile(r"^\s*(?P<m>\d+(?:\.\d+)?)\s*[Ee]\s*(?P<e>[-+]?\d+)\s*$")
_NUM_RE = re.compile(r"^\s*(?P<n>-?\d+(?:\.\d+)?)")
_RANGE_RE = re.compile(r"\s*\[[^\]]*\.\.[^\]]*\]\s*$")

_SNIFF_TITLE = re.compile(
    r"^[ \t]*(?:Operational Info|Troubleshooting Info|Physical Counters and BER Info|EYE Opening Info"
    r"|Module Info|Supported Info|Tool Information)[ \t]*\n(?:[ \t]*\n){0,2}[ \t]*-{4,}",
    re.MULTILINE | re.IGNORECASE,
)
_SNIFF_KV = re.compile(
    r"^[ \t]*(?:State|Physical state|Speed|Width|FEC|Status Opcode|Recommendation|Effective Physical (?:Errors|BER)"
    r"|Raw Physical BER|Raw Physical Errors Per Lane|Link Down Counter|Physical Grade)[ \t]*:",
    re.MULTILINE,
)


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    titles = len(_SNIFF_TITLE.findall(head))
    kvs = len(_SNIFF_KV.findall(head))
    if titles and kvs >= 2:
        return 95
    if titles:
        return 70
    if '"Operational Info"' in head and ('"result"' in head or '"output"' in head):
        return 90
    stripped = head.lstrip()
    if kvs >= 3 and re.search(r"^[ \t]*Recommendation[ \t]*:", head, re.MULTILINE) and not stripped.startswith("{"):
        return 60  # forum-style captures that lost the dashed underlines
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        stripped = text.lstrip()
        if stripped.startswith("{") and '"Operational Info"' in text:
            _parse_json(text, source, host, records, problems)
        else:
            _parse(text, source, host, records, problems)
    except Exception as exc:
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


# --------------------------------------------------------------------------------------------- values


def _key(label: str) -> str:
    k = re.sub(r"\s*\[[^\]]*\]", "", label)  # `Temperature [C]`, `Rx Power Current [dBm]`
    k = re.sub(r"\s*\((?:ext\.?|per lane)\)", "", k, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", k).strip().lower()


def _text(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip()
    return None if not v or v.upper() in ("N/A", "NA") else v


def _ber(v: str | None) -> float | None:
    t = _text(v)
    if t is None:
        return None
    m = _BER_RE.match(t)
    if m:
        try:
            return float(f"{m.group('m')}e{m.group('e')}")
        except (ValueError, OverflowError):
            return None
    try:
        return float(t)
    except ValueError:
        return None


def _int(v: str | None) -> int | None:
    t = _text(v)
    if t is None:
        return None
    t = t.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", t) else t
    return int(t) if re.fullmatch(r"\d+", t) else None


def _float(v: str | None) -> float | None:
    t = _text(v)
    if t is None:
        return None
    m = _NUM_RE.match(t)
    return float(m.group("n")) if m else None


def _device(cmd: str | None) -> str | None:
    if not cmd:
        return None
    m = _DEV_ARG_RE.search(cmd)
    if not m:
        return None
    dev = m.group("dev").strip("'\"")
    return norm_bdf(dev) or dev


@dataclass
class _Run:
    line: int
    text: str
    host: str | None
    device: str | None
    fields: dict[str, str] = field(default_factory=dict)
    sections: list[tuple[str, int]] = field(default_factory=list)  # (title, values seen)


def _build(run: _Run, source: str) -> MlxlinkInfo:
    f = run.fields

    def g(*keys: str) -> str | None:
        for k in keys:
            if k in f:
                return f[k]
        return None

    effective = _int(g("effective physical errors"))
    symbol = _int(g("symbol errors"))
    return MlxlinkInfo(
        source=source,
        line=run.line,
        text=clip(run.text),
        host=run.host,
        device=run.device,
        state=_text(g("state")),
        physical_state=_text(g("physical state")),
        speed=_text(g("speed")),
        width=_text(g("width")),
        fec=_text(g("fec")),
        effective_ber=_ber(g("effective physical ber")),
        raw_ber=_ber(g("raw physical ber")),
        effective_errors=effective,
        symbol_errors=symbol if symbol is not None else effective,
        link_down_counter=_int(g("link down counter")),
        link_error_recovery_counter=_int(g("link error recovery counter")),
        status_opcode=_int(g("status opcode")),
        recommendation=_text(g("recommendation")),
        temperature_c=_float(g("temperature")),
        rx_power=_text(g("rx power current", "rx power")),
        tx_power=_text(g("tx power current", "tx power")),
        eye_grades=_text(g("physical grade", "eye grade", "grade")),
    )


# --------------------------------------------------------------------------------------------- text


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    lines = list(iter_lines(text))
    run: _Run | None = None
    pending_cmd: tuple[int, str, str | None] | None = None  # (line, text, device)
    runs: list[_Run] = []
    last_kv_empty: tuple[int, str] | None = None

    def new_run(n: int, line: str) -> _Run:
        nonlocal pending_cmd
        if pending_cmd is not None:
            r = _Run(line=pending_cmd[0], text=pending_cmd[1], host=cur_host, device=pending_cmd[2])
            pending_cmd = None
        else:
            r = _Run(line=n, text=line, host=cur_host, device=None)
        runs.append(r)
        return r

    i = 0
    while i < len(lines):
        n, line = lines[i]
        i += 1
        stripped = line.strip()
        if not stripped:
            continue
        last_kv_empty = None
        em = _ERR_RE.match(line)
        if em:
            records.append(
                ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="mlxlink", message=stripped)
            )
            continue
        p = shell_prompt(line)
        cmd = p[1] if p is not None else None
        if p is not None and p[0]:
            cur_host = p[0]
        if (
            cmd is None
            and _CMD_RE.search(line)
            and (stripped[:1] in "#$>" or stripped.startswith(("mlxlink", "mstlink", "sudo")))
        ):
            cmd = stripped.lstrip("#$> ")
        if cmd is not None:
            if _CMD_RE.search(cmd):
                run = None
                pending_cmd = (n, line, _device(cmd))
            elif p is not None:
                run = None
                pending_cmd = None
            continue
        # section title: a known title, or any title line followed by a dashed underline
        nxt = next(((m, ln) for m, ln in lines[i:] if ln.strip()), None)
        tm = _TITLE_RE.match(line)
        is_title = bool(
            tm
            and ":" not in stripped
            and ((nxt is not None and _DASH_RE.match(nxt[1])) or stripped.lower() in {s.lower() for s in _SECTIONS})
        )
        if is_title:
            title = stripped
            if run is None or (
                title.lower() == "operational info" and any(t.lower() == "operational info" for t, _ in run.sections)
            ):
                run = new_run(n, line)
            run.sections.append((title, 0))
            continue
        if _DASH_RE.match(line):
            continue
        kv = _KV_RE.match(line)
        if not kv or run is None:
            continue
        label, value = kv.group("label"), kv.group("val")
        key = _key(label)
        if not value:
            last_kv_empty = (n, stripped)
            continue
        run.fields.setdefault(key, value)
        if run.sections:
            t, c = run.sections[-1]
            run.sections[-1] = (t, c + 1)

    for r in runs:
        records.append(_build(r, source))
    if runs:
        last = runs[-1]
        if last_kv_empty is not None:
            problems.append(
                f"truncated: run at line {last.line} ends early (line {last_kv_empty[0]}: {last_kv_empty[1]!r})"
            )
        elif last.sections and last.sections[-1][1] == 0:
            problems.append(
                f"truncated: run at line {last.line} ends early (section {last.sections[-1][0]!r} has no values)"
            )
    elif pending_cmd is not None:
        problems.append(f"line {pending_cmd[0]}: mlxlink command with no output")


# --------------------------------------------------------------------------------------------- json


def _flat(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, dict):
        vals = v.get("values")
        if isinstance(vals, list):
            return ",".join(str(x) for x in vals)
        if "value" in v:
            return _flat(v["value"])
        return None
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


def _parse_json(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"truncated or invalid mlxlink JSON: {exc}")
        return
    docs = doc if isinstance(doc, list) else [doc]
    for d in docs:
        if not isinstance(d, dict):
            continue
        result = d.get("result", d)
        output = result.get("output", result) if isinstance(result, dict) else None
        if not isinstance(output, dict):
            continue
        run = _Run(line=1, text=text.split("\n", 1)[0], host=host, device=None)
        for section, body in output.items():
            if not isinstance(body, dict):
                continue
            run.sections.append((section, len(body)))
            for label, value in body.items():
                flat = _flat(value)
                if flat is not None:
                    run.fields.setdefault(_key(label), flat)
        if run.fields:
            records.append(_build(run, source))
