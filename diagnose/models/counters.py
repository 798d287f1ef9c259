"""One table that maps every source's counter names to one canonical vocabulary.

perfquery (IB PMA names), sysfs ``counters/``/``hw_counters/``, ibdiagnet2 PM_INFO, ibqueryerrors and
Prometheus node_exporter (``node_infiniband_*_total``) name the same counters differently.
Canonical names are snake_case and follow the sysfs spelling of the IB PMA attribute.
"""

from __future__ import annotations

# canonical -> (bit width in the basic PortCounters attribute or None for 64-bit only, aliases)
_TABLE: dict[str, tuple[int | None, tuple[str, ...]]] = {
    "symbol_error": (16, ("SymbolErrorCounter", "SymbolErrors", "symbol_error", "symbol_error_total")),
    "link_error_recovery": (
        8,
        ("LinkErrorRecoveryCounter", "LinkRecovers", "link_error_recovery", "link_error_recovery_total"),
    ),
    "link_downed": (8, ("LinkDownedCounter", "LinkDowned", "link_downed", "link_downed_total")),
    "port_rcv_errors": (16, ("PortRcvErrors", "RcvErrors", "port_rcv_errors", "port_receive_errors_total")),
    "port_rcv_remote_physical_errors": (
        16,
        ("PortRcvRemotePhysicalErrors", "RcvRemotePhysErrors", "port_rcv_remote_physical_errors"),
    ),
    "port_rcv_switch_relay_errors": (
        16,
        ("PortRcvSwitchRelayErrors", "RcvSwRelayErrors", "port_rcv_switch_relay_errors"),
    ),
    "port_xmit_discards": (16, ("PortXmitDiscards", "XmtDiscards", "port_xmit_discards", "port_transmit_discards_total")),
    "port_xmit_constraint_errors": (8, ("PortXmitConstraintErrors", "XmtConstraintErrors", "port_xmit_constraint_errors")),
    "port_rcv_constraint_errors": (8, ("PortRcvConstraintErrors", "RcvConstraintErrors", "port_rcv_constraint_errors")),
    "local_link_integrity_errors": (
        4,
        ("LocalLinkIntegrityErrors", "LinkIntegrityErrors", "local_link_integrity_errors", "local_link_integrity_errors_total"),
    ),
    "excessive_buffer_overrun_errors": (
        4,
        ("ExcessiveBufferOverrunErrors", "ExcBufOverrunErrors", "excessive_buffer_overrun_errors",
         "excessive_buffer_overrun_errors_total"),
    ),
    "vl15_dropped": (16, ("VL15Dropped", "vl15_dropped", "vl15_dropped_total")),
    "port_xmit_wait": (32, ("PortXmitWait", "XmtWait", "port_xmit_wait", "port_transmit_wait_total")),
    "port_xmit_data": (32, ("PortXmitData", "XmtData", "port_xmit_data", "port_data_transmitted_bytes_total")),
    "port_rcv_data": (32, ("PortRcvData", "RcvData", "port_rcv_data", "port_data_received_bytes_total")),
    "port_xmit_packets": (32, ("PortXmitPkts", "XmtPkts", "port_xmit_packets", "port_packets_transmitted_total")),
    "port_rcv_packets": (32, ("PortRcvPkts", "RcvPkts", "port_rcv_packets", "port_packets_received_total")),
    "unicast_xmit_packets": (None, ("PortUnicastXmitPkts", "unicast_xmit_packets", "unicast_packets_transmitted_total")),
    "unicast_rcv_packets": (None, ("PortUnicastRcvPkts", "unicast_rcv_packets", "unicast_packets_received_total")),
    "multicast_xmit_packets": (None, ("PortMulticastXmitPkts", "multicast_xmit_packets", "multicast_packets_transmitted_total")),
    "multicast_rcv_packets": (None, ("PortMulticastRcvPkts", "multicast_rcv_packets", "multicast_packets_received_total")),
    "qp1_dropped": (None, ("QP1Dropped", "qp1_dropped")),
    # PortRcvErrorDetails (perfquery -E): what PortRcvErrors is made of
    "port_local_physical_errors": (16, ("PortLocalPhysicalErrors", "port_local_physical_errors")),
    "port_malformed_packet_errors": (16, ("PortMalformedPktErrors", "PortMalformedPacketErrors",
                                          "port_malformed_packet_errors")),
    "port_buffer_overrun_errors": (16, ("PortBufferOverrunErrors", "port_buffer_overrun_errors")),
    "port_dlid_mapping_errors": (16, ("PortDLIDMappingErrors", "port_dlid_mapping_errors")),
    "port_vl_mapping_errors": (16, ("PortVLMappingErrors", "port_vl_mapping_errors")),
    "port_looping_errors": (16, ("PortLoopingErrors", "port_looping_errors")),
}

_ALIASES: dict[str, str] = {}
for _canon, (_bits, _names) in _TABLE.items():
    _ALIASES[_canon.lower()] = _canon
    for _n in _names:
        _ALIASES[_n.lower()] = _canon

# Host-side spellings (added for the sysfs / node_exporter parsers):
# * sysfs ``counters_ext/`` (kernels < 4.5 kept the 64-bit PMA counters there; prometheus/procfs
#   sysfs/class_infiniband.go ``parseInfiniBandCounters``);
# * node_exporter ``node_infiniband_*`` metric names (prometheus/node_exporter collector/infiniband_linux.go).
#   NOTE node_exporter's ``port_data_*_bytes_total`` are octets (procfs multiplies the sysfs 4-octet words
#   by 4), while sysfs/perfquery ``port_xmit_data``/``port_rcv_data`` are 4-octet words.
for _alias, _canon in {
    "port_xmit_data_64": "port_xmit_data",
    "port_rcv_data_64": "port_rcv_data",
    "port_xmit_packets_64": "port_xmit_packets",
    "port_rcv_packets_64": "port_rcv_packets",
    "port_unicast_xmit_packets": "unicast_xmit_packets",
    "port_unicast_rcv_packets": "unicast_rcv_packets",
    "port_multicast_xmit_packets": "multicast_xmit_packets",
    "port_multicast_rcv_packets": "multicast_rcv_packets",
    "port_constraint_errors_received_total": "port_rcv_constraint_errors",
    "port_constraint_errors_transmitted_total": "port_xmit_constraint_errors",
    "port_errors_received_total": "port_rcv_errors",
    "port_discards_transmitted_total": "port_xmit_discards",
    "port_receive_remote_physical_errors_total": "port_rcv_remote_physical_errors",
    "port_receive_switch_relay_errors_total": "port_rcv_switch_relay_errors",
}.items():
    _ALIASES.setdefault(_alias, _canon)

ERROR_COUNTERS: tuple[str, ...] = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


def canonical_counter(name: str) -> str | None:
    """Canonical name for a vendor counter name, or None when it is not in the vocabulary.

    ``node_infiniband_`` prefixes are stripped first, so Prometheus names resolve too.
    """
    key = name.strip().lower()
    if key.startswith("node_infiniband_"):
        key = key[len("node_infiniband_"):]
    return _ALIASES.get(key)


def counter_bits(canonical: str) -> int | None:
    """Width of the basic (non-extended) PMA counter; None when only 64-bit exists."""
    entry = _TABLE.get(canonical)
    return entry[0] if entry else None
