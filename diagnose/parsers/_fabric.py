"""Records and helpers shared by the InfiniBand *fabric* tool parsers.

Sources: ``ibnetdiscover`` (``-p`` ports report and the topology file), ``iblinkinfo`` (per-node blocks and
``-l`` lines), ``ibqueryerrors`` (``-r`` link info), ``smpquery``/``ibportstate`` dumps, ``sminfo``, the OpenSM
log, ``ibswinfo`` and the ibdiagnet2 files (``ibdiagnet2.db_csv``, ``ibdiagnet2.log``).

These records are a contract for the fabric model (switches, HCAs, cables with both ends, leaf/spine tiers):

* GUIDs are ``0x`` + 16 lowercase hex digits (:func:`diagnose.parsers._ib.norm_guid`).
* ``node_type`` is ``SW``, ``CA`` or ``RT``.
* ``width`` is ``1X``/``2X``/``4X``/``8X``/``12X``; ``speed`` is the IB generation name (``SDR`` ... ``NDR``,
  ``XDR``, ``FDR10``), whatever the tool printed (``25.78125 Gbps``, ``4xEDR``, an ibdiagnet enum value).
* ``state`` / ``phys_state`` follow :func:`diagnose.parsers._ib.norm_state` / ``norm_phys_state``
  (``Active``, ``Down``, ``Init``, ``Armed`` / ``LinkUp``, ``Polling``, ``Disabled`` ...).
* A :class:`FabricLink` is one cable seen from one end; a source that lists both directions yields two records.

Which GUID a source can give is not always the *node* GUID: ``iblinkinfo`` (default mode) and ``ibnetdiscover -p``
print the *port* GUID of HCA ports (equal to the node GUID on mlx5 HCAs and on switches, node GUID + port on mlx4).
Each parser's docstring says which one it emits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import Record
from diagnose.parsers._ib import norm_guid, norm_phys_state, norm_state

# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricNode(Record):
    """A switch or HCA seen in a topology source."""

    guid: str  # node GUID, '0x' + 16 lowercase hex
    node_type: str  # 'SW' | 'CA' | 'RT'
    description: str | None  # node description, e.g. 'gpu-a017 mlx5_3' or 'MF0;leaf07:MQM9700/U1'
    ports: int | None  # number of ports
    lid: int | None  # base LID (switch port 0 LID for switches)


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricLink(Record):
    """One cable, as seen from one end (a source may list both directions; both are kept)."""

    guid: str  # local node GUID
    port: int
    peer_guid: str
    peer_port: int
    width: str | None  # '4X'
    speed: str | None  # 'NDR', 'HDR', 'EDR', 'FDR', ...
    state: str | None  # 'Active', 'Down', 'Init', 'Armed'
    phys_state: str | None  # 'LinkUp', 'Polling', 'Disabled', ...
    lid: int | None  # local LID
    peer_lid: int | None
    description: str | None  # local node description
    peer_description: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricPortState(Record):
    """A port with no peer (down / unconnected), or a port where only the state is known.

    ``could_be`` carries iblinkinfo's degradation hint verbatim (the text inside the last parenthesis,
    e.g. ``Could be 4X Could be 106.25 Gbps``); a connected port with such a hint yields both a
    :class:`FabricLink` and a :class:`FabricPortState`.
    """

    guid: str
    port: int
    state: str | None
    phys_state: str | None
    width: str | None
    speed: str | None
    lid: int | None
    description: str | None
    could_be: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SmInfo(Record):
    """The subnet manager as seen by ``sminfo`` or the ibdiagnet ``SM_INFO`` section."""

    sm_lid: int | None
    sm_guid: str | None
    activity: int | None
    priority: int | None
    state: str | None  # 'MASTER' | 'STANDBY' | 'DISCOVERING' | 'NOTACTIVE'


@dataclass(frozen=True, slots=True, kw_only=True)
class SmEvent(Record):
    """An OpenSM log line of interest.

    ``category``: ``error`` (``ERR XXXX:``), ``subnet_up``, ``heavy_sweep``, ``lid_change``,
    ``port_state_change`` (trap 128 / link state change) or ``other``.
    """

    level: str | None  # '0x01' (ERROR), '0x02' (INFO), '0x80' (SYS) ... as printed
    category: str
    code: str | None  # 'ERR 3D03' -> '3D03'
    message: str
    timestamp: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMessage(Record):
    """A tool's own diagnostic line: ibdiagnet ``-E-``/``-W-``/``-I-``, ibqueryerrors' ``## Summary``."""

    tool: str
    level: str  # 'error' | 'warning' | 'info'
    message: str
    stage: str | None  # ibdiagnet stage header when known


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchInfo(Record):
    """One ``ibswinfo`` fact (part number, PSID, FW, uptime, PSU, temperature, fans) of one switch."""

    guid: str | None
    key: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CableInfo(Record):
    """A cable/transceiver module as reported by ibdiagnet (``CABLE_INFO`` section)."""

    guid: str
    port: int
    vendor: str | None
    pn: str | None
    sn: str | None
    length: str | None
    temperature: float | None  # degrees C
    identifier: str | None


