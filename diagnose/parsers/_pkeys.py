"""Partition records shared by the P_Key table parsers (``smpquery pkeys``, sysfs ``ports/N/pkeys/I``) and the
OpenSM partition configuration (``partitions.conf``).

A P_Key is 16 bits: the low 15 bits name the partition, bit 15 (0x8000) is the membership (set: full, clear:
limited). Two ports talk in a partition when their low 15 bits match and at least one of them is a full member;
a key whose low 15 bits are 0 is invalid (IBA vol. 1 10.9.1). The default partition is 0x7fff.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.models.records import Record

FULL_BIT = 0x8000
KEY_MASK = 0x7FFF
DEFAULT_PKEY = 0x7FFF


@dataclass(frozen=True, slots=True, kw_only=True)
class PkeyEntry(Record):
    """One non-empty entry of a port's P_Key table: ``pkey`` (16 bits, as printed) at ``index``.

    Where the port is: ``host``/``device``/``port`` for a local read (sysfs, ``smpquery pkeys -D 0``); ``lid``
    (and ``guid`` when the command gave ``-G``) for a remote ``smpquery pkeys <lid>``, with ``host`` then the host
    the command ran on and ``remote`` True. ``capacity`` is the table size the tool printed (None when not shown).
    """

    device: str | None
    port: int | None
    lid: int | None
    guid: str | None
    index: int
    pkey: int
    full: bool
    remote: bool = False
    capacity: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMember(Record):
    """One port specifier of an OpenSM partition definition (``partitions.conf``).

    ``member`` is a normalised port GUID (``0x`` + 16 hex digits) or a group keyword (``ALL``, ``ALL_CAS``,
    ``ALL_SWITCHES``, ``ALL_ROUTERS``, ``SELF``); ``membership`` is 'full', 'limited' or 'both'; ``pkey`` the 15-bit
    partition key (None when the definition leaves it to OpenSM to generate).
    """

    partition: str
    pkey: int | None
    member: str
    membership: str
    ipoib: bool = False


def pkey_hex(value: int | None) -> str | None:
    return None if value is None else f"0x{value & 0xFFFF:04x}"
