"""``/sys/class/infiniband`` captures: port state, PMA counters, provider hw counters, GIDs.

One value per sysfs file, in any of the forms a capture takes::

    /sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0        # grep -r . /sys/class/infiniband/
    /sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE
    /sys/class/infiniband/mlx5_0/ports/1/rate:400 Gb/sec (4X NDR)
    mlx5_0/ports/1/hw_counters/out_of_sequence:0                        # grep run inside the tree
    /sys/class/infiniband/mlx5_0/ports/1/counters/link_downed 0         # for f in ...; do echo $f $(cat $f); done

The bundle layer folds a copied tree (one file per value) into the first form. The parts before
``<dev>/ports/...`` are ignored, so ``/sys/devices/pci0000:00/.../infiniband/mlx5_0/...`` paths work too.

Emits :class:`~diagnose.parsers._ib.IbPort` per (device, port) (cited at its ``state`` line, else its first
line), :class:`~diagnose.parsers.perfquery.PortCounter` per ``counters/`` (and pre-4.5 ``counters_ext/``)
file with the canonical name, ``extended=True`` (``False`` for ``counters/`` when the same port also has
``counters_ext/``, i.e. the old 32-bit files), :class:`~diagnose.parsers._host.RdmaHwCounter` per
``hw_counters/`` file, :class:`~diagnose.parsers._ib.GidEntry` per non-zero ``gids/N`` (type from
``gid_attrs/types/N``), :class:`~diagnose.parsers._host.DevNetMap` per ``gid_attrs/ndevs/N`` netdev and
:class:`~diagnose.parsers._pkeys.PkeyEntry` per non-zero ``pkeys/N`` (also from a ``cat .../pkeys/N`` line followed
by the value, as a transcript shows it).

Units: ``port_xmit_data``/``port_rcv_data`` are 4-octet words (as in the PMA); values are kept raw.
``N/A (no PMA)`` counter values (kernel quirk, see prometheus/procfs ``sysfs/class_infiniband.go``) are
skipped. ``grep:``/``cat:`` error lines become :class:`~diagnose.parsers._ib.ToolError`. A repeated file
(two captures in one file) gives ``snapshot`` 0, 1, ...; ``date`` lines set ``timestamp``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import DevNetMap, RdmaHwCounter, shell_prompt, timestamp_line, to_uint
from diagnose.parsers._ib import (
    GidEntry,
    IbPort,
    ToolError,
    guid_from_gid,
    norm_guid,
    norm_link_layer,
    norm_phys_state,
    norm_state,
    parse_sysfs_rate,
    to_int,
)
from diagnose.parsers._lines import iter_lines
from diagnose.parsers._pkeys import FULL_BIT, KEY_MASK, PkeyEntry
from diagnose.parsers.base import guarded_parse
from diagnose.parsers.perfquery import PortCounter

FORMAT = "sysfs_infiniband"

_DEV = r"[A-Za-z][\w.\-]*"
_LINE_RE = re.compile(
    rf"^(?:.*?/)?(?P<dev>{_DEV})/(?:"
    r"ports/(?P<port>\d+)/(?:"
    r"(?P<cdir>counters|counters_ext|hw_counters)/(?P<cname>[\w.\-]+)"
    r"|gids/(?P<gidx>\d+)"
    r"|gid_attrs/(?P<gadir>types|ndevs)/(?P<gaidx>\d+)"
    r"|pkeys/(?P<pkidx>\d+)"
    r"|(?P<pattr>state|phys_state|rate|link_layer|lid|sm_lid|lid_mask_count|cap_mask|sm_sl)"
    r")"
    r"|hw_counters/(?P<dhw>[\w.\-]+)"
    r"|(?P<dattr>fw_ver|board_id|hca_type|node_guid|node_desc|sys_image_guid|hw_rev|node_type)"
    r")(?::[ \t]?|[ \t]+)(?P<val>.*?)\s*$"
)
_ERR_RE = re.compile(r"^\s*(?:grep|cat|head|tail|find):\s.*$")
# `cat /sys/class/infiniband/mlx5_0/ports/1/pkeys/0` then the value on its own line (a transcript without `path:`)
_CAT_RE = re.compile(r"^(?:sudo\s+)?cat\s+(?P<path>\S*/ports/\d+/pkeys/\d+)\s*$")
_PKEY_VAL = re.compile(r"^0x[0-9A-Fa-f]{1,4}$")
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
_NA_RE = re.compile(r"^N/A\b", re.IGNORECASE)


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    hits = 0
    infiniband = 0
    lines = 0
    after_cat = False
    for line in head.split("\n"):
        if not line.strip():
            continue
        lines += 1
        cat = _CAT_RE.match(line.strip())
        if _LINE_RE.match(line) or cat or (after_cat and _PKEY_VAL.match(line.strip())):
            hits += 1
            if "infiniband/" in line or "/ports/" in line:
                infiniband += 1
        after_cat = cat is not None
        if lines >= 400:
            break
    if hits == 0 or infiniband == 0:
        return 0
    frac = hits / lines
    if hits >= 3 and frac >= 0.5:
        return 95
    if hits >= 3 and frac >= 0.25:
        return 70
    if hits >= 1 and frac >= 0.5 and infiniband >= 1:
        return 50
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


class _Ctr(NamedTuple):
    line: int
    text: str
    dev: str
    port: int
    cdir: str
    canon: str
    value: int
    timestamp: str | None
    host: str | None
    snapshot: int


@dataclass
class _Port:
    device: str
    port: int
    line: int
    text: str
    host: str | None
    attrs: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    gids: dict[int, tuple[int, str, str]] = field(default_factory=dict)
    gid_types: dict[int, str] = field(default_factory=dict)
    has_ext: bool = False


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    timestamp: str | None = None
    ports: dict[tuple[str, int], _Port] = {}
    dev_attrs: dict[str, dict[str, str]] = {}
    counters: list[_Ctr] = []
    seen: dict[tuple[str, int, str, str], int] = {}
    ndevs: set[tuple[str, int, str]] = set()
    last_bad: tuple[int, str] | None = None
    cat_path: str | None = None

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        last_bad = None
        p = shell_prompt(line)
        cat = _CAT_RE.match(p[1].strip() if p is not None else stripped)
        if p is not None:
            if p[0]:
                cur_host = p[0]
            cat_path = cat.group("path") if cat else None
            continue
        if cat:
            cat_path = cat.group("path")
            continue
        if cat_path is not None and _PKEY_VAL.match(stripped):
            line = f"{cat_path}:{stripped}"  # the value `cat` printed, cited at its own line
        cat_path = None
        if _ERR_RE.match(line):
            records.append(
                ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="sysfs", message=stripped)
            )
            continue
        ts = timestamp_line(line)
        if ts is not None:
            timestamp = ts
            continue
        m = _LINE_RE.match(line)
        if not m:
            if "/" in stripped and ("ports/" in stripped or "infiniband" in stripped):
                last_bad = (n, stripped)
            continue
        dev, val = m.group("dev"), m.group("val")
        if m.group("dattr"):
            dev_attrs.setdefault(dev, {}).setdefault(m.group("dattr"), val)
            continue
        if m.group("dhw"):
            v = to_uint(val)
            if v is not None:
                records.append(
                    RdmaHwCounter(
                        source=source,
                        line=n,
                        text=clip(line),
                        host=cur_host,
                        device=dev,
                        port=None,
                        counter=m.group("dhw"),
                        value=v,
                    )
                )
            elif not _NA_RE.match(val):
                problems.append(f"line {n}: unparseable value {val!r} for {dev} hw_counters/{m.group('dhw')}")
            continue
        port_no = int(m.group("port"))
        key = (dev, port_no)
        port = ports.get(key)
        if port is None:
            port = ports[key] = _Port(device=dev, port=port_no, line=n, text=line, host=cur_host)
        if m.group("pattr"):
            port.attrs.setdefault(m.group("pattr"), (n, line, val))
        elif m.group("gidx") is not None:
            port.gids.setdefault(int(m.group("gidx")), (n, line, val))
        elif m.group("pkidx") is not None:
            pkey = to_int(val, 16) if _PKEY_VAL.match(val) else None
            if pkey is None:
                if val:
                    problems.append(f"line {n}: unparseable P_Key {val!r} for {dev} port {port_no}")
            elif pkey & KEY_MASK:  # 0x0000 is an empty slot
                records.append(PkeyEntry(source=source, line=n, text=clip(line), host=cur_host, device=dev,
                                         port=port_no, lid=None, guid=None, index=int(m.group("pkidx")), pkey=pkey,
                                         full=bool(pkey & FULL_BIT)))
        elif m.group("gadir") == "types":
            if val and not val.lower().startswith(("cat:", "grep:")):
                port.gid_types.setdefault(int(m.group("gaidx")), val)
        elif m.group("gadir") == "ndevs":
            if re.fullmatch(r"[\w.\-@]{1,32}", val) and (dev, port_no, val) not in ndevs:
                ndevs.add((dev, port_no, val))
                records.append(
                    DevNetMap(
                        source=source,
                        line=n,
                        text=clip(line),
                        host=cur_host,
                        device=dev,
                        port=port_no,
                        netdev=val,
                        up=None,
                    )
                )
        else:
            cdir, cname = m.group("cdir"), m.group("cname")
            v = to_uint(val)
            if v is None:
                if not val:
                    last_bad = (n, stripped)
                elif not _NA_RE.match(val):
                    problems.append(f"line {n}: unparseable value {val!r} for {dev} port {port_no} {cdir}/{cname}")
                continue
            if cdir == "hw_counters":
                records.append(
                    RdmaHwCounter(
                        source=source,
                        line=n,
                        text=clip(line),
                        host=cur_host,
                        device=dev,
                        port=port_no,
                        counter=cname,
                        value=v,
                    )
                )
                continue
            canon = canonical_counter(cname)
            if canon is None:
                continue
            if cdir == "counters_ext":
                port.has_ext = True
            skey = (dev, port_no, cdir, canon)
            snap = seen.get(skey, 0)
            seen[skey] = snap + 1
            counters.append(_Ctr(n, line, dev, port_no, cdir, canon, v, timestamp, cur_host, snap))

    for c in counters:
        extended = c.cdir == "counters_ext" or not ports[(c.dev, c.port)].has_ext
        records.append(
            PortCounter(
                source=source,
                line=c.line,
                text=clip(c.text),
                host=c.host,
                lid=None,
                guid=None,
                port=c.port,
                counter=c.canon,
                value=c.value,
                extended=extended,
                snapshot=c.snapshot,
                timestamp=c.timestamp,
                device=c.dev,
            )
        )

    for (dev, _port_no), port in ports.items():
        records.extend(_port_records(port, dev_attrs.get(dev, {}), source, problems))

    if last_bad is not None:
        problems.append(f"truncated: capture ends early (line {last_bad[0]}: {last_bad[1]!r})")


def _port_records(port: _Port, dattr: dict[str, str], source: str, problems: list[str]) -> list[Record]:
    out: list[Record] = []
    a = port.attrs

    def val(key: str) -> str | None:
        return a[key][2] if key in a else None

    rate = width = speed = None
    raw_rate = val("rate")
    if raw_rate is not None:
        rate, width, speed = parse_sysfs_rate(raw_rate)
        if rate is None:
            problems.append(f"line {a['rate'][0]}: unparseable rate {raw_rate!r} for {port.device} port {port.port}")
    link_layer = norm_link_layer(val("link_layer"))
    gid0 = port.gids.get(0)
    port_guid = guid_from_gid(gid0[2]) if gid0 and link_layer != "Ethernet" else None
    has_state = any(k in a for k in ("state", "phys_state", "rate", "link_layer", "lid"))
    if has_state:
        line, text = (a["state"][0], a["state"][1]) if "state" in a else (port.line, port.text)
        out.append(
            IbPort(
                source=source,
                line=line,
                text=clip(text),
                host=port.host,
                device=port.device,
                port=port.port,
                state=norm_state(val("state")),
                phys_state=norm_phys_state(val("phys_state")),
                rate_gbps=rate,
                width=width,
                speed=speed,
                link_layer=link_layer,
                lid=to_int(val("lid"), 16) if val("lid") else None,
                sm_lid=to_int(val("sm_lid"), 16) if val("sm_lid") else None,
                port_guid=port_guid,
                node_guid=norm_guid(dattr.get("node_guid")),
                ca_type=dattr.get("hca_type") or None,
                firmware=dattr.get("fw_ver") or None,
            )
        )
    for idx in sorted(port.gids):
        n, text, gid = port.gids[idx]
        g = gid.strip().lower()
        if not g or g == _ZERO_GID or not re.fullmatch(r"[0-9a-f:.]+", g):
            continue
        out.append(
            GidEntry(
                source=source,
                line=n,
                text=clip(text),
                host=port.host,
                device=port.device,
                port=port.port,
                index=idx,
                gid=g,
                gid_type=port.gid_types.get(idx),
            )
        )
    return out
