"""Record types of the NIC's own configuration: firmware NV configuration (``mlxconfig``) and RoCE QoS
(``mlnx_qos``)."""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.models.records import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class NicConfigOption(Record):
    """One NV configuration parameter of one device as ``mlxconfig -d <dev> q`` prints it.

    ``device`` is the ``Device:`` line (a PCI address or ``/dev/mst/...`` path), else the ``-d`` argument of the
    command line; ``device_type`` the ``Device type:`` line (``ConnectX6``). ``value`` is the value in force as
    printed (``Current`` when that column is shown, else ``Next Boot``), ``next_boot`` the Next Boot column
    (None when not shown), ``default`` the Default column of ``q -e`` (None otherwise); ``number`` is the
    value's number (``True(1)`` -> 1, ``IB(1)`` -> 1, ``44`` -> 44, ``0xff`` -> 255), None for arrays and text.
    ``pending`` is True when the row starts with ``*`` (next value differs from the current/default one).
    """

    device: str | None
    device_type: str | None
    key: str
    value: str
    next_boot: str | None
    default: str | None
    number: int | None
    pending: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RoceQosConfig(Record):
    """One ``mlnx_qos -i <if>`` report: ``trust`` (``pcp``/``dscp``), ``pfc_prios`` the comma-separated
    priorities whose PFC ``enabled`` flag is 1 (``""`` when none; None when the PFC table was not printed),
    ``dcbx`` the DCBX mode line (``OS controlled``). ``interface`` comes from the command line, else None."""

    interface: str | None
    trust: str | None
    pfc_prios: str | None
    dcbx: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DscpPrio(Record):
    """One DSCP value's priority in a ``mlnx_qos`` ``dscp2prio mapping:`` table."""

    interface: str | None
    dscp: int
    prio: int