# --------------------------------------------------------------------------------------------- normalisers

NODE_TYPES = {
    "sw": "SW",
    "switch": "SW",
    "s": "SW",
    "2": "SW",
    "ca": "CA",
    "h": "CA",
    "hca": "CA",
    "channel adapter": "CA",
    "1": "CA",
    "rt": "RT",
    "r": "RT",
    "router": "RT",
    "3": "RT",
}


def norm_node_type(value: str | None) -> str | None:
    if value is None:
        return None
    return NODE_TYPES.get(value.strip().lower())


def port_state(value: str | None) -> str | None:
    """:func:`norm_state` plus libibmad's ``Initialize`` spelling (-> ``Init``)."""
    st = norm_state(value)
    return "Init" if st in ("Initialize", "Initialise") else st


# lane signalling rate (as printed by libibmad / iblinkinfo) -> generation
_GBPS_SPEED: tuple[tuple[float, str], ...] = (
    (2.5, "SDR"),
    (5.0, "DDR"),
    (10.0, "QDR"),
    (10.3125, "FDR10"),
    (14.0625, "FDR"),
    (25.78125, "EDR"),
    (53.125, "HDR"),
    (106.25, "NDR"),
    (212.5, "XDR"),
)
_SPEED_NAMES = frozenset({"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"})
_NUM_RE = re.compile(r"(\d+(?:\.\d+)?)")


def speed_name(text: str | None) -> str | None:
    """``'25.78125 Gbps'`` -> ``'EDR'``, ``'10.0 Gbps (FDR10)'`` -> ``'FDR10'``, ``'4xHDR'`` -> ``'HDR'``.

    Unknown (``???``, ``No Extended Speed``, ``undefined``) -> None. Numbers are matched to the nearest
    lane rate within 2 % (so a rounded ``25.78`` still reads as EDR).
    """
    if text is None:
        return None
    t = text.strip()
    if not t:
        return None
    up = t.upper()
    m = re.search(r"\b(FDR10|SDR|DDR|QDR|FDR|EDR|HDR|NDR|XDR)\b", up)
    if m:
        return m.group(1)
    m = re.fullmatch(r"\d+X(FDR10|SDR|DDR|QDR|FDR|EDR|HDR|NDR|XDR)", up.replace(" ", ""))
    if m:
        return m.group(1)
    m = _NUM_RE.search(t)
    if not m or ("GBPS" not in up and not re.fullmatch(r"\d+(?:\.\d+)?", t)):
        return None
    val = float(m.group(1))
    for rate, name in _GBPS_SPEED:
        if abs(val - rate) <= rate * 0.02:
            return name
    return None


# ibdm/ibutils2 ``speed2char``: the nominal lane rate ibdiagnet prints (``SPD=14`` in the .lst, "Unexpected actual
# link speed 2.5 (... final speed should be 10)" in its log); 25/50/100 are not within 2% of the signalling rates
_IBDIAG_SPEED = {"2.5": "SDR", "5": "DDR", "10": "QDR", "14": "FDR", "25": "EDR", "50": "HDR", "100": "NDR",
                 "200": "XDR", "FDR10": "FDR10"}


def ibdiag_speed(text: str | None) -> str | None:
    """An ibdiagnet/ibdm speed string (``'14'``, ``'2.5'``, ``'FDR10'``) -> the generation name; None if unknown."""
    if text is None:
        return None
    t = text.strip().upper().removesuffix("G")
    return _IBDIAG_SPEED.get(t) or speed_name(t if not re.fullmatch(r"\d+(?:\.\d+)?", t) else None)


