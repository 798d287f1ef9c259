"""``ibstatus`` (infiniband-diags shell script reading sysfs): one block per port.

Shape (rdma-core ``infiniband-diags/scripts/ibstatus``)::

    Infiniband device 'mlx5_0' port 1 status:
            default gid:     fe80:0000:0000:0000:0015:5dff:fd34:11eb
            base lid:        0x33bf
            sm lid:          0x1
            state:           4: ACTIVE
            phys state:      5: LinkUp
            rate:            200 Gb/sec (4X HDR)
            link_layer:      InfiniBand

LIDs are sysfs hex (converted to decimal). Any field may read ``unknown`` (sysfs file missing); a missing
``link_layer`` file prints ``IB``. The port GUID is the interface id of the link-local default GID (InfiniBand
ports only); the default GID is also emitted as :class:`~diagnose.parsers._ib.GidEntry` index 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._ib import (
    GidEntry,
    IbPort,
    guid_from_gid,
    norm_link_layer,
    norm_phys_state,
    norm_state,
    parse_sysfs_rate,
    shell_line,
    to_int,
)
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "ibstatus"

_HDR_RE = re.compile(r"^\s*Infiniband device\s+'(?P<dev>[^']+)'\s+port\s+(?P<port>\d+)\s+status:\s*$")
_KV_RE = re.compile(
    r"^\s*(?P<key>default gid|base lid|sm lid|state|phys state|rate|link_layer):\s*(?P<val>.*?)\s*$"
)
_GID_RE = re.compile(r"^[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}$")
_FIELDS = ("default gid", "base lid", "sm lid", "state", "phys state", "rate", "link_layer")
_TOOLS = ("ibstatus",)

_SNIFF_HDR = re.compile(r"^\s*Infiniband device '[^'\n]+' port \d+ status:[ \t]*$", re.MULTILINE)
_SNIFF_KEY = re.compile(r"^[ \t]+(?:default gid|base lid|sm lid|phys state|link_layer):[ \t]", re.MULTILINE)


def sniff(head: str) -> int:
    hdrs = len(_SNIFF_HDR.findall(head))
    keys = len(_SNIFF_KEY.findall(head))
    if hdrs and keys >= 2:
        return 95
    if hdrs:
        return 60
    return 0


@dataclass
class _Block:
    device: str
    port: int
    line: int
    text: str
    host: str | None
    fields: dict[str, tuple[int, str, str]] = field(default_factory=dict)


def _val(b: _Block, key: str) -> str | None:
    if key not in b.fields:
        return None
    v = b.fields[key][2]
    return None if not v or v.lower() == "unknown" else v


def _flush(b: _Block, at_eof: bool, source: str, records: list[Record], problems: list[str]) -> None:
    rate, width, speed = (None, None, None)
    raw_rate = _val(b, "rate")
    if raw_rate is not None:
        rate, width, speed = parse_sysfs_rate(raw_rate)
        if rate is None:
            problems.append(
                f"line {b.fields['rate'][0]}: unparseable rate {raw_rate!r} for {b.device} port {b.port}"
            )
    link_layer = norm_link_layer(_val(b, "link_layer"))
    gid = _val(b, "default gid")
    if gid is not None and not _GID_RE.match(gid):
        problems.append(f"line {b.fields['default gid'][0]}: unparseable gid {gid!r}")
        gid = None
    lid_raw, sm_raw = _val(b, "base lid"), _val(b, "sm lid")
    line, text = (b.fields["state"][0], b.fields["state"][1]) if "state" in b.fields else (b.line, b.text)
    records.append(
        IbPort(
            source=source,
            line=line,
            text=clip(text),
            host=b.host,
            device=b.device,
            port=b.port,
            state=norm_state(_val(b, "state")),
            phys_state=norm_phys_state(_val(b, "phys state")),
            rate_gbps=rate,
            width=width,
            speed=speed,
            link_layer=link_layer,
            lid=to_int(lid_raw, 16) if lid_raw is not None else None,
            sm_lid=to_int(sm_raw, 16) if sm_raw is not None else None,
            port_guid=guid_from_gid(gid) if link_layer == "InfiniBand" else None,
            node_guid=None,
            ca_type=None,
            firmware=None,
        )
    )
    if gid is not None:
        gl, graw, _ = b.fields["default gid"]
        records.append(
            GidEntry(
                source=source,
                line=gl,
                text=clip(graw),
                host=b.host,
                device=b.device,
                port=b.port,
                index=0,
                gid=gid.lower(),
                gid_type="IB" if link_layer == "InfiniBand" else None,
            )
        )
    if "link_layer" not in b.fields:  # the last line the script prints for a port
        missing = [k for k in _FIELDS if k not in b.fields]
        if at_eof:
            problems.append(
                f"truncated: block for {b.device} port {b.port} ends early (missing {', '.join(missing)})"
            )
        else:
            problems.append(
                f"line {b.line}: incomplete block for {b.device} port {b.port} (missing {', '.join(missing)})"
            )


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    block: _Block | None = None

    def close(at_eof: bool) -> None:
        nonlocal block
        if block is not None:
            _flush(block, at_eof, source, records, problems)
        block = None

    for n, line in iter_lines(text):
        if not line.strip():
            continue
        kind, cur_host = shell_line(line, n, source, FORMAT, _TOOLS, cur_host, records)
        if kind is not None:
            if kind == "boundary":
                close(False)
            continue
        m = _HDR_RE.match(line)
        if m:
            close(False)
            block = _Block(device=m.group("dev"), port=int(m.group("port")), line=n, text=line, host=cur_host)
            continue
        if block is None:
            continue
        m = _KV_RE.match(line)
        if m:
            block.fields.setdefault(m.group("key"), (n, line, m.group("val")))
    close(True)
