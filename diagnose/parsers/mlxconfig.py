"""``mlxconfig -d <dev> q`` / ``query`` (NVIDIA MFT, also ``mstconfig`` of mstflint): a device's NV configuration.

Layout (MFT ``mlxconfig``; the same from ``set``, which prints the table before asking to apply)::

    Device #1:
    ----------

    Device type:        ConnectX6
    Name:               MCX653106A-HDA_Ax
    Description:        ConnectX-6 VPI adapter card; HDR IB (200Gb/s) and 200GbE; ...
    Device:             c2:00.0

    Configurations:                                          Next Boot
            ADVANCED_PCI_SETTINGS                       True(1)
            MAX_ACC_OUT_READ                            44
    *       LINK_TYPE_P1                                IB(1)              (``*``: pending change)

The ``Configurations:`` line names the value columns (``Next Boot``; ``Default  Current  Next Boot`` with ``-e``;
``Next Boot  New`` from ``set``; ``Current`` in old MFT; none in some pastes). One
:class:`~diagnose.parsers._nic.NicConfigOption` per parameter row. ``Array[0..15]`` values are kept as text. A
prompt line (``root@host:~# mlxconfig -d /dev/mst/mt4115_pciconf0 query``) names the host and the device when the
table has no ``Device:`` line. Pure: no I/O, never raises.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._nic import NicConfigOption
from diagnose.parsers.base import guarded_parse

FORMAT = "mlxconfig"

_DEVICE_NO = re.compile(r"^\s*Device #\d+:\s*$")
_FIELD = re.compile(r"^\s*(Device type|Name|Description|Device|PCI device):\s*(?P<v>.*?)\s*$")
_CONFIGS = re.compile(r"^\s*Configurations:(?P<cols>.*)$")
_ROW = re.compile(r"^(?P<star>\*)?\s+(?P<key>[A-Z][A-Z0-9_]*[A-Z0-9](?:\[\d+\])?)\s{2,}(?P<vals>\S.*?)\s*$")
_NUM = re.compile(r"^(?:\w*\((?P<p>-?\d+)\)|(?P<d>-?\d+)|(?P<h>0x[0-9a-fA-F]+)(?:\(\d+\))?)$")
_CMD = re.compile(r"\b(?:mlxconfig|mstconfig)\b.*?\s-d\s+(?P<dev>\S+)")
_COLNAMES = ("Default", "Current", "Next Boot", "New")
_NO_HOST = frozenset({"localhost", "localhost.localdomain"})

_SNIFF_CONFIGS = re.compile(r"^\s*Configurations:", re.MULTILINE)
_SNIFF_DEVTYPE = re.compile(r"^\s*Device type:\s+\S", re.MULTILINE)
_SNIFF_ROW = re.compile(r"^\*?\s+[A-Z][A-Z0-9_]+_(?:P\d|EN|MODE|SIZE|READ|SETTINGS|ENABLED|VFS|PF)\s{2,}\S", re.MULTILINE)


def sniff(head: str) -> int:
    try:
        configs = _SNIFF_CONFIGS.search(head) is not None
        devtype = _SNIFF_DEVTYPE.search(head) is not None
        rows = 0
        for _ in _SNIFF_ROW.finditer(head):
            rows += 1
            if rows >= 3:
                break
        if configs and rows and (devtype or rows >= 3):
            return 95
        if configs and rows:
            return 70
        return 0
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


def _number(v: str) -> int | None:
    m = _NUM.match(v)
    if not m:
        return None
    if m.group("p") is not None:
        return int(m.group("p"))
    if m.group("d") is not None:
        return int(m.group("d"))
    return int(m.group("h"), 16)


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    cmd_dev: str | None = None
    device: str | None = None
    dtype: str | None = None
    cols: list[str] = []
    in_table = False
    for idx, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        p = shell_prompt(line)
        if p is not None:
            h, cmd = p
            if h and h not in _NO_HOST:
                cur_host = h
            m = _CMD.search(cmd)
            cmd_dev = m.group("dev") if m else None
            device, dtype, in_table = None, None, False
            continue
        if _DEVICE_NO.match(line):
            device, dtype, in_table = None, None, False
            continue
        m = _FIELD.match(line)
        if m and not in_table:
            if m.group(1) == "Device type":
                dtype = m.group("v") or None
            elif m.group(1) in ("Device", "PCI device"):
                device = m.group("v") or None
            continue
        m = _CONFIGS.match(line)
        if m:
            head = m.group("cols")
            cols = [c for c in _COLNAMES if c in head]
            cols.sort(key=head.find)
            in_table = True
            continue
        if not in_table:
            continue
        m = _ROW.match(line)
        if not m:
            if line.strip() and not line.startswith((" ", "\t", "*")):
                in_table = False  # the table ended (``Apply new Configuration?``, a note, another command)
            continue
        vals = re.split(r"\s{2,}", m.group("vals"))
        if vals and vals[-1].startswith("The '*'"):
            vals = vals[:-1]
        named = dict(zip(cols, vals, strict=False)) if cols else {}
        value = named.get("Current") or named.get("Next Boot") or vals[0]
        records.append(NicConfigOption(
            source=source, line=idx, text=clip(raw), host=cur_host, device=device or cmd_dev, device_type=dtype,
            key=m.group("key"), value=value, next_boot=named.get("Next Boot"), default=named.get("Default"),
            number=_number(value), pending=m.group("star") is not None,
        ))