def norm_width(text: str | None) -> str | None:
    """``'4x'`` / ``' 4X'`` -> ``'4X'``; anything else -> None."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(1|2|4|8|12)\s*[xX]\s*", text)
    return f"{m.group(1)}X" if m else None


# iblinkinfo / ibqueryerrors link string: "( 4X      25.78125 Gbps Active/  LinkUp)", "(  Down/ Polling)"
_LINK_UP_RE = re.compile(
    r"^\(\s*(?P<width>\d+X)\s+(?P<speed>.+?)\s+(?P<state>[A-Za-z?()0-9]+)/\s*(?P<phys>[A-Za-z?()0-9]+)\s*\)"
    r"(?:\s*\((?P<extra>[^)]*)\))?\s*$"
)
_LINK_DOWN_RE = re.compile(
    r"^\(\s*(?P<state>[A-Za-z?()0-9]+)/\s*(?P<phys>[A-Za-z?()0-9]+)\s*\)(?:\s*\((?P<extra>[^)]*)\))?\s*$"
)


@dataclass(frozen=True, slots=True)
class LinkText:
    width: str | None
    speed: str | None
    state: str | None
    phys_state: str | None


def parse_link_text(text: str) -> LinkText | None:
    """Parse the ``(...)`` between ``==`` and ``==>`` of iblinkinfo / ibqueryerrors link lines."""
    t = text.strip()
    m = _LINK_UP_RE.match(t)
    if m:
        return LinkText(
            width=norm_width(m.group("width")),
            speed=speed_name(m.group("speed")),
            state=port_state(m.group("state")),
            phys_state=norm_phys_state(m.group("phys")),
        )
    m = _LINK_DOWN_RE.match(t)
    if m:
        return LinkText(
            width=None,
            speed=None,
            state=port_state(m.group("state")),
            phys_state=norm_phys_state(m.group("phys")),
        )
    return None


# ibdiagnet / SMInfo numeric enums
PORT_STATES = {1: "Down", 2: "Init", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}


def norm_sm_state(value: str | None) -> str | None:
    """``SMINFO_MASTER`` / ``3`` / ``master`` / ``SMINFO_DISCOVER`` -> ``MASTER`` / ``DISCOVERING``."""
    if value is None:
        return None
    v = value.strip().upper()
    if not v:
        return None
    if v.isdigit():
        return SM_STATES.get(int(v))
    v = v.removeprefix("SMINFO_").removeprefix("IB_SMINFO_STATE_")
    return {
        "MASTER": "MASTER",
        "STANDBY": "STANDBY",
        "DISCOVER": "DISCOVERING",
        "DISCOVERING": "DISCOVERING",
        "NOTACT": "NOTACTIVE",
        "NOTACTIVE": "NOTACTIVE",
        "NOT_ACTIVE": "NOTACTIVE",
        "NOT ACTIVE": "NOTACTIVE",
    }.get(v)


# One iblinkinfo port line (default and -l modes) or ibqueryerrors "Link info:" line, remote part kept raw.
PORT_LINE_RE = re.compile(
    r"^\s*(?:(?P<guid>0x[0-9a-fA-F]{1,16})\s+)?(?:\"(?P<desc>[^\"]*)\"\s+)?"
    r"(?P<lid>\d+)\s+(?P<port>\d+)\[(?P<ext>[^\]]*)\]\s*==(?P<link>\(.*\))==>\s*(?P<remote>.*?)\s*$"
)
_REMOTE_UP_RE = re.compile(
    r"^(?:(?P<guid>0x[0-9a-fA-F]{1,16})\s+)?(?P<lid>\d+)\s+(?P<port>\d+)\[(?P<ext>[^\]]*)\]\s+"
    r"\"(?P<desc>.*)\"\s*(?:\((?P<hint>.*)\))?$"
)
_REMOTE_DOWN_RE = re.compile(r"^\[\s*\]\s*\"\"\s*(?:\(\s*\))?$")


@dataclass(frozen=True, slots=True)
class RemoteEnd:
    guid: str | None
    lid: int | None
    port: int | None
    description: str | None
    could_be: str | None
    connected: bool


def parse_remote_text(text: str) -> RemoteEnd | None:
    """The part after ``==>``: a peer, ``[  ] "" ( )`` (no peer) or ``"Port not available"``."""
    t = text.strip()
    if _REMOTE_DOWN_RE.match(t) or t == '"Port not available"' or not t:
        return RemoteEnd(guid=None, lid=None, port=None, description=None, could_be=None, connected=False)
    m = _REMOTE_UP_RE.match(t)
    if not m:
        return None
    hint = (m.group("hint") or "").strip() or None
    return RemoteEnd(
        guid=norm_guid(m.group("guid")),
        lid=int(m.group("lid")),
        port=int(m.group("port")),
        description=m.group("desc").strip(),
        could_be=hint,
        connected=True,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SmConfigOption(Record):
    """One ``key value`` line of a subnet manager configuration file (``opensm.conf`` as ``opensm --create-config``
    writes it, or the UFM/MLNX OpenSM file). ``key`` is lowercased; ``value`` is the rest of the line as written
    (``(null)`` for an unset file name, ``TRUE``/``FALSE`` for booleans, ``ar_updn,updn`` for an engine list)."""

    key: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LftEntry(Record):
    """One row of a switch's unicast linear forwarding table as ``ibroute`` / ``dump_lfts.sh`` / ``dump_fts`` print
    it (``0x0005 001 : (Channel Adapter portguid 0x...: 'gpu-a101 HCA-1')``): packets for ``dest_lid`` leave the
    switch through ``out_port`` (0 = the switch itself). ``dest_kind`` is ``CA``/``SW``/``RT`` when the tool resolved
    the destination (None with ``-n`` or ``unknown node and type``); ``dest_guid`` is the destination's *port* GUID;
    LMC path rows (``path #2 out of 4``) repeat the kind/GUID/name of their base LID's row."""

    switch_guid: str
    switch_lid: int | None  # None when the switch was addressed by a directed route
    switch_name: str | None  # node description as printed ('MF0;leaf01:MQM8700/U1')
    dest_lid: int
    out_port: int
    dest_kind: str | None
    dest_guid: str | None
    dest_name: str | None
