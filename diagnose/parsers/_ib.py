"""Records and helpers shared by the InfiniBand/RDMA tool parsers (ibstat, ibstatus, ibv_devinfo, perfquery).

The small line helpers at the bottom (prompt/command detection, ANSI stripping, tool error lines) are
also used by the host-limit parsers (``df``, ``ulimit``): every one of these tools is usually captured as a
shell transcript, so the same tolerance applies.

Normalisation rules (documented here because other stages rely on them):

* GUIDs are ``0x`` + 16 lowercase hex digits; colon-grouped forms (``7cfe:9003:00a5:95c0``, as printed by
  ``ibv_devinfo``) are converted, short ``0x`` forms are zero-padded.
* Port ``state`` is one of ``Active``, ``Down``, ``Init``, ``Armed``, ``ActiveDefer`` or the printed value in
  title case; ``phys_state`` is one of ``LinkUp``, ``Polling``, ``Disabled``, ``Sleep``, ``LinkErrorRecovery``,
  ``PortConfigurationTraining``, ``PhyTest`` or the printed value.
* LIDs are decimal ints (``ibstatus`` prints sysfs hex, converted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import Record, clip
from diagnose.parsers._lines import command_line, prompt

# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class IbPort(Record):
    """One HCA port as reported by ibstat / ibstatus / ibv_devinfo (a snapshot, no counters).

    ``line``/``text`` point at the port's state line (``State: Down``) when the block has one, otherwise
    at the port header line.
    """

    device: str
    port: int
    state: str | None
    phys_state: str | None
    rate_gbps: float | None
    width: str | None
    speed: str | None
    link_layer: str | None
    lid: int | None
    sm_lid: int | None
    port_guid: str | None
    node_guid: str | None
    ca_type: str | None
    firmware: str | None
    active_mtu: int | None = None
    max_mtu: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GidEntry(Record):
    """One GID table entry (``ibv_devinfo -v`` ``GID[ i]:`` lines, ``ibstatus`` default gid = index 0)."""

    device: str
    port: int
    index: int
    gid: str
    gid_type: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolError(Record):
    """An error/warning line the tool printed (``ibpanic: ...``, ``ibwarn: ...``, ``Failed to open device``).

    ``tool`` is the tool whose output held the line; ``message`` is the stripped line itself.
    """

    tool: str
    message: str




# --------------------------------------------------------------------------------------------- normalisers

_HEX16 = re.compile(r"[0-9a-fA-F]{1,16}")
_CANON_GUID = re.compile(r"0x[0-9a-f]{16}")


def norm_guid(value: str | None) -> str | None:
    """``0x`` + 16 lowercase hex digits, from ``0x..`` or colon-grouped forms; None when not a GUID."""
    if not value:
        return None
    if _CANON_GUID.fullmatch(value):
        return value  # already in that form, as tools print most GUIDs: one check instead of the rewriting
    v = value.strip()
    if v.lower().startswith("0x"):
        digits = v[2:]
    elif ":" in v:
        groups = v.split(":")
        if len(groups) != 4 or not all(1 <= len(g) <= 4 for g in groups):
            return None
        digits = "".join(g.rjust(4, "0") for g in groups)
    else:
        digits = v
    if not _HEX16.fullmatch(digits):
        return None
    return "0x" + digits.lower().rjust(16, "0")


def guid_from_gid(gid: str | None) -> str | None:
    """Interface id (low 64 bits) of a link-local ``fe80::/64`` GID, as a GUID; None otherwise or when 0."""
    if not gid:
        return None
    groups = gid.strip().lower().split(":")
    if len(groups) != 8 or groups[:4] != ["fe80", "0000", "0000", "0000"]:
        return None
    guid = norm_guid(":".join(groups[4:]))
    if guid is None or int(guid, 16) == 0:
        return None
    return guid


_STATE_MAP = {
    "active": "Active",
    "portactive": "Active",
    "down": "Down",
    "portdown": "Down",
    "init": "Init",
    "initializing": "Init",
    "portinit": "Init",
    "armed": "Armed",
    "portarmed": "Armed",
    "activedefer": "ActiveDefer",
    "portactivedefer": "ActiveDefer",
}

_PHYS_MAP = {
    "linkup": "LinkUp",
    "polling": "Polling",
    "disabled": "Disabled",
    "sleep": "Sleep",
    "linkerrorrecovery": "LinkErrorRecovery",
    "portconfigurationtraining": "PortConfigurationTraining",
    "portconfigurationtrainning": "PortConfigurationTraining",  # ibv_devinfo's spelling
    "phytest": "PhyTest",
}

# "4: ACTIVE" (sysfs) / "PORT_ACTIVE (4)" (ibv_devinfo) / "Active" (ibstat)
_ENUM_WRAP = re.compile(r"^\s*(?:\d+\s*:\s*)?(?P<name>.*?)\s*(?:\(\s*\d+\s*\))?\s*$")


def _strip_enum(value: str) -> str:
    m = _ENUM_WRAP.match(value)
    return m.group("name") if m else value.strip()


def norm_state(value: str | None) -> str | None:
    if value is None:
        return None
    name = _strip_enum(value)
    if not name:
        return None
    key = re.sub(r"[^a-z]", "", name.lower())
    return _STATE_MAP.get(key, name.title())


def norm_phys_state(value: str | None) -> str | None:
    if value is None:
        return None
    name = _strip_enum(value)
    if not name:
        return None
    key = re.sub(r"[^a-z]", "", name.lower())
    return _PHYS_MAP.get(key, name)


# per-lane signalling used for rate = lanes x lane rate (ibstat prints 56 for 4X FDR, 100 for 4X EDR ...)
LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}

# ibv_devinfo active_speed enum (rdma-core libibverbs/examples/devinfo.c speed_str)
VERBS_SPEED: dict[int, str] = {
    1: "SDR",
    2: "DDR",
    4: "QDR",
    8: "FDR10",
    16: "FDR",
    32: "EDR",
    64: "HDR",
    128: "NDR",
    256: "XDR",
}

_RATE_RE = re.compile(
    r"^\s*(?P<rate>\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\(\s*(?P<width>\d+X)\s*(?P<speed>[A-Z0-9]+)?\s*\))?",
    re.IGNORECASE,
)


def parse_sysfs_rate(value: str) -> tuple[float | None, str | None, str | None]:
    """``200 Gb/sec (4X HDR)`` -> (200.0, '4X', 'HDR')."""
    m = _RATE_RE.match(value)
    if not m:
        return None, None, None
    width = m.group("width").upper() if m.group("width") else None
    speed = m.group("speed").upper() if m.group("speed") else None
    return float(m.group("rate")), width, speed


def width_lanes(width: str | None) -> int | None:
    if not width:
        return None
    m = re.fullmatch(r"(\d+)X", width.strip().upper())
    return int(m.group(1)) if m else None


_LINK_LAYERS = {"infiniband": "InfiniBand", "ib": "InfiniBand", "ethernet": "Ethernet", "eth": "Ethernet"}


def norm_link_layer(value: str | None) -> str | None:
    """``InfiniBand`` / ``Ethernet`` (``IB`` is what the ibstatus script echoes when sysfs has no link_layer)."""
    if value is None or not value.strip():
        return None
    v = value.strip()
    return _LINK_LAYERS.get(v.lower(), v)


def to_int(value: str | None, base: int = 10) -> int | None:
    if value is None:
        return None
    if base == 10 and value.isdecimal():
        return int(value)  # the common plain number (``isdecimal`` holds exactly for what int() reads as digits)
    v = value.strip()
    try:
        if base == 16 or v.lower().startswith("0x"):
            return int(v, 16)
        return int(v, 10)
    except ValueError:
        return None


def to_float(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.match(r"\s*(\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


# --------------------------------------------------------------------------------------------- line helpers

_TOOL_ERR_RE = re.compile(
    r"^\s*(?:"
    r"(?:ibpanic|ibwarn|iberror):\s.*"
    r"|[\w./-]+:\s+iberror:\s.*"
    r"|Failed to (?:open|query|get|close)\b.*"
    r"|No IB devices found.*"
    r"|Fatal error:\s.*"
    r"|Invalid port requested for device.*"
    r")$"
)


def shell_line(
    line: str, n: int, source: str, fmt: str, tools: tuple[str, ...], host: str | None, records: list[Record]
) -> tuple[str | None, str | None]:
    """Lines in a capture that are not the tool's output.

    An infiniband-diags/libibverbs error line becomes a :class:`ToolError` in ``records`` (``"error"``); a shell
    prompt or a command echo of one of ``tools`` is a ``"boundary"`` that ends any open block and may name the
    host. Returns ``(kind or None, host)``.
    """
    err = tool_error(line)
    if err is not None:
        records.append(ToolError(source=source, line=n, text=clip(line), host=host, tool=fmt, message=err))
        return "error", host
    p = prompt(line)
    if p is not None or command_line(line, tools) is not None:
        return "boundary", (p[0] if p is not None and p[0] else host)
    return None, host


def tool_error(line: str) -> str | None:
    """The message (stripped line) if ``line`` is an infiniband-diags/libibverbs error line."""
    if _TOOL_ERR_RE.match(line):
        return line.strip()
    return None
