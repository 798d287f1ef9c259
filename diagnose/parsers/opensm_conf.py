"""``opensm.conf``: the OpenSM (and UFM / MLNX OpenSM) subnet manager configuration file.

Layout (linux-rdma/opensm ``opensm/osm_subnet.c`` ``osm_subn_output_conf``, what ``opensm --create-config`` and
``opensm -c`` write): section banners and comment blocks, then one ``key value`` line per option, blank lines
between::

    #
    # ROUTING OPTIONS
    #
    # Routing engine
    # Multiple routing engines can be specified separated by
    # ...
    routing_engine minhop

    # QoS policy file to be used
    qos_policy_file /etc/opensm/qos-policy.conf

UFM's ``conf/opensm/opensm.conf`` and the MLNX OpenSM file use the same ``key value`` syntax with their own keys
(``routing_engine ar_updn``, ``ar_mode``, ``adaptive_routing``, ``sharp_enabled`` ...); operators keep only the lines
they changed, with their own comments. Unset file names are written ``(null)``.

Records: :class:`~diagnose.parsers._fabric.SmConfigOption` per option line (key lowercased, value as written,
without a trailing `` # comment``). A prompt (``cat /etc/opensm/opensm.conf``) names the host. Lines that are neither
comments nor ``key value`` are counted as problems (a damaged or mixed paste); they never raise.
"""

from __future__ import annotations

import re

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._fabric import SmConfigOption
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "opensm_conf"

# Keys that only an OpenSM configuration has (osm_subnet.c option table; the UFM / MLNX OpenSM additions).
_KNOWN = (
    "routing_engine", "sm_priority", "sweep_interval", "partition_config_file", "qos_policy_file", "lmc_esp0",
    "sm_key", "sa_key", "m_key", "m_key_lease_period", "subnet_prefix", "max_op_vls", "packet_life_time",
    "vl_stall_count", "leaf_vl_stall_count", "head_of_queue_lifetime", "leaf_head_of_queue_lifetime",
    "force_link_speed", "subnet_timeout", "local_phy_errors_threshold", "overrun_errors_threshold",
    "no_partition_enforcement", "part_enforce", "reassign_lids", "force_heavy_sweep", "sweep_on_trap",
    "port_profile_switch_nodes", "hop_weights_file", "use_ucast_cache", "connect_roots", "lfts_file",
    "root_guid_file", "cn_guid_file", "io_guid_file", "guid_routing_order_file", "ids_guid_file", "lash_start_vl",
    "sminfo_polling_timeout", "polling_retry_number", "honor_guid2lid_file", "max_wire_smps", "transaction_timeout",
    "qos_max_vls", "qos_high_limit", "qos_vlarb_high", "qos_vlarb_low", "qos_sl2vl", "qos_ca_sl2vl",
    "qos_swe_sl2vl", "use_optimized_slvl", "ignore_other_sm", "node_name_map_name", "dump_files_dir",
    "max_operational_vls", "long_transaction_timeout", "routing_threads_num", "pgrp_policy_file", "scatter_ports",
    "virt_max_ports_in_process", "max_wire_smps_per_device", "enable_inc_mc_routing", "ar_mode", "adaptive_routing",
    "ar_enable", "perfmgr", "smp_threads", "gmp_threads", "sharp_enabled", "qos",
)
_KNOWN_SET = frozenset(_KNOWN)
_LINE_RE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z0-9_]{0,79})(?:[ \t]+(?P<value>.*?))?\s*$")
_TRAIL_COMMENT_RE = re.compile(r"\s+#.*$")
_SNIFF_KEY = re.compile(r"^[ \t]*(?P<key>" + "|".join(sorted(_KNOWN, key=len, reverse=True)) + r")[ \t]+\S",
                        re.MULTILINE)
_SNIFF_BANNER = re.compile(
    r"^# (?:DEVICE ATTRIBUTES|PARTITIONING|SWEEP|ROUTING|HANDOVER - MULTIPLE SMs|TIMING AND THREADING|QoS)"
    r" OPTIONS\s*$", re.MULTILINE)
_SNIFF_FOREIGN = re.compile(r"^[ \t]*(?:export[ \t]+)?[A-Z][A-Z0-9_]*=", re.MULTILINE)


def sniff(head: str) -> int:
    keys = {m.group("key") for m in _SNIFF_KEY.finditer(head)}
    banners = len(_SNIFF_BANNER.findall(head))
    if banners and keys:
        return 95
    if "routing_engine" in keys and len(keys) >= 2:
        return 90
    if len(keys) >= 4:
        return 85 if not _SNIFF_FOREIGN.search(head) else 45
    if len(keys) >= 2 and "routing_engine" in keys:
        return 70
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    bad = 0
    for n, raw in iter_lines(text):
        s = raw.strip()
        if not s or s.startswith("#") or s.startswith("```"):
            continue
        p = shell_prompt(raw)
        if p is not None:
            name, _command = p
            cur_host = name if name and name.lower() not in ("localhost", "localhost.localdomain") else host
            continue
        m = _LINE_RE.match(s)
        if not m or m.group("value") is None:
            bad += 1
            if bad <= 5:
                problems.append(f"line {n}: not a 'key value' option ({s[:60]!r})")
            continue
        key = m.group("key").lower()
        value = _TRAIL_COMMENT_RE.sub("", m.group("value")).strip()
        if not value:
            bad += 1
            continue
        records.append(SmConfigOption(source=source, line=n, text=clip(raw), host=cur_host, key=key, value=value))
    if bad > 5:
        problems.append(f"{bad} line(s) in all are not 'key value' options")


def is_known_key(key: str) -> bool:
    """Whether ``key`` is one of the OpenSM/UFM option names the sniffer looks for."""
    return key.lower() in _KNOWN_SET
